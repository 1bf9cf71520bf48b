"""Teardown gives the GPU back: the SGLang TEST DOUBLE's scheduler child holds real GPU memory
(SGLANG_DOUBLE_GPU_GB) like a rank holds its weights; after ready, after a crash whose process
stays up, and after a hang, ``stop`` leaves no process and the memory is free again."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from ports import free_port

from envmgr.bench.command import ServerCommand
from envmgr.bench.launch import Limits, RunningServer
from envmgr.targets.local import LocalTarget

pytestmark = pytest.mark.gpu

DOUBLE = Path(__file__).resolve().parents[1] / "doubles" / "sglang_double"
HOLD_GB = 16


def free_gb() -> float:
    import torch

    free, _ = torch.cuda.mem_get_info()
    return free / 2**30


def wait_for(predicate, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


@pytest.mark.parametrize("scenario, status", [
    ("ready", "ready"), ("assert_after_weights", "crashed"), ("hang", "hung")])
def test_stop_returns_the_gpu_memory(tmp_path, scenario, status):
    before = free_gb()
    port = free_port()
    argv = (sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/Kimi-K2.5-INT4",
            "--tp-size", "1", "--port", str(port))
    env = {"PYTHONPATH": os.pathsep.join([str(DOUBLE), os.environ.get("PYTHONPATH", "")]),
           "SGLANG_DOUBLE_SCENARIO": scenario, "SGLANG_DOUBLE_DELAY": "0.1",
           "SGLANG_DOUBLE_GPU_GB": str(HOLD_GB)}
    cmd = ServerCommand(scenario, argv, env, "127.0.0.1", port)
    server = RunningServer(LocalTarget(), cmd, tmp_path / "server.log", Limits(startup_s=120, stall_s=8, grace_s=10))
    with server:
        result = server.wait_ready()
        held = before - free_gb()
    after = free_gb() if wait_for(lambda: before - free_gb() < 1.0) else free_gb()
    record = {"scenario": scenario, "status": result.status, "reason": result.reason,
              "root": result.findings[0].id if result.findings else None,
              "decided_after_log_line_s": result.detected_after_s, "wait_s": result.seconds,
              "free_gb_before": round(before, 2), "held_gb_while_running": round(held, 2),
              "free_gb_after_stop": round(after, 2), "leftover_processes": server.leftovers}
    out = os.environ.get("ENVMGR_PROBE_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"launch_teardown_{scenario}.json").write_text(json.dumps(record, indent=2))
    assert result.status == status, record
    assert held > HOLD_GB - 1, record  # the double really held the memory while it ran
    assert server.leftovers == [], record
    assert before - after < 1.0, record  # and stop gave it back
