"""Score ``envmgr triage`` on a labelled split of real log excerpts (tests/fixtures/triage/heldout/).

    python benchmarks/triage_heldout.py tests/fixtures/triage/heldout/round1.yaml [--json] [--misses]
    python benchmarks/triage_heldout.py --public tests/fixtures/triage/public   # the older table

The rules (fixed before the split was first run, and written in its header):
- named: the first finding's id is the label (findings come root cause first);
- flagged: named, or the label's id among the findings, or ``unclassified_failure`` within
  ``NEAR`` lines of the labelled line (exactly on it is counted too);
- a negative (label ``none``) passes with no finding at all.
The envmgr that is imported is scored: ``PYTHONPATH=<an older checkout>`` scores that one.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

import envmgr
from envmgr.bench.triage import triage_text

NEAR = 3
UNCLASSIFIED = "unclassified_failure"
# One family, several signature ids (VOCAB.md: "use flashinfer_arch_unsupported for all of these").
ALIASES = {"flashinfer_kernel_arch_gate": "flashinfer_arch_unsupported",
           "flashinfer_trtllm_gen_bare_arch": "flashinfer_arch_unsupported"}


@dataclass(frozen=True)
class Scored:
    id: str
    family: str
    line: int
    found: tuple[str, ...]  # finding ids, root cause first
    named: bool
    flagged: bool
    exact_line: bool  # unclassified exactly on the labelled line (or named)


def score_one(excerpt: dict) -> Scored:
    findings = triage_text(excerpt["text"])
    found = tuple(ALIASES.get(f.id, f.id) for f in findings)
    family, line = excerpt["family"], int(excerpt["line"])
    if family == "none":
        ok = not findings
        return Scored(excerpt["id"], family, line, found, ok, ok, ok)
    named = bool(found) and found[0] == family
    near = [f for f in findings if f.id == UNCLASSIFIED and abs(f.line - line) <= NEAR]
    flagged = named or family in found or bool(near)
    exact = named or family in found or any(f.line == line for f in near)
    return Scored(excerpt["id"], family, line, found, named, flagged, exact)


def score(path: Path) -> dict:
    excerpts = yaml.safe_load(path.read_text(encoding="utf-8"))["excerpts"]
    rows = [score_one(e) for e in excerpts]
    failures = [r for r in rows if r.family != "none"]
    negatives = [r for r in rows if r.family == "none"]
    in_families = [r for r in failures if r.family != UNCLASSIFIED]
    return {
        "split": str(path), "envmgr": str(Path(envmgr.__file__).parent), "excerpts": len(rows),
        "failures": len(failures), "negatives": len(negatives),
        "named": sum(r.named for r in failures),
        "named_in_families": sum(r.named for r in in_families), "in_families": len(in_families),
        "flagged": sum(r.flagged for r in failures),
        "flagged_exact_line": sum(r.exact_line for r in failures),
        "negatives_quiet": sum(r.named for r in negatives),
        "by_family": {fam: f"{sum(r.named for r in rows if r.family == fam)}/{n}"
                      for fam, n in sorted(Counter(r.family for r in rows).items())},
        "rows": [asdict(r) for r in rows],
    }


def score_public(folder: Path) -> dict:
    """The older table (tests/fixtures/triage/public/*.yaml): its expectations were written
    after reading the excerpts, so it measures regressions, not generalisation."""
    rows = []
    for path in sorted(folder.glob("*.yaml")):
        for e in yaml.safe_load(path.read_text(encoding="utf-8"))["excerpts"]:
            text = "\n".join(l[2:] if l.startswith("> ") else l for l in e["text"].replace("^M\n", "\r\n").split("\n"))
            found = [f.id for f in triage_text(text)]
            rows.append((e, found))
    expected = [(e, found) for e, found in rows if e.get("expect")]
    return {"table": str(folder), "envmgr": str(Path(envmgr.__file__).parent), "excerpts": len(rows),
            "with_a_cause": len(expected),
            "named": sum(bool(found) and found[0] == e["expect"][0] for e, found in expected),
            "exactly_as_expected": sum(found == e["expect"] for e, found in rows if "expect" in e),
            "with_expectation": sum("expect" in e for e, _ in rows),
            "quiet_broken": sum(any(q in found for q in e.get("quiet", ())) for e, found in rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("split", type=Path, help="a split's YAML, or with --public the older table's folder")
    parser.add_argument("--public", action="store_true", help="score the older public table")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--misses", action="store_true", help="list every excerpt not named")
    args = parser.parse_args(argv)
    if args.public:
        print(json.dumps(score_public(args.split), indent=2))
        return 0
    result = score(args.split)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    f, n = result["failures"], result["negatives"]
    print(f"{result['split']}: {result['excerpts']} excerpts ({f} failures, {n} negatives); "
          f"envmgr from {result['envmgr']}")
    print(f"  named    {result['named']}/{f} ({result['named'] / max(f, 1):.0%}); in the families "
          f"{result['named_in_families']}/{result['in_families']}")
    print(f"  flagged  {result['flagged']}/{f} ({result['flagged'] / max(f, 1):.0%}); "
          f"on the exact line {result['flagged_exact_line']}/{f}")
    print(f"  negatives quiet {result['negatives_quiet']}/{n}")
    for family, ratio in result["by_family"].items():
        print(f"    {family:32} {ratio}")
    if args.misses:
        for row in result["rows"]:
            if not row["named"]:
                print(f"  miss {row['id']} ({row['family']}, line {row['line']}): got {list(row['found'])}"
                      + ("" if not row["flagged"] else " [flagged]"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
