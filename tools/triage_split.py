"""Split labelled log excerpts into a round's development half and frozen held-out half.

    python tools/triage_split.py ROUND SEED POOL.yaml [POOL.yaml ...]
    python tools/triage_split.py ROUND --heldout-only POOL.yaml [POOL.yaml ...]

Each pool file is ``excerpts: [{id, source, family, line, note, text}]`` as the gatherers wrote
it. Per family (excerpts sorted by id), ``random.Random(SEED)`` shuffles and ceil(n/2) go to
tests/fixtures/triage/heldout/ROUND.yaml, the rest to tests/fixtures/triage/dev/ROUND.yaml,
each with a header saying how it was made and scored. Commit both before triage runs on them.
``--heldout-only`` holds the whole round out (a round too small to halve and still score 40).
"""

from __future__ import annotations

import random
import sys
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
HEADER = """# {what} for triage, {round} (gathered {date}).{warning}
#
# {count} real log excerpts from public GitHub threads (none already in tests/fixtures/triage,
# signatures.yaml or an earlier round), each labelled by reading it: `family` (the root
# cause, one of tests/fixtures/triage/dev/VOCAB.md; `unclassified_failure`: a failure of none
# of them; `none`: a negative, no failure) and `line` (1-based in `text`: the line that states
# the root cause; for a traceback, the original exception's line). {how}
# Committed before triage ran on them.
#
# Scoring (benchmarks/triage_heldout.py): named = the first finding's id is the label;
# flagged = named, or the label among the findings, or `unclassified_failure` within 3 lines
# of the labelled line; a negative passes with no finding at all.
"""


class Literal(str):
    pass


yaml.add_representer(Literal, lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|"))


def clean(excerpt: dict) -> dict:
    text = "\n".join(line.rstrip() for line in excerpt["text"].rstrip("\n").split("\n")) + "\n"
    return {"id": excerpt["id"], "source": excerpt["source"], "family": excerpt["family"],
            "line": excerpt["line"], "note": excerpt["note"], "text": Literal(text)}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or not (argv[1] == "--heldout-only" or argv[1].isdigit()):
        print(__doc__.split("\n\n")[1], file=sys.stderr)  # the usage lines
        return 2
    name, whole, pools = argv[0], argv[1] == "--heldout-only", [Path(p) for p in argv[2:]]
    excerpts = [e for p in pools for e in yaml.safe_load(p.read_text(encoding="utf-8"))["excerpts"]]
    by_family: dict[str, list[dict]] = defaultdict(list)
    for excerpt in sorted(excerpts, key=lambda e: e["id"]):
        by_family[excerpt["family"]].append(excerpt)
    held, dev = [], []
    if whole:
        held = [e for family in sorted(by_family) for e in by_family[family]]
        how = f"All of them went to heldout/{name}.yaml (tools/triage_split.py --heldout-only)."
    else:
        rng = random.Random(int(argv[1]))
        for family in sorted(by_family):
            group = by_family[family][:]
            rng.shuffle(group)
            half = (len(group) + 1) // 2
            held += group[:half]
            dev += group[half:]
        how = (f"Per family (sorted by id),\n# random.Random({argv[1]}) shuffled them and ceil(n/2) went to "
               f"heldout/{name}.yaml, the rest to\n# dev/{name}.yaml (tools/triage_split.py).")
    date = __import__("datetime").date.today().isoformat()
    for kind, chosen, what, warning in (("heldout", held, "FROZEN held-out split", " DO NOT TUNE ON IT."),
                                         ("dev", dev, "Development half", " Signatures are written from these.")):
        if whole and kind == "dev":
            continue
        path = ROOT / "tests" / "fixtures" / "triage" / kind / f"{name}.yaml"
        header = HEADER.format(what=what, round=name, date=date, warning=warning, count=len(excerpts), how=how)
        body = yaml.dump({"excerpts": [clean(e) for e in chosen]}, sort_keys=False, allow_unicode=True, width=100000)
        path.write_text(header + body, encoding="utf-8")
        back = yaml.safe_load(path.read_text(encoding="utf-8"))["excerpts"]
        assert [b["text"] for b in back] == [clean(e)["text"] for e in chosen], path
        print(f"{path.relative_to(ROOT)}: {len(back)} excerpts")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
