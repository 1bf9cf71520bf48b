"""Score ``envmgr validate`` on held-out stacks whose outcome was written from the wheels first.

    python benchmarks/validate_heldout.py [tests/fixtures/compat/heldout_stacks.yaml] [--json]

Each stack is an overlay on the CLEAN stack of tests/unit/test_compat_rules.py: the release's
own pins (sglang_releases.yaml), an optional torch CUDA build, one benchmark config ``x``. The
outcome is validate's judgement of ``x`` (``envmgr.compat.outcome.expected``: blocked /
runs without FEATURE / runs); a stack scores when it equals the written one.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import yaml

from envmgr.compat import default_knowledge_base, evaluate
from envmgr.compat.kb import KERNEL_PACKAGES
from envmgr.compat.outcome import expected
from envmgr.spec import Spec, deep_merge

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "tests" / "fixtures" / "compat" / "heldout_stacks.yaml"


def clean_stack() -> dict:
    spec = importlib.util.spec_from_file_location("compat_rules_cases", ROOT / "tests" / "unit" / "test_compat_rules.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CLEAN


def overlay(stack: dict, pins: dict) -> dict:
    packages = {"sglang": stack["release"], "torch": pins["torch"],
                "flashinfer-python": pins["flashinfer-python"], "flashinfer-cubin": pins.get("flashinfer-cubin")}
    packages.update({k: pins.get(k) for k in KERNEL_PACKAGES})  # the release's kernel package, the other removed
    return {"python": {"torch_cuda": stack.get("torch_cuda", "cu130"), "packages": packages},
            "benchmarks": {"configs": {"x": {"flags": stack["flags"], "env": {}}}}}


def score(path: Path) -> list[dict]:
    kb = default_knowledge_base()
    base = clean_stack()
    rows = []
    for stack in yaml.safe_load(path.read_text(encoding="utf-8"))["stacks"]:
        pins = kb.tables["sglang_releases"][stack["release"]]["pins"]
        spec = Spec.model_validate(deep_merge(base, overlay(stack, pins)))
        got = expected(evaluate(spec, kb=kb), "x")
        rows.append({"id": stack["id"], "expected": stack["expected"], "got": got.label, "rules": list(got.why),
                     "right": got.label == stack["expected"]})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stacks", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = score(args.stacks)
    right = sum(r["right"] for r in rows)
    if args.json:
        print(json.dumps({"right": right, "total": len(rows), "rows": rows}, indent=2))
    else:
        print(f"{args.stacks}: {right}/{len(rows)} outcomes as the wheels say")
        for r in rows:
            mark = "ok  " if r["right"] else "MISS"
            print(f"  {mark} {r['id']}: expected {r['expected']!r}, validate {r['got']!r} {r['rules']}")
    return 0 if right == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
