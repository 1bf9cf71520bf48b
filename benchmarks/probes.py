"""Wall time of the whole probe suite, cold and warm (issue 5).

    python benchmarks/probes.py [--target local://] [--spec specs/h200.yaml] [--warm-runs 3] [--json]

Cold: a fresh, empty FlashInfer JIT cache (FLASHINFER_WORKSPACE_BASE in a new temp dir),
so flashinfer_jit builds its module. Warm: the same cache, run again. Each run is a fresh
`envmgr probe` process, as an operator runs it. Targets: cold <= 60 s, warm <= 10 s.
Needs a GPU machine to mean anything (on CPU the GPU probes skip in a second).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def suite(target: str, spec: Path, env: dict[str, str], home: Path) -> tuple[float, dict]:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "envmgr", "probe", "--target", target, "--spec", str(spec),
                          "--json", "--home", str(home)], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, **env}, check=False)
    wall = time.perf_counter() - started
    report = json.loads(out.stdout)
    return wall, {r["probe"]: (r["status"], r["wall_s"]) for r in report["results"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="local://")
    parser.add_argument("--spec", type=Path, default=ROOT / "specs" / "h200.yaml")
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envmgr-probe-bench-") as tmp:
        env = {"FLASHINFER_WORKSPACE_BASE": str(Path(tmp) / "flashinfer")}
        home = Path(tmp) / "home"
        cold, cold_probes = suite(args.target, args.spec, env, home)
        warm_runs = [suite(args.target, args.spec, env, home) for _ in range(args.warm_runs)]
    warm = [w for w, _ in warm_runs]
    result = {"target": args.target, "spec": str(args.spec), "cold_s": round(cold, 2),
              "warm_s": [round(w, 2) for w in warm], "warm_median_s": round(statistics.median(warm), 2),
              "cold_probes": cold_probes, "warm_probes": warm_runs[-1][1]}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"cold {result['cold_s']:.1f} s (target <= 60), warm median {result['warm_median_s']:.1f} s "
              f"of {result['warm_s']} (target <= 10)")
        for probe, (status, wall) in result["warm_probes"].items():
            print(f"  {probe:28} {status:5} {wall:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
