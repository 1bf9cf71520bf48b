"""A file the repository generates (docs/cli.md, envmgr/bench/known_failures.yaml): written by
its tool, or, with ``--check``, compared with what the tool would write (a test runs the check,
so the file cannot drift from its source)."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(out: Path, text: str, argv: list[str], tool: str, root: Path) -> int:
    """0 written (or current, under ``--check``); 1 stale, said with the command that mends it."""
    shown = out.relative_to(root)
    if argv == ["--check"]:
        if not out.exists() or out.read_text(encoding="utf-8") != text:
            print(f"{shown} is stale: run python3 {tool}", file=sys.stderr)
            return 1
        return 0
    out.write_text(text, encoding="utf-8")
    print(f"wrote {shown} ({text.count(chr(10))} lines)")
    return 0
