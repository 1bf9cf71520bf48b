"""The comm microbenchmark for real on the GPUs of this machine (1 GPU: 1-rank collectives, launch overhead only).

It runs the envmgr way: ``run_comm_bench`` sends the assembled script through the probe runner to
this interpreter (``python -c SOURCE ARGS_JSON`` in a subprocess: this pytest process has CUDA
initialised by conftest, and the probe forks its workers).
ENVMGR_PROBE_OUT=DIR keeps the result as DIR/comm_bench.json and its summary as
DIR/comm_bench_summary.json (evidence for docs/evidence/).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import comm_summary
import pytest

from envmgr.bench import comm
from envmgr.probes import runner
from envmgr.probes.args import probe_env
from envmgr.probes.runner import ProbeInfo
from envmgr.spec import load_spec
from envmgr.targets.local import LocalTarget

pytestmark = pytest.mark.gpu
# The device machine's site policy (NVLink multicast off), from its spec, as the runner passes it.
DEVICE_ENV = probe_env(load_spec(Path(__file__).resolve().parents[2] / "specs" / "h200.yaml").spec)


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """Until the PROBES line is in runner.py, the line proposed for it."""
    if comm.PROBE_ID not in runner.PROBES:
        monkeypatch.setitem(runner.PROBES, comm.PROBE_ID, ProbeInfo(300, True, "verify-step communication"))


@pytest.fixture(scope="module")
def gpus() -> int:
    import torch

    return torch.cuda.device_count()


def keep(name: str, data: dict) -> None:
    out = os.environ.get("ENVMGR_PROBE_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, name).write_text(json.dumps(data, indent=1))


@pytest.mark.parametrize("world_size", [None, 2, 4, 8], ids=["all-gpus", "ws2", "ws4", "ws8"])
def test_tp_and_ep_verify_step_eager_and_in_one_graph(gpus, world_size):
    """Every GPU (evidence comm_bench.json), then world sizes 2, 4, 8 where the machine has them
    (comm_bench_ws{N}.json): issue 7's TP-vs-EP comparison per world size."""
    if world_size is not None and (world_size > gpus or world_size == gpus):
        pytest.skip(f"world size {world_size}: " + ("covered by all-gpus" if world_size == gpus
                                                     else f"this machine has {gpus} GPU(s)"))
    lines: list[str] = []
    result = comm_summary.run_comm_bench(LocalTarget(), sys.executable, comm.comm_args(world_size=world_size),
                                         lines.append, env=DEVICE_ENV)
    summary = comm_summary.summarize(result)
    suffix = f"_ws{world_size}" if world_size else ""
    keep(f"comm_bench{suffix}.json", result)
    keep(f"comm_bench{suffix}_summary.json", summary)
    gpus = world_size or gpus
    print("\n".join(lines + comm_summary.summary_lines(summary)))
    details = result["details"]
    assert result["status"] == "pass", f"{result['summary']}\n{details.get('traceback')}"
    assert details["world_size"] == gpus and details["nccl_version"]
    assert details["multicast"]["NCCL_NVLS_ENABLE"] == "0"  # from the device spec's env
    assert details["launch_overhead_only"] is (gpus == 1)
    for name in ("tp", "ep"):
        scheme = details[name]
        assert scheme["ops"] == 122
        for mode in ("eager", "graph"):
            numbers = scheme[mode]
            assert numbers["wrong"] == 0 and numbers["step_us"] > 0 and numbers["per_op_us"] > 0, (name, mode)
    assert all(row["step_us"] > 0 and row["share_of_budget"] > 0 for row in summary["rows"])
    # one graph launch replaces 122 launches: the replayed step is the cheaper one
    assert details["tp"]["graph"]["step_us"] < details["tp"]["eager"]["step_us"]


def test_a_hung_rank_is_killed_at_its_timeout():
    # the test hook makes rank 0 sleep before it joins NCCL: the kill path, on the real machine
    args = {**comm.comm_args(world_size=1, timeout_s=5), "_hang_rank": 0}
    result = comm_summary.run_comm_bench(LocalTarget(), sys.executable, args)
    assert result["status"] == "fail" and "hang" in result["summary"]
    assert result["details"]["wall_s"] < 15
