"""How long the largest specs envmgr accepts take to check, plan and print.

    python benchmarks/render.py [--runs 5] [--json]

- ``validate`` of specs/cuda128.yaml grown to 1000 benchmark configs (the most a spec may
  have): the rules and the flag checks for every config (``check``), then printing the
  findings (``render_findings``), each timed in-process, and the whole CLI run as a process;
- printing 20,000 plan actions (``render_actions``), more than any spec can produce;
- ``plan`` of a spec at every size limit (16 toolkits, 500 packages, 500 env vars) from
  specs/cuda128.yaml, as a process.
Output goes to /dev/null, as a pipe or a file would take it. Target (issue 11): 1000
configs or 20,000 actions render in well under a second.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envmgr.compat import check  # noqa: E402
from envmgr.plan import Action  # noqa: E402
from envmgr.report.console import render_actions, render_findings  # noqa: E402
from envmgr.report.printer import Printer  # noqa: E402
from envmgr.spec import load_spec  # noqa: E402
from envmgr.spec.models import MAX_CONFIGS, MAX_ENV, MAX_PACKAGES, MAX_TOOLKITS  # noqa: E402


def configs_spec(where: Path) -> Path:
    """cuda128.yaml with configs added up to MAX_CONFIGS, half of them with a flag it flags."""
    base = (ROOT / "specs" / "cuda128.yaml").read_text(encoding="utf-8")
    present = len(load_spec(ROOT / "specs" / "cuda128.yaml").spec.benchmarks.configs)
    extra = "".join(f"    sweep{i}:\n      flags: {{--cuda-graph-max-bs: {8 * (i % 64 + 1)}"
                    + (", --enable-torch-symm-mem: true" if i % 2 else "") + "}\n"
                    for i in range(MAX_CONFIGS - present))
    path = where / "configs.yaml"
    path.write_text(base.replace("  configs:\n", "  configs:\n" + extra, 1), encoding="utf-8")
    (where / "cuda128.yaml").write_text(base, encoding="utf-8")
    return path


def limits_spec(where: Path) -> Path:
    toolkits = "".join(f'    - {{version: "12.{i}", source: apt}}\n' for i in range(MAX_TOOLKITS))
    packages = "".join(f'    pkg{i}: "1.{i}"\n' for i in range(MAX_PACKAGES))
    env = "".join(f"  VAR_{i}: value{i}\n" for i in range(MAX_ENV))
    path = where / "limits.yaml"
    path.write_text("apiVersion: envmgr/v1\nmetadata: {name: limits}\nhardware: {gpu: {arch: sm_90}}\n"
                    f"cuda:\n  toolkits:\n{toolkits}python:\n  packages:\n{packages}env:\n{env}",
                    encoding="utf-8")
    return path


def best_of(runs: int, func) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cli(argv: list[str], runs: int) -> float:
    script = shutil.which("envmgr")
    base = [script] if script else [sys.executable, "-m", "envmgr"]
    return best_of(runs, lambda: subprocess.run([*base, *argv], stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.DEVNULL, check=False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, float | int] = {}
    with tempfile.TemporaryDirectory() as tmp, open("/dev/null", "w") as null:
        out = Printer(null)
        spec = configs_spec(Path(tmp))
        loaded = load_spec(spec)
        findings = check(loaded)
        results["configs"] = len(loaded.spec.benchmarks.configs)
        results["findings"] = len(findings)
        results["config_mentions"] = sum(len(f.configs) for f in findings)
        results["check_s"] = best_of(args.runs, lambda: check(loaded))
        results["render_findings_s"] = best_of(args.runs, lambda: render_findings(loaded, findings, out))
        results["validate_cli_s"] = cli(["validate", str(spec)], args.runs)
        actions = [Action("package.install", f"pkg{i}", None, f"==1.{i}", "new in the spec")
                   for i in range(20_000)]
        results["actions"] = len(actions)
        results["render_actions_s"] = best_of(args.runs, lambda: render_actions(actions, out))
        results["plan_limits_cli_s"] = cli(["plan", str(limits_spec(Path(tmp))), "--from",
                                            str(ROOT / "specs" / "cuda128.yaml")], args.runs)
    results = {k: round(v, 4) if isinstance(v, float) else v for k, v in results.items()}
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for key, value in results.items():
            print(f"{key:22} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
