"""The communication probes for real on the GPUs of this machine (1 GPU: the 1-rank parts).

Each script runs as the runner runs it (``python -c SOURCE ARGS_JSON`` with this interpreter), in
a subprocess: this pytest process has CUDA initialised (conftest), and the probes fork workers.
ENVMGR_PROBE_OUT=DIR keeps every result as DIR/<probe>.json (evidence for docs/evidence/).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envmgr.probes.args import probe_env
from envmgr.probes.contract import MARKER
from envmgr.probes.runner import script_source
from envmgr.spec import load_spec

pytestmark = pytest.mark.gpu


# The device machine's site policy (NVLink multicast off), from its spec, as the runner passes it.
DEVICE_ENV = probe_env(load_spec(Path(__file__).resolve().parents[2] / "specs" / "h200.yaml").spec)


def run_probe(name: str, args: dict | None = None, timeout: float = 400, keep_as: str | None = None) -> dict:
    source = script_source(name)
    out = subprocess.run([sys.executable, "-c", source, json.dumps(args or {})], capture_output=True,
                         text=True, timeout=timeout, check=False, env={**os.environ, **DEVICE_ENV})
    lines = [line for line in out.stdout.splitlines() if line.startswith(MARKER)]
    assert len(lines) == 1, f"rc {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    result = json.loads(lines[0][len(MARKER):])
    keep = os.environ.get("ENVMGR_PROBE_OUT")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        Path(keep, f"{keep_as or name}.json").write_text(json.dumps(result, indent=1))
    print(f"{name}: {result['status']} in {result['duration_s']} s: {result['summary']}")
    return result


@pytest.fixture(scope="module")
def gpus() -> int:
    import torch

    return torch.cuda.device_count()


def test_nccl_allreduce_is_correct_eager_and_in_a_graph_for_every_algorithm(gpus):
    # named explicitly: by default a 1-rank run keeps only NCCL's choice (see the next test)
    result = run_probe("nccl_allreduce", {"combinations": [{"algo": None}, {"algo": "Ring"}, {"algo": "Tree"}]})
    details = result["details"]
    assert result["status"] == "pass", result["summary"]
    assert details["world_size"] == gpus and details["nccl_version"]
    assert [c["label"] for c in details["combinations"]] == ["default", "algo=Ring", "algo=Tree"]
    for combo in details["combinations"]:
        assert combo["ok"] and combo["multicast"]["NCCL_NVLS_ENABLE"] == "0"
        assert len(combo["eager"]) == len(combo["graph"]) == len(details["sizes"])
        assert all(row["wrong"] == 0 and row["time_us"] > 0 for row in combo["eager"] + combo["graph"])
    for times in details["verify_size_us"].values():
        assert times["eager_us"] > 0 and times["graph_us"] > 0
    if gpus == 1:
        assert details["multi_rank"]["skipped"] and "multi-rank part skipped" in result["summary"]
        assert all(row["busbw_gbs"] == 0 for c in details["combinations"] for row in c["eager"])


def test_nccl_allreduce_saturates_towards_the_link_at_large_messages(gpus):
    """Sizes up to 1 GiB, NCCL's own choice only: the bandwidth end of the sweep, for the
    busbw-vs-nominal check (evidence nccl_allreduce_large.json)."""
    if gpus < 2:
        pytest.skip("one GPU: nothing crosses a link")
    sizes = [2**k for k in range(20, 31, 2)]  # 1 MiB .. 1 GiB
    result = run_probe("nccl_allreduce", {"sizes": sizes, "combinations": [{"algo": None}], "graph": False,
                                          "iters": 10, "warmup": 3}, keep_as="nccl_allreduce_large")
    assert result["status"] == "pass", result["summary"]
    rows = result["details"]["combinations"][0]["eager"]
    assert all(r["wrong"] == 0 for r in rows)
    busbw = [r["busbw_gbs"] for r in rows if r["bytes"] >= 2**20]
    assert busbw[-1] > busbw[0]  # more bytes per launch: more of the link


def test_nccl_allreduce_default_at_one_rank_skips_ring_and_tree_with_the_reason(gpus):
    if gpus != 1:
        pytest.skip("about the one-GPU default")
    details = run_probe("nccl_allreduce", {"sizes": [43008]})["details"]
    assert [c["label"] for c in details["combinations"]] == ["default"]
    assert "always runs Ring/Simple" in details["combinations_skipped"]


def test_nccl_alltoall_at_dispatch_sizes(gpus):
    result = run_probe("nccl_alltoall")
    details = result["details"]
    assert result["status"] == "pass", result["summary"]
    assert details["world_size"] == gpus
    [combo] = details["combinations"]
    assert [row["tokens"] for row in combo["eager"]] == details["tokens"]
    assert all(row["wrong"] == 0 for row in combo["eager"] + combo["graph"])
    assert details["verify_tokens_us"]["default"]["graph_us"] > 0


def test_symm_mem_allocates_and_rendezvous_at_every_world_size(gpus):
    result = run_probe("symm_mem")
    details = result["details"]
    assert result["status"] == "pass", result["summary"]
    assert "empty" in details["api"]["module"] and "rendezvous" in details["api"]["module"]
    assert [ws["world_size"] for ws in details["world_sizes"]] == [gpus]  # passing: no diagnostic run
    assert all(ws["ok"] and ws["peer_wrong"] == 0 for ws in details["world_sizes"])
    assert "one_shot_all_reduce" in details["world_sizes"][0]  # a time, or the error text (informational)
    assert details["multicast"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"  # the device spec's env: multicast off


def test_p2p_reports_topology_and_checks_pairs_from_two_gpus(gpus):
    result = run_probe("p2p")
    details = result["details"]
    assert details["topology"]["gpus"] == [f"GPU{i}" for i in range(len(details["topology"]["gpus"]))]
    assert details["gpus_visible"] == gpus
    if gpus == 1:
        assert result["status"] == "skip" and "one GPU" in result["summary"]
    else:
        assert result["status"] in ("pass", "fail"), result["summary"]  # fail = a pair without P2P: a finding
        assert len(details["pairs"]) == gpus * (gpus - 1)


def test_a_hung_combination_is_killed_at_its_timeout_and_the_next_one_runs():
    # the test hook makes rank 0 sleep before it joins NCCL: the kill path, on the real machine
    result = run_probe("nccl_allreduce", {"_hang_rank": 0, "timeout_s": 5, "sizes": [8192],
                                          "combinations": [{"algo": None}, {"algo": "Ring"}]},
                       keep_as="nccl_allreduce_hang_test")  # not over the real run's evidence
    assert result["status"] == "fail" and "hang" in result["summary"]
    assert result["duration_s"] < 40
    assert all(c["wall_s"] < 15 for c in result["details"]["combinations"])
