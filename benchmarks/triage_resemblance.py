"""How well resemblance names the failures no wording names: leave one round out.

    python benchmarks/triage_resemblance.py [--threshold 0.6] [--cases]

For each round k of the labelled rounds the shipped corpus is built from (tools/triage-corpus/
build.py ROUNDS), the corpus is rebuilt from the other rounds only, and triage runs on round k's
held-out excerpts with it. Counted: the excerpts whose failure neither a signature nor the
line's words named (the cases resemblance is for), those it names right, and those it names
wrong (a wrong name is worse than `unclassified_failure`: it points the user elsewhere).
This is how NAMING_SIMILARITY and LINES_BEFORE in envmgr/bench/resemblance.py were chosen; it
is a cross-validation on rounds already read, not a fresh score (benchmarks/triage_heldout.py
on a new round gives that).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections import Counter
from pathlib import Path
from unittest import mock

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from envmgr.bench import resemblance  # noqa: E402
from envmgr.bench.triage import triage_text  # noqa: E402


def _build_tool():
    spec = importlib.util.spec_from_file_location("corpus_build", ROOT / "tools" / "triage-corpus" / "build.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threshold", type=float, default=resemblance.NAMING_SIMILARITY)
    parser.add_argument("--cases", action="store_true", help="print every case")
    args = parser.parse_args()
    build = _build_tool()
    rounds = sorted({name.split("/")[1] for name in build.ROUNDS})
    tally: Counter[str] = Counter()
    for held in rounds:
        others = [name for name in build.ROUNDS if not name.endswith("/" + held)]
        corpus = resemblance.Corpus([(e["family"], e["source"], e["lines"]) for e in build.entries(others)])
        for excerpt in yaml.safe_load((build.TRIAGE / "heldout" / held).read_text())["excerpts"]:
            if excerpt["family"] == "none":
                continue
            with mock.patch.object(resemblance, "NAMING_SIMILARITY", args.threshold), \
                    mock.patch.object(resemblance, "_shipped", lambda corpus=corpus: corpus):
                found = triage_text(excerpt["text"])
            first = found[0] if found else None
            if first is None or (first.id != "unclassified_failure" and first.values.get("named_by") != "resemblance"):
                continue  # a signature or the line's words named it (or nothing was flagged)
            tally["cases"] += 1
            if first.id == "unclassified_failure":
                outcome = "kept unclassified" if excerpt["family"] == "unclassified_failure" else "left unnamed"
            else:
                outcome = "named right" if first.id == excerpt["family"] else "named wrong"
            tally[outcome] += 1
            if args.cases:
                print(f"  {held} {excerpt['id'][:50]:50} label={excerpt['family']:30} got={first.id} ({outcome})")
    print(f"leave-one-round-out over {', '.join(rounds)} at similarity >= {args.threshold}: "
          f"{tally['cases']} failures no wording named: {tally['named right']} named right, "
          f"{tally['named wrong']} named wrong, {tally['left unnamed']} of a family left unnamed, "
          f"{tally['kept unclassified']} of no family kept unclassified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
