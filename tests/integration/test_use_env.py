"""Using an environment from the CLI (issue 17): `envmgr run`, `shell` and `env` in a real venv
generation, with the spec's env, its secret never printed, and exit codes passed through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
TOKEN = "hf_use_env_secret_0123456789"
TRICKY = "hello $(touch {pwned}) 'q' \"d\""


def envmgr(home: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    command, *rest = args  # --home before a `--` that ends envmgr's own options
    return subprocess.run([sys.executable, "-m", "envmgr", command, "--home", str(home), *rest],
                          capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def applied(tmp_path_factory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("use")
    pwned = where / "pwned"
    spec = where / "use.yaml"
    spec.write_text(f"""\
apiVersion: envmgr/v1
metadata: {{name: use-env}}
hardware: {{gpu: {{arch: sm_90}}}}
python: {{version: "{sys.version_info.major}.{sys.version_info.minor}", packages: {{six: "1.16.0"}}}}
env:
  GREETING: {json.dumps(TRICKY.format(pwned=pwned))}
  HF_TOKEN: {TOKEN}
realize: {{backend: venv}}
""")
    home = where / "home"
    done = envmgr(home, "apply", str(spec), "--yes")
    assert done.returncode == 0, done.stderr
    return home, pwned


def test_run_uses_the_generations_interpreter_and_env_and_passes_the_exit_code(applied):
    home, pwned = applied
    ran = envmgr(home, "run", "--", "python", "-c",
                 "import os, six, sys; print(six.__version__, sys.prefix); print(os.environ['GREETING'])")
    assert ran.returncode == 0, ran.stderr
    version, prefix = ran.stdout.splitlines()[0].split()
    assert version == "1.16.0" and prefix.endswith("/generations/1/venv")
    assert ran.stdout.splitlines()[1] == TRICKY.format(pwned=pwned) and not pwned.exists()
    assert envmgr(home, "run", "--env", "1", "--", "sh", "-c", "exit 7").returncode == 7
    missing = envmgr(home, "run", "--", "no-such-tool")
    assert missing.returncode == 127 and "command not found" in missing.stderr
    # the command's own --json is its argument, not envmgr's
    own = envmgr(home, "run", "--", "python", "-c", "import sys; print(sys.argv[1:])", "--json")
    assert own.returncode == 0 and own.stdout.strip() == "['--json']"


def test_env_redacts_the_secret_and_its_exports_read_it_when_evaluated(applied):
    home, pwned = applied
    shown = envmgr(home, "env", "--json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["generation"] == 1 and doc["env"]["HF_TOKEN"] == "<redacted>"
    assert doc["env"]["GREETING"] == TRICKY.format(pwned=pwned) and doc["env"]["VIRTUAL_ENV"].endswith("/venv")
    text = envmgr(home, "env")
    exports = envmgr(home, "env", "--sh")
    assert TOKEN not in shown.stdout + text.stdout + exports.stdout  # never printed
    script = exports.stdout + 'printf "%s|%s|%s" "$HF_TOKEN" "$GREETING" "$(command -v python)"'
    evaluated = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60,
                               env={"PATH": os.environ["PATH"]})
    token, greeting, python = evaluated.stdout.split("|")
    assert (token, greeting) == (TOKEN, TRICKY.format(pwned=pwned)), evaluated.stderr
    assert python.endswith("/generations/1/venv/bin/python") and not pwned.exists()


def test_shell_is_the_users_shell_inside_the_environment(applied):
    home, _ = applied
    done = envmgr(home, "shell", input='python -c "import six; print(six.__version__)"; echo "$VIRTUAL_ENV"\n',
                  env={**os.environ, "SHELL": "/bin/sh"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "1.16.0" and done.stdout.splitlines()[1].endswith("/generations/1/venv")
    assert "envmgr shell: generation 1" in done.stderr


def test_an_unknown_environment_is_a_clear_error_also_in_json(applied):
    home, _ = applied
    wrong = envmgr(home, "env", "--env", "7", "--json")
    assert wrong.returncode == 1
    error = json.loads(wrong.stdout)["error"]
    assert error["type"] == "UsageError" and "no complete generation 7" in error["message"]
    assert "envmgr generations" in error["hint"]
    nothing = envmgr(home, "run")
    assert nothing.returncode == 1 and "no command to run" in nothing.stderr
