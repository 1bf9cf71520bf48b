"""docs/cli.md is the CLI's own help (issue 29): regenerated here, so it cannot drift."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="generated with Python 3.11 (argparse's layout differs)")
def test_the_command_reference_is_the_cli_s_own_help():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "cli-reference" / "generate.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_reference_names_every_command():
    from envmgr.cli import COMMANDS

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert [name for name, _, _ in COMMANDS] == [line.removeprefix("## envmgr ") for line in text.splitlines()
                                                 if line.startswith("## envmgr ")]
