"""REAL SGLang on the GPU machine, through envmgr: no test double anywhere in this file.

Needs the offline SGLang 0.5.11 environment that ``tools/gpu-sglang`` builds and installs
(``bash .sgl/setup.sh`` makes the venv ``/opt/sgl``); skips elsewhere. Tiny random-weight
models are made on the spot with ``tools/gpu-sglang/make_tiny_model.py``.

What it proves, each with the real server:
- ``envmgr bench`` (the CLI, as a user runs it): a baseline and a CUDA-graph cell reach ready
  and complete a bench_serving load; a KV pool too small at a value that really fails on this
  release is explained (kv_pool_oom, with the boundary the model predicts); the value above the
  boundary runs; configs validate knows cannot work are skipped before launch; results record
  the server's own version, the GPU, the date and the load; ``envmgr report`` shows them;
- the launcher, on failures provoked on purpose: too many GPUs for the TP size, a flag value
  the release's argparse rejects, a model path that does not exist, a process killed mid-load,
  a server stopped with SIGSTOP (hung); each verdict within seconds of its cause;
- teardown: no process left, and the GPU memory the server held is given back;
- a MoE model with the EP flags one GPU allows, and what happens with FlashInfer A2A and DeepEP.

``ENVMGR_EVIDENCE_DIR=DIR`` writes each test's verdicts and timings there as JSON.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from ports import free_port

from envmgr.bench.command import ServerCommand
from envmgr.bench.launch import Limits, RunningServer
from envmgr.bench.results import read_result
from envmgr.bench.triage import triage_file
from envmgr.targets import open_target
from envmgr.targets.service import group_members

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "tools" / "gpu-sglang"
SGL = Path(os.environ.get("ENVMGR_SGLANG_VENV", "/opt/sgl"))
MODELS = Path(os.environ.get("ENVMGR_SGLANG_MODELS", "/opt/models"))
URL = f"venv://{SGL}"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
# The slim sglang-kernel of the bundle has no FA3: triton attention and sampling (tools/gpu-sglang).
BASE_FLAGS = {"--host": "127.0.0.1", "--attention-backend": "triton", "--sampling-backend": "pytorch",
              "--disable-cuda-graph": True, "--disable-piecewise-cuda-graph": True,
              "--mem-fraction-static": 0.3, "--log-level": "info"}
HARDWARE = {"gpu": {"arch": "sm_90", "count": 1, "model": "NVIDIA H200", "segment": "datacenter",
                    "memory_gb": 141}, "interconnect": "nvlink"}
PACKAGES = {"torch": "2.11.0", "sglang": "0.5.11", "sglang-kernel": "0.4.2",
            "flashinfer-python": "0.6.8.post1"}


# --- fixtures and helpers ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sglang() -> Path:
    python = SGL / "bin" / "python"
    if not python.exists():
        pytest.skip(f"no SGLang environment at {SGL} (run `bash .sgl/setup.sh` from tools/gpu-sglang)")
    return python


def tiny_model(python: Path, arch: str) -> Path:
    path = MODELS / f"tiny-{arch}"
    if not (path / "model.safetensors").exists():
        subprocess.run([str(python), str(KIT / "make_tiny_model.py"), str(path), "--arch", arch,
                        "--tokenizer-dir", str(MODELS / "tok")], check=True, env={**os.environ, **OFFLINE})
    return path


def evidence(name: str, data: object) -> None:
    folder = os.environ.get("ENVMGR_EVIDENCE_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}.json").write_text(json.dumps(data, indent=2, default=str) + "\n")


def gpu_used_mib() -> int:
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=True).stdout
    return sum(int(x) for x in out.split())


def gpu_pids() -> set[int]:
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True).stdout
    return {int(x) for x in out.split()}


def flag_argv(flags: dict) -> list[str]:
    argv: list[str] = []
    for flag, value in flags.items():
        if value is True:
            argv.append(flag)
        elif value not in (False, None):
            argv += [flag, str(value)]
    return argv


def command(python: Path, model: Path, extra: dict | None = None, name: str = "real") -> ServerCommand:
    port = free_port()
    flags = {**BASE_FLAGS, "--port": port, **(extra or {})}
    argv = [str(python), "-m", "sglang.launch_server", "--model-path", str(model), *flag_argv(flags)]
    return ServerCommand(name, tuple(argv), dict(OFFLINE), "127.0.0.1", port)


def gpu_after(used_before: int) -> dict:
    """The GPU once the driver has freed what a stopped server held (it does a moment later)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (gpu_pids() or gpu_used_mib() > used_before + 64):
        time.sleep(0.5)
    return {"gpu_used_mib_before": used_before, "gpu_used_mib_after": gpu_used_mib(),
            "gpu_pids_after": sorted(gpu_pids())}


def assert_gpu_back(gpu: dict) -> None:
    assert not gpu["gpu_pids_after"], gpu
    assert gpu["gpu_used_mib_after"] <= gpu["gpu_used_mib_before"] + 64, gpu


def assert_gpu_given_back(server: RunningServer, used_before: int) -> dict:
    """No process of the server's group left, none of them on the GPU, the memory back."""
    assert server.stopped_cleanly is True, server.leftovers
    assert group_members(server.service.pgid) == []
    gpu = gpu_after(used_before)
    assert_gpu_back(gpu)
    return {**gpu, "processes_left": []}


def write_spec(tmp_path: Path, model: Path, configs: dict, **bench) -> Path:
    spec = {
        "apiVersion": "envmgr/v1",
        "metadata": {"name": f"h200-real-{model.name}", "description": "real SGLang 0.5.11 on one H200"},
        "hardware": HARDWARE, "driver": {"version": ">=580"},
        "cuda": {"toolkits": [{"version": "13.0", "source": "image"}]},
        "python": {"version": "3.12", "torch_cuda": "cu130", "packages": PACKAGES},
        "realize": {"backend": "local"},
        "benchmarks": {"model_path": str(model), "server_flags": {**BASE_FLAGS, "--port": free_port()},
                       "configs": configs, **bench},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def envmgr(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "envmgr", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "160"})
    print(f"$ envmgr {' '.join(args)}  (rc {proc.returncode}, {time.monotonic() - started:.1f} s)")
    print(proc.stdout[-20000:], proc.stderr[-4000:])
    return proc


def results(home: Path) -> dict:
    return {p.parent.name: read_result(p.parent) for p in (home / "bench" / "targets").glob("*/*/result.json")}


# --- envmgr bench, end to end -----------------------------------------------------------------


def test_bench_real_server_dense_model(sglang, tmp_path):
    model = tiny_model(sglang, "llama")
    spec = write_spec(tmp_path, model, {
        "baseline": {},
        "graphs": {"description": "CUDA graphs captured (bs up to 8)",
                   "flags": {"--disable-cuda-graph": False, "--cuda-graph-max-bs": 8}},
        # 0.0006 failed and 0.001 ran on 2026-12-01: the boundary the KV model must predict
        "kv_0006": {"flags": {"--mem-fraction-static": 0.0006}},
        "kv_0010": {"flags": {"--mem-fraction-static": 0.001}},
        "tp2_on_one_gpu": {"flags": {"--tp-size": 2}},
        "typo": {"flags": {"--moe-a2a-backnd": "flashinfer"}},
    }, startup_timeout_s=300, stall_timeout_s=120,
        load={"dataset": "random-ids", "input_len": 128, "output_len": 32, "num_prompts": 64,
              "max_concurrency": 8, "timeout_s": 180})
    home = tmp_path / "home"
    used_before = gpu_used_mib()
    validate = envmgr("validate", str(spec))
    assert validate.returncode == 1 and "parallel-exceeds-gpus" in validate.stdout
    bench = envmgr("bench", str(spec), "--env", URL, "--home", str(home))
    assert bench.returncode == 1  # some cells were skipped or crashed, on purpose
    cells = results(home)

    for name in ("baseline", "graphs", "kv_0010"):
        cell = cells[name]
        assert cell.outcome == "ok", cell.summary
        assert cell.load.completed == 64 and cell.load.output_throughput > 100
        assert cell.served_by.server_version == "0.5.11" and not cell.served_by.test_double
        assert "H200" in cell.served_by.gpu
        assert cell.load_params["num_prompts"] == 64
        # a warm-up, then the default three measured runs: the median recorded with its spread
        assert cell.warmup and len(cell.runs) == 3 and cell.load in cell.runs and cell.spread is not None
    kv = cells["kv_0006"]
    assert kv.outcome == "crashed" and kv.findings[0].id == "kv_pool_oom", kv.summary
    values = kv.findings[0].values
    assert 0.0006 < values["min_mem_fraction_static"] < 0.001  # the real boundary is between them
    assert 0.5 < values["suggested_mem_fraction_static"] <= 0.95
    assert cells["tp2_on_one_gpu"].outcome == "skipped"
    assert cells["tp2_on_one_gpu"].findings[0].id == "parallel-exceeds-gpus"
    assert cells["typo"].outcome == "skipped" and cells["typo"].findings[0].id == "flag-unknown"

    report = envmgr("report", "--home", str(home), "--out", str(tmp_path / "report"))
    assert report.returncode == 0 and "sglang 0.5.11 on NVIDIA H200" in report.stdout
    assert "TEST DOUBLE" not in report.stdout
    gpu = gpu_after(used_before)
    assert_gpu_back(gpu)
    evidence("bench_dense", {"cells": {k: v.to_dict() for k, v in cells.items()}, "gpu": gpu,
                             "validate": validate.stdout, "bench": bench.stdout, "report": report.stdout})


# --- the launcher on failures provoked on purpose -------------------------------------------------


FAILURES = {
    # name: (flags, model override, expected finding)
    "tp2_on_one_gpu": ({"--tp-size": 2}, None, "not_enough_gpus"),
    "argparse_rejects_value": ({"--moe-a2a-backend": "bogus"}, None, "server_args_rejected"),
    "model_path_missing": ({}, "/opt/models/does-not-exist", "model_path_missing"),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_real_failure_is_explained_within_seconds(sglang, tmp_path, case):
    flags, model, expected = FAILURES[case]
    cmd = command(sglang, Path(model) if model else tiny_model(sglang, "llama"), flags, case)
    used_before = gpu_used_mib()
    limits = Limits(startup_s=240, stall_s=120, grace_s=10)
    with open_target(URL) as backend:
        server = RunningServer(backend, cmd, tmp_path / "server.log", limits, progress=print)
        with server:
            launch = server.wait_ready()
    batch = [f.id for f in triage_file(tmp_path / "server.log")]
    record = {"argv": list(cmd.argv), "status": launch.status, "reason": launch.reason,
              "seconds": launch.seconds, "detected_after_s": launch.detected_after_s,
              "returncode": launch.returncode, "findings": [f.to_dict() for f in launch.findings],
              "batch_triage": batch, "last_line": launch.last_line,
              "log_tail": (tmp_path / "server.log").read_text(errors="replace").splitlines()[-40:]}
    record.update(assert_gpu_given_back(server, used_before))
    evidence(f"failure_{case}", record)
    assert launch.status == "crashed", record
    assert launch.findings and launch.findings[0].id == expected, record
    assert batch[0] == expected  # `envmgr triage server.log` says the same
    assert "None" not in launch.reason
    # decided by the log line itself, within seconds of it (the scenario waited 600 s)
    assert launch.detected_after_s is not None and launch.detected_after_s < 5, record


def test_process_killed_mid_load_is_explained(sglang, tmp_path):
    model = tiny_model(sglang, "llama")
    cmd = command(sglang, model, name="killed_mid_load")
    used_before = gpu_used_mib()
    load_argv = [str(sglang), "-m", "sglang.bench_serving", "--backend", "sglang", "--host", "127.0.0.1",
                 "--port", str(cmd.port), "--dataset-name", "random-ids", "--random-input-len", "128",
                 "--random-output-len", "256", "--num-prompts", "400", "--max-concurrency", "8",
                 "--output-file", str(tmp_path / "load.jsonl")]
    with open_target(URL) as backend:
        server = RunningServer(backend, cmd, tmp_path / "server.log", Limits(startup_s=240, stall_s=120), progress=print)
        with server:
            assert server.wait_ready().status == "ready"
            outcome: dict = {}
            loader = threading.Thread(target=lambda: outcome.update(
                result=backend.run(load_argv, timeout=300, env=dict(OFFLINE))))
            loader.start()
            log = tmp_path / "server.log"
            deadline = time.monotonic() + 90
            while log.read_text(errors="replace").count('"POST /generate HTTP/1.1" 200') < 3:
                assert time.monotonic() < deadline, "the load never reached the server"
                time.sleep(0.2)  # the warmup's request is one; wait for the load's own
            load_requests_before_kill = log.read_text(errors="replace").count('"POST /generate HTTP/1.1" 200') - 1
            schedulers = [pid for pid in group_members(server.service.pgid)
                          if b"sglang::scheduler" in Path(f"/proc/{pid}/cmdline").read_bytes()]
            assert schedulers, "no sglang::scheduler process in the server's group"
            killed_at = time.monotonic()
            os.kill(schedulers[0], signal.SIGKILL)
            found = None
            while time.monotonic() - killed_at < 30 and found is None:
                found = next(iter(server.triage.findings()), None)
                time.sleep(0.1)
            explained_after = round(time.monotonic() - killed_at, 2)
            loader.join(timeout=120)
    load = outcome.get("result")
    record = {"killed_pid": schedulers[0], "finding": found.to_dict() if found else None,
              "load_requests_done_before_kill": load_requests_before_kill,
              "explained_after_kill_s": explained_after,
              "load_returncode": load.returncode if load else None,
              "load_tail": (load.stdout + load.stderr).splitlines()[-15:] if load else None,
              "log_tail": (tmp_path / "server.log").read_text(errors="replace").splitlines()[-30:]}
    record.update(assert_gpu_given_back(server, used_before))
    evidence("failure_killed_mid_load", record)
    assert found is not None and found.id == "server_subprocess_died", record
    assert found.values["exit_code"] == -9 and "SIGKILL" in found.message
    assert explained_after < 10
    assert load is not None and not load.ok  # the load did not complete


def test_a_stopped_server_is_hung_not_a_timeout(sglang, tmp_path):
    model = tiny_model(sglang, "llama")
    cmd = command(sglang, model, name="sigstop")
    used_before = gpu_used_mib()
    limits = Limits(startup_s=300, stall_s=15, grace_s=5)
    with open_target(URL) as backend:
        server = RunningServer(backend, cmd, tmp_path / "server.log", limits, progress=print)
        with server:
            deadline = time.monotonic() + 120
            while "Load weight begin" not in (tmp_path / "server.log").read_text(errors="replace"):
                assert time.monotonic() < deadline, "the server never began loading"
                assert server.service.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
                time.sleep(0.2)
            os.killpg(server.service.pgid, signal.SIGSTOP)  # every process of the server, frozen
            stopped_at = time.monotonic()
            launch = server.wait_ready()
            decided_after = round(time.monotonic() - stopped_at, 2)
    record = {"status": launch.status, "reason": launch.reason, "seconds": launch.seconds,
              "decided_after_sigstop_s": decided_after, "stall_limit_s": limits.stall_s}
    record.update(assert_gpu_given_back(server, used_before))  # SIGKILL ends stopped processes
    evidence("failure_sigstop_hung", record)
    assert launch.status == "hung", record
    assert limits.stall_s <= decided_after < limits.stall_s + 10
    assert "last line:" in launch.reason and "nothing" not in launch.reason


# --- a MoE model ----------------------------------------------------------------------------------


def test_bench_real_server_moe_model(sglang, tmp_path):
    model = tiny_model(sglang, "qwen3moe")
    spec = write_spec(tmp_path, model, {
        "ep1_triton": {"description": "EP size 1 (all one GPU allows), triton MoE runner",
                       "flags": {"--moe-runner-backend": "triton", "--ep-size": 1, "--moe-a2a-backend": "none"}},
        "ep_flashinfer_a2a": {"description": "the scenario's EP flags at one GPU",
                              "flags": {"--moe-a2a-backend": "flashinfer",
                                        "--moe-runner-backend": "flashinfer_cutlass"}},
        "ep_deepep": {"flags": {"--moe-a2a-backend": "deepep"}},
    }, startup_timeout_s=400, stall_timeout_s=60,
        load={"dataset": "random-ids", "input_len": 128, "output_len": 32, "num_prompts": 32,
              "max_concurrency": 8, "timeout_s": 120})
    home = tmp_path / "home"
    used_before = gpu_used_mib()
    bench = envmgr("bench", str(spec), "--env", URL, "--home", str(home))
    cells = results(home)
    gpu = gpu_after(used_before)
    evidence("bench_moe", {"cells": {k: v.to_dict() for k, v in cells.items()}, "gpu": gpu, "bench": bench.stdout})
    assert cells["ep1_triton"].outcome == "ok", cells["ep1_triton"].summary
    assert cells["ep1_triton"].served_by.server_version == "0.5.11"
    # the environment has no deep_ep: found before launch, not after loading the weights
    assert cells["ep_deepep"].outcome == "skipped"
    assert cells["ep_deepep"].findings[0].id == "feature-package-missing"
    # on 2026-12-01 the warmup never finished: now a hang at the stall limit, not the startup limit
    a2a = cells["ep_flashinfer_a2a"]
    assert a2a.outcome in ("hung", "ok", "crashed"), a2a.summary
    if a2a.outcome == "hung":
        assert a2a.startup_s < 400 and "health polls" in a2a.summary
    assert_gpu_back(gpu)


def test_deepep_without_deep_ep_is_explained(sglang, tmp_path):
    """What the pre-launch check prevents, launched anyway: the real ImportError, triaged."""
    cmd = command(sglang, tiny_model(sglang, "qwen3moe"), {"--moe-a2a-backend": "deepep"}, "deepep")
    used_before = gpu_used_mib()
    with open_target(URL) as backend:
        server = RunningServer(backend, cmd, tmp_path / "server.log", Limits(startup_s=300, stall_s=120), progress=print)
        with server:
            launch = server.wait_ready()
    record = {"status": launch.status, "reason": launch.reason, "seconds": launch.seconds,
              "detected_after_s": launch.detected_after_s, "returncode": launch.returncode,
              "findings": [f.to_dict() for f in launch.findings]}
    record.update(assert_gpu_given_back(server, used_before))
    evidence("failure_deepep_missing", record)
    assert launch.status == "crashed" and launch.findings[0].id == "feature_package_missing", record
    assert launch.findings[0].values["package"] == "DeepEP"
    assert launch.detected_after_s is not None and launch.detected_after_s < 5


def test_a_feature_the_real_server_turns_off_is_marked(sglang, tmp_path):
    """SGLang 0.5.11 accepts --attention-backend torch_native with CUDA graphs on, logs that it
    turned the graphs off, and serves: the cell has a number, marked as run without them."""
    model = tiny_model(sglang, "llama")
    spec = write_spec(tmp_path, model, {
        "torch_native": {"flags": {"--attention-backend": "torch_native", "--disable-cuda-graph": False,
                                   "--cuda-graph-max-bs": 8}},
    }, startup_timeout_s=300, stall_timeout_s=120,
        load={"dataset": "random-ids", "input_len": 64, "output_len": 16, "num_prompts": 16,
              "max_concurrency": 4, "timeout_s": 180})
    home = tmp_path / "home"
    bench = envmgr("bench", str(spec), "--env", URL, "--home", str(home))
    cell = results(home)["torch_native"]
    assert cell.outcome == "ok", cell.summary
    assert cell.ran_without == ("CUDA graphs",), cell.findings
    assert bench.returncode == 0 and "RAN WITHOUT CUDA graphs" in bench.stderr  # the progress
    log = next((home / "bench" / "targets").glob("*/torch_native/server.log"))
    lines = [line for line in log.read_text().splitlines() if "graph is disabled" in line.lower()]
    assert lines, "the real server logged no such warning"
    triage = envmgr("triage", str(log))
    assert triage.returncode == 2 and "feature off: CUDA graphs" in triage.stdout  # warnings only
    report = envmgr("report", "--home", str(home), "--out", str(tmp_path / "report"))
    assert report.returncode == 0 and "RAN WITHOUT" in report.stdout
    html = (tmp_path / "report" / "report.html").read_text()
    assert "ran without CUDA graphs" in html
    evidence("feature_off_cuda_graphs", {"cell": cell.to_dict(), "warning_lines": lines,
                                         "bench": bench.stdout, "triage": triage.stdout,
                                         "report": report.stdout})


# SGLang's own expert-location set-up, called with the expert-parallel size a multi-GPU launch
# of this model would have (3 does not divide its 8 experts): one GPU cannot start EP > 1.
EXPERT_LOCATION = """
import sys, types
from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.eplb.expert_location import ExpertLocationMetadata
from sglang.srt.server_args import ServerArgs
args = ServerArgs(model_path=sys.argv[1])
config = ModelConfig.from_server_args(args)
args.ep_size = int(sys.argv[2])
ExpertLocationMetadata._init_common(args, config)
"""


def test_sglang_expert_count_not_divisible_by_ep_size_is_explained(sglang, tmp_path):
    model = tiny_model(sglang, "qwen3moe")
    proc = subprocess.run([str(sglang), "-c", EXPERT_LOCATION, str(model), "3"], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **OFFLINE})
    log = tmp_path / "expert_location.log"
    log.write_text(proc.stdout + proc.stderr)
    findings = triage_file(log)
    evidence("ep_experts_divisibility", {"returncode": proc.returncode, "output": proc.stdout + proc.stderr,
                                         "findings": [f.to_dict() for f in findings]})
    assert proc.returncode != 0 and "assert num_physical_experts % ep_size == 0" in proc.stderr
    assert [f.id for f in findings][:1] == ["ep_experts_divisibility"], proc.stderr[-2000:]
