"""ruff (pyflakes, sorted imports, bugbear, complexity) and mypy, as pyproject.toml configures them:
run here so that the README's test command, and so CI, fails on either (issue 28)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean():
    done = run("ruff", "check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_is_clean():
    done = run("mypy", "--no-incremental")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_would_fail_on_what_it_is_configured_for(tmp_path):
    """The checks can fail: an unsorted import, a bugbear finding and a too complex function."""
    bad = tmp_path / "bad.py"
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(17))
    bad.write_text(f"import sys\nimport os\n\n\ndef f(x, y=[]):\n{branches}\n    return sys, os\n")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"),
                           str(bad)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    for code in ("I001", "B006", "C901"):
        assert code in done.stdout, done.stdout
