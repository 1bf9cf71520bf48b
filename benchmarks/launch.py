"""How fast the launcher knows, and how clean it leaves the host (issue 6).

    python benchmarks/launch.py [--runs 5] [--json]

Against the SGLang TEST DOUBLE (tests/doubles/sglang_double), which replays real SGLang log
sequences over real HTTP, with SGLANG_DOUBLE_DELAY=0.02 s between log lines:
- ready: from the ready line reaching envmgr to the verdict, and the whole wait;
- kv_pool_oom (the process exits) and assert_after_weights (the process stays up, only the
  log says it is dead): from the fatal line reaching envmgr to the verdict (target <= 5 s;
  the scenario's operator waited 600 s);
- hang: verdict time against the stall limit (2 s here);
- teardown: seconds for ``stop`` and the processes left afterwards (target: none).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envmgr.bench.command import ServerCommand  # noqa: E402
from envmgr.bench.launch import Limits, RunningServer  # noqa: E402
from envmgr.targets.local import LocalTarget  # noqa: E402

DOUBLE = ROOT / "tests" / "doubles" / "sglang_double"
SCENARIOS = ("ready", "kv_pool_oom", "assert_after_weights", "hang")
LIMITS = Limits(startup_s=120, stall_s=2, grace_s=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one(scenario: str, workdir: Path) -> dict:
    port = free_port()
    argv = (sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/Kimi-K2.5-INT4",
            "--tp-size", "8", "--port", str(port))
    env = {"PYTHONPATH": str(DOUBLE), "SGLANG_DOUBLE_SCENARIO": scenario, "SGLANG_DOUBLE_DELAY": "0.02"}
    server = RunningServer(LocalTarget(), ServerCommand(scenario, argv, env, "127.0.0.1", port),
                           workdir / f"{scenario}-{port}.log", LIMITS)
    try:
        launch = server.wait_ready()
    finally:
        stop_started = time.perf_counter()
        server.stop()
        stop_s = time.perf_counter() - stop_started
    return {"status": launch.status, "wait_s": launch.seconds, "detected_after_s": launch.detected_after_s,
            "root": launch.findings[0].id if launch.findings else None, "stop_s": round(stop_s, 3),
            "leftovers": len(server.leftovers)}


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return "<1 ms" if seconds < 0.001 else f"{seconds * 1000:.0f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        for scenario in SCENARIOS:
            runs = [one(scenario, Path(tmp)) for _ in range(args.runs)]
            detect = [r["detected_after_s"] for r in runs if r["detected_after_s"] is not None]
            summary[scenario] = {
                "statuses": sorted({r["status"] for r in runs}), "roots": sorted({str(r["root"]) for r in runs}),
                "wait_s_median": statistics.median(r["wait_s"] for r in runs),
                "detected_after_s_max": max(detect) if detect else None,
                "stop_s_median": statistics.median(r["stop_s"] for r in runs),
                "stop_s_max": max(r["stop_s"] for r in runs),
                "leftover_processes": sum(r["leftovers"] for r in runs), "runs": args.runs,
            }
            if not args.json:
                s = summary[scenario]
                print(f"{scenario:22s} {'/'.join(s['statuses']):8s} root={'/'.join(s['roots']):26s} "
                      f"wait median {s['wait_s_median']:6.2f} s  decided <= {_ms(s['detected_after_s_max'])} "
                      "after its log line  "
                      f"stop median {s['stop_s_median']:.2f} s (max {s['stop_s_max']:.2f})  "
                      f"leftovers {s['leftover_processes']}", flush=True)
    if args.json:
        print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    raise SystemExit(main())
