"""The launcher's words for how a server ended, and which log lines are its own polls' echo."""

from __future__ import annotations

from pathlib import Path

import pytest

from envmgr.bench.launch import OWN_POLL, exit_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "triage"


@pytest.mark.parametrize("code, words", [
    (0, "exited with code 0"), (2, "exited with code 2"),
    (-9, "killed by SIGKILL (exit code -9) (SGLang kills its own process tree"),
    (137, "killed by SIGKILL (exit code 137)"), (-15, "killed by SIGTERM"),
    (None, "closed its output but is still running"),
])
def test_exit_text(code, words):
    assert words in exit_text(code)
    assert "None" not in exit_text(code)


def test_own_polls_are_recognised_in_a_real_0_5_11_log_and_nothing_else_is():
    lines = (FIXTURES / "clean_h200_sglang_0.5.11_warmup_hang_flashinfer_a2a.log").read_text().splitlines()
    polls = [line for line in lines if OWN_POLL.search(line)]
    assert len(polls) > 100 and all("/health_generate" in p for p in polls)
    others = [line for line in lines if not OWN_POLL.search(line)]
    # the server's own warmup request and its start-up lines are real progress
    assert any('"GET /model_info HTTP/1.1" 200' in line for line in others)
    assert any("Uvicorn running" in line for line in others)
