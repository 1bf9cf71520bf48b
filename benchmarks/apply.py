"""Apply benchmarks (issue 3).

    python benchmarks/apply.py [--runs 5] [--spec specs/demo-cpu.yaml] [--json]

1. No-op re-apply: `envmgr apply SPEC --yes` when the current generation already is
   SPEC (fresh process each time; includes the drift check). Target: at most 1 s.
2. venv realization from the same lock with uv (`uv pip sync`) vs pip
   (`pip install --require-hashes --no-deps`), caches warm, a fresh venv per run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envmgr.lock import uv_binary  # noqa: E402


def timed(argv: list[str], **kw) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, **kw)
    return time.perf_counter() - start


def envmgr(*args: str) -> list[str]:
    return [sys.executable, "-m", "envmgr", *args]


def noop_reapply(spec: Path, home: Path, runs: int) -> list[float]:
    subprocess.run(envmgr("apply", str(spec), "--yes", "--home", str(home)), check=True, capture_output=True)
    return [timed(envmgr("apply", str(spec), "--yes", "--home", str(home))) for _ in range(runs)]


def install_times(lock: Path, work: Path, runs: int) -> dict[str, list[float]]:
    uv = uv_binary()
    out: dict[str, list[float]] = {"uv": [], "pip": []}
    for i in range(runs + 1):  # the first round warms both caches and is dropped
        for tool in ("uv", "pip"):
            venv = work / f"{tool}-{i}"
            subprocess.run([uv, "venv", "--quiet", "--seed", "--python", sys.executable, str(venv)],
                           check=True, capture_output=True)
            py = str(venv / "bin" / "python")
            argv = ([uv, "pip", "sync", "--quiet", "--require-hashes", "--python", py, str(lock)]
                    if tool == "uv" else
                    [py, "-m", "pip", "install", "--quiet", "--require-hashes", "--no-deps", "-r", str(lock)])
            seconds = timed(argv)
            if i:
                out[tool].append(seconds)
    return out


def summary(values: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3),
            "max_s": round(max(values), 3), "runs": len(values)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--spec", type=Path, default=ROOT / "specs" / "demo-cpu.yaml")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envmgr-bench-") as tmp:
        home = Path(tmp) / "home"
        noop = summary(noop_reapply(args.spec, home, args.runs))
        lock = next((home / "generations").glob("*/lock.txt"))
        installs = install_times(lock, Path(tmp), args.runs)
    uv, pip = summary(installs["uv"]), summary(installs["pip"])
    result = {"spec": str(args.spec), "noop_reapply": noop, "install_uv": uv, "install_pip": pip,
              "pip_over_uv": round(pip["median_s"] / uv["median_s"], 1)}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"no-op re-apply      median {noop['median_s']:.3f} s (min {noop['min_s']:.3f}, max {noop['max_s']:.3f})")
        print(f"install lock: uv    median {uv['median_s']:.3f} s")
        print(f"install lock: pip   median {pip['median_s']:.3f} s  (pip/uv = {result['pip_over_uv']}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
