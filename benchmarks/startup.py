"""Cold-start wall time of the envmgr CLI (each run is a fresh process), and its ratio to a
bare `python -c pass` measured in the same run (the machine's speed and load cancel out).

    python benchmarks/startup.py [--runs 20] [--json]

Targets (issue 11): `envmgr validate` <= 300 ms and `envmgr --help` <= 100 ms on the 2-core
dev machine, where `python -c pass` took 18 ms: validate <= 16.7x, --help <= 5.6x.
The first run of each case is not counted: it fills envmgr's data cache (envmgr.datafiles)
and the page cache, as any earlier run on a machine does.

An installed envmgr has byte-compiled modules (pip compiles on install). An editable
install under PYTHONDONTWRITEBYTECODE=1 (as on the dev machines) has none and starts
slower; by default this script byte-compiles envmgr first, `--no-compile` skips that.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"envmgr --help": 100 / 18, "envmgr validate specs/cuda13.yaml": 300 / 18}
CASES = {
    "python -c pass": None,
    "envmgr --help": ["--help"],
    "envmgr --version": ["--version"],
    "envmgr validate specs/cuda128.yaml": ["validate", "specs/cuda128.yaml"],
    "envmgr validate specs/cuda13.yaml": ["validate", "specs/cuda13.yaml"],
    "envmgr validate --json specs/cuda13.yaml": ["validate", "--json", "specs/cuda13.yaml"],
    "envmgr plan cuda13 --from cuda128": ["plan", "specs/cuda13.yaml", "--from", "specs/cuda128.yaml"],
    "envmgr facts --json": ["facts", "--json"],
}


def command() -> list[str]:
    script = shutil.which("envmgr")
    return [script] if script else [sys.executable, "-m", "envmgr"]


def measure(argv: list[str], runs: int) -> dict[str, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"median_ms": round(statistics.median(times), 1), "min_ms": round(times[0], 1),
            "p90_ms": round(times[int(0.9 * (len(times) - 1))], 1), "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-compile", action="store_true", help="measure without envmgr's .pyc files")
    args = parser.parse_args()
    if not args.no_compile:
        import compileall

        compileall.compile_dir(str(ROOT / "envmgr"), quiet=1)
    base = command()
    results = {}
    for name, extra in CASES.items():
        argv = [sys.executable, "-c", "pass"] if extra is None else [*base, *extra]
        subprocess.run(argv, cwd=ROOT, capture_output=True, check=False)  # warm the caches
        results[name] = measure(argv, args.runs)
    python_ms = results["python -c pass"]["median_ms"]
    for name, r in results.items():
        r["x_python"] = round(r["median_ms"] / python_ms, 1)
        if name in TARGETS:
            r["target_x_python"] = round(TARGETS[name], 1)
            r["met"] = r["x_python"] <= TARGETS[name]
        if not args.json:
            target = f"  (target <= {r['target_x_python']}x: {'met' if r['met'] else 'MISSED'})" if "met" in r else ""
            print(f"{name:45} median {r['median_ms']:7.1f} ms  min {r['min_ms']:7.1f}  p90 {r['p90_ms']:7.1f}"
                  f"  = {r['x_python']:5.1f}x python{target}", flush=True)
    if args.json:
        print(json.dumps({"command": base, "compiled": not args.no_compile, "results": results}, indent=2))
    return 0 if all(r.get("met", True) for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
