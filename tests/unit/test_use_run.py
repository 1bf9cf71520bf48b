"""`envmgr run`, `shell` and `env` never fall back to the host (issue 24): a mistyped venv
URL, a deleted venv, a venv without its recorded env are errors that name the environment and
what is missing (exit 1), and `run -- ''` is a usage error, never a traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from stores import venv_generation

from envmgr.targets.urls import make_url

RAN = "ran-in-some-python"


def envmgr(home: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    command, *rest = args
    return subprocess.run([sys.executable, "-m", "envmgr", command, "--home", str(home), *rest],
                          capture_output=True, text=True, timeout=120, **kwargs)


def python_runs(home: Path, *env_args: str) -> list[subprocess.CompletedProcess]:
    """`run`, `shell` and `env` in the environment ``env_args`` names."""
    run = envmgr(home, "run", *env_args, "--", "python", "-c", f"print('{RAN}')")
    shell = envmgr(home, "shell", *env_args, input=f"python -c \"print('{RAN}')\"\n",
                   env={**os.environ, "SHELL": "/bin/sh"})
    return [run, shell, envmgr(home, "env", *env_args), envmgr(home, "env", *env_args, "--sh")]


def assert_refused(done: list[subprocess.CompletedProcess], *words: str) -> None:
    for result in done:
        assert result.returncode == 1, (result.args, result.stdout, result.stderr)
        assert RAN not in result.stdout and "export" not in result.stdout
        assert "Traceback" not in result.stderr and result.stderr.startswith("error: ")
        for word in words:
            assert word in result.stderr, (word, result.stderr)


def test_a_mistyped_venv_url_is_an_error_not_the_hosts_python(tmp_path):
    missing = tmp_path / "no-such-venv"
    assert_refused(python_runs(tmp_path / "home", "--env", f"venv://{missing}"),
                   f"venv://{missing}", f"there is no venv at {missing}")


def test_a_folder_that_is_no_venv_is_an_error(tmp_path):
    (tmp_path / "folder").mkdir()
    assert_refused(python_runs(tmp_path / "home", "--env", f"venv://{tmp_path / 'folder'}"),
                   "is not a venv: it has no bin/python")


def test_a_raw_question_mark_in_a_venv_url_is_refused_with_the_encoding_to_use(tmp_path):
    venv = tmp_path / "a?b"  # the URL venv:///.../a?b names /.../a with a parameter b
    (tmp_path / "a" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, tmp_path / "a" / "bin" / "python")
    assert_refused(python_runs(tmp_path / "home", "--env", f"venv://{venv}"), "takes no parameter 'b'", "%3F")
    ran = envmgr(tmp_path / "home", "run", "--env", make_url("venv", str(venv)), "--", "true")
    assert ran.returncode == 1 and f"there is no venv at {venv}" in ran.stderr  # encoded: the right path


def test_the_current_generations_deleted_venv_is_an_error(tmp_path):
    home = tmp_path / "home"
    venv = venv_generation(home, "r")
    assert envmgr(home, "run", "--", "python", "-c", f"print('{RAN}')").stdout.strip() == RAN
    shutil.rmtree(venv)
    assert_refused(python_runs(home), "generation 1", f"there is no venv at {venv}", "envmgr rollback")
    assert_refused(python_runs(home, "--env", "1"), "generation 1")


def test_a_generations_venv_without_its_recorded_env_is_an_error(tmp_path):
    home = tmp_path / "home"
    venv = venv_generation(home, "r")
    (venv / "envmgr-env.json").unlink()  # commands would run without the spec's env
    assert_refused(python_runs(home), "generation 1", "envmgr-env.json is gone")


@pytest.mark.parametrize("argv", [["--", ""], [""], ["--", "", "x"]])
def test_an_empty_command_is_a_usage_error(tmp_path, argv):
    home = tmp_path / "home"
    venv_generation(home, "r")
    done = envmgr(home, "run", *argv)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "error: the command to run is an empty string ('')" in done.stderr
    assert "hint: envmgr run [--env GEN|URL] -- CMD" in done.stderr
