"""Progress on stderr (issue 17): milestones kept, details live on a terminal, milestones only
elsewhere; -q silent, -v everything; no colour with NO_COLOR."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from envmgr.report.progress import TerminalProgress

SPECS = Path(__file__).resolve().parents[2] / "specs"
LINES = ["[1/2] resolve 1 package pin", "  [uv] Resolved 1 package in 28ms", "  [uv] + six==1.16.0",
         "[2/2] create the venv", "  [uv] Using Python 3.11", "built in 1.0 s (resolve 0.5 s, venv 0.5 s)"]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 0.5
        return self.now


def feed(**kwargs) -> str:
    out = io.StringIO()
    progress = TerminalProgress(out, clock=Clock(), **kwargs)
    for line in LINES:
        progress(line)
    progress.close()
    return out.getvalue()


def test_not_a_terminal_shows_milestones_only():
    assert feed(tty=False).splitlines() == [LINES[0], LINES[3], LINES[5]]


def test_verbose_shows_every_line_and_quiet_none():
    assert feed(tty=False, verbose=True).splitlines() == LINES
    assert feed(tty=True, verbose=True).count("\r") == 0  # verbose on a terminal: plain lines too
    assert feed(tty=False, quiet=True) == feed(tty=True, quiet=True) == ""


def test_a_terminal_rewrites_one_detail_line_with_the_elapsed_time(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    text = feed(tty=True)
    assert "\r\x1b[K" in text and "\x1b[1m" not in text  # rewritten in place; no colour under NO_COLOR
    assert "1.0s [uv] + six==1.16.0" in text  # the milestone's elapsed time, then the detail
    kept = [part.split("\r\x1b[K")[-1] for part in text.split("\n") if part.split("\r\x1b[K")[-1]]
    assert kept == [LINES[0], LINES[3], LINES[5]]  # what stays on screen: the milestones
    assert text.endswith("\n") or text.endswith("\r\x1b[K")


def test_the_cli_takes_q_and_v_on_every_command():
    def plan(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "envmgr", "plan", str(SPECS / "cuda13.yaml"), "--from",
                               str(SPECS / "cuda128.yaml"), *flags], capture_output=True, text=True, timeout=120)

    assert plan("-q").returncode == plan("-v").returncode == 2
    both = plan("-q", "-v")
    assert both.returncode == 64 and "not allowed with argument" in both.stderr  # EX_USAGE, not "changes"
