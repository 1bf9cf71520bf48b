"""LocalTarget against real subprocesses."""

from __future__ import annotations

import os
import sys
import time

import pytest

from envmgr.errors import BackendError, CommandNotFound, CommandTimeout
from envmgr.targets.base import CommandResult
from envmgr.targets.local import LocalTarget


@pytest.fixture
def backend():
    with LocalTarget() as local:
        yield local


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_context_manager_gives_a_working_backend_and_close_is_repeatable():
    with LocalTarget() as local:
        assert local.run(["echo", "hi"]).stdout == "hi\n"
    local.close()  # closing twice is harmless
    assert local.run(["true"]).ok  # stateless: still usable


def test_output_exit_code_and_argv(backend):
    result = backend.run(["sh", "-c", 'echo out; echo err >&2; exit 3'])
    assert isinstance(result, CommandResult)
    assert result.argv == ("sh", "-c", "echo out; echo err >&2; exit 3")
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok
    assert 0 <= result.duration_s < 5


def test_success_is_ok(backend):
    result = backend.run(["true"])
    assert result.ok and result.returncode == 0 and result.stdout == ""


def test_arguments_are_not_interpreted_by_a_shell(backend):
    tricky = "$(echo pwned); `id` > /dev/null | &&"
    result = backend.run(["printf", "%s", tricky])
    assert result.stdout == tricky


def test_missing_program_raises_command_not_found(backend):
    with pytest.raises(CommandNotFound, match="no-such-program-xyz") as caught:
        backend.run(["no-such-program-xyz", "--version"])
    assert isinstance(caught.value.__cause__, FileNotFoundError)
    assert isinstance(caught.value, BackendError)


def test_program_that_is_not_executable_is_a_backend_error(backend, tmp_path):
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(BackendError, match="not-executable") as caught:
        backend.run([str(script)])
    assert not isinstance(caught.value, CommandNotFound)
    assert isinstance(caught.value.__cause__, PermissionError)


def test_env_is_merged_over_ours(backend, monkeypatch):
    monkeypatch.setenv("ENVMGR_TEST_INHERITED", "from-parent")
    result = backend.run(
        ["sh", "-c", 'printf "%s|%s" "$ENVMGR_TEST_INHERITED" "$ENVMGR_TEST_GIVEN"'],
        env={"ENVMGR_TEST_GIVEN": "given value"},
    )
    assert result.stdout == "from-parent|given value"


def test_env_given_overrides_ours(backend, monkeypatch):
    monkeypatch.setenv("ENVMGR_TEST_VAR", "parent")
    result = backend.run(["sh", "-c", 'printf %s "$ENVMGR_TEST_VAR"'], env={"ENVMGR_TEST_VAR": "child"})
    assert result.stdout == "child"


def test_no_env_inherits_ours(backend, monkeypatch):
    monkeypatch.setenv("ENVMGR_TEST_VAR", "parent")
    assert backend.run(["sh", "-c", 'printf %s "$ENVMGR_TEST_VAR"']).stdout == "parent"


@pytest.mark.slow
def test_timeout_kills_the_whole_process_group(backend, tmp_path):
    pids = tmp_path / "pids"
    # Two sleeps: one in the background (a grandchild of ours), one in the foreground.
    script = f'sleep 30 & echo $! > {pids}; echo $$ >> {pids}; sleep 30'
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="past 1s"):
        backend.run(["sh", "-c", script], timeout=1.0)
    assert time.monotonic() - started < 10
    background_sleep, shell = (int(line) for line in pids.read_text().split())
    deadline = time.monotonic() + 5
    while (pid_alive(background_sleep) or pid_alive(shell)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(background_sleep), "the background child survived the timeout"
    assert not pid_alive(shell)


def test_command_runs_in_its_own_session(backend):
    result = backend.run([sys.executable, "-c", "import os; print(os.getsid(0) == os.getpid())"])
    assert result.stdout.strip() == "True"


def test_output_is_decoded_leniently(backend):
    result = backend.run(["printf", r"\377ok"])
    assert result.stdout == "\ufffdok"


@pytest.mark.parametrize("argv", ["echo hi", [], ["echo", 1]])
def test_argv_must_be_a_list_of_strings(backend, argv):
    with pytest.raises(TypeError, match="argv"):
        backend.run(argv)
