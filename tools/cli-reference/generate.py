#!/usr/bin/env python3
"""Write docs/cli.md: every command's own --help, as the CLI prints it (Python 3.11, 100 columns).

    python3 tools/cli-reference/generate.py          # rewrite docs/cli.md
    python3 tools/cli-reference/generate.py --check  # exit 1 when docs/cli.md is stale

tests/unit/test_cli_reference.py runs the check, so the reference cannot drift from the parser.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "cli.md"
COLUMNS = "100"


def render() -> str:
    os.environ["COLUMNS"] = COLUMNS  # argparse wraps at the terminal's width: fix it
    from envmgr.cli import EXIT_CODES, USAGE, build_parser

    parser = build_parser()
    parts = ["# envmgr command reference", "",
             "Generated from the CLI's own help by `python3 tools/cli-reference/generate.py`; do not edit.",
             f"Every command also exits {USAGE} for a command line it rejects, 141 when what reads its output",
             "goes away, and 130 / 128+N when interrupted.", "", "```", parser.format_help().rstrip(), "```", ""]
    for name, sub in parser.commands.items():
        parts += [f"## envmgr {name}", "", f"Exit codes: {EXIT_CODES[name]}.", "", "```",
                  sub.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT / "tools"))
    from generated_file import write_or_check

    return write_or_check(OUT, render(), argv, "tools/cli-reference/generate.py", ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
