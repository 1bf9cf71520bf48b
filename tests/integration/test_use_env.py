"""Using an environment from the CLI (issue 17): `envmgr run`, `shell` and `env` in a real venv
generation, with the spec's env, its secret never printed, and exit codes passed through.
Issue 24: nor a value that holds the secret, nor a secret only the spec marks, also when the
environment is named by its URL or the generation's spec.yaml was rewritten to unmark them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration
TOKEN = "hf_use_env_secret_0123456789"
CRED = "cred_use_env_0987654321"  # a secret only because the spec marks it
URLX = f"https://u:{TOKEN}@h"
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
  URLX: "{URLX}"
  MY_CRED: {CRED}
secrets: {{MY_CRED: true}}
realize: {{backend: venv}}
""")
    home = where / "home"
    done = envmgr(home, "apply", str(spec), "--yes")
    assert done.returncode == 0, done.stderr
    assert not [s for s in (TOKEN, CRED) if s in done.stdout + done.stderr]  # the plan apply shows too
    return home, pwned


def leaked(*results: subprocess.CompletedProcess) -> list[str]:
    return [s for s in (TOKEN, CRED) for r in results if s in r.stdout + r.stderr]


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
    assert doc["env"]["MY_CRED"] == "<redacted>" and doc["env"]["URLX"] == "https://u:<redacted>@h"
    text = envmgr(home, "env")
    exports = envmgr(home, "env", "--sh")
    assert leaked(shown, text, exports) == []  # never printed
    script = exports.stdout + 'printf "%s|%s|%s|%s|%s" "$HF_TOKEN" "$URLX" "$MY_CRED" "$GREETING" "$(command -v python)"'
    evaluated = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60,
                               env={"PATH": os.environ["PATH"]})
    token, url, cred, greeting, python = evaluated.stdout.split("|")
    assert (token, url, cred, greeting) == (TOKEN, URLX, CRED, TRICKY.format(pwned=pwned)), evaluated.stderr
    assert python.endswith("/generations/1/venv/bin/python") and not pwned.exists()


def test_the_venv_named_by_its_url_keeps_the_generations_secrets(applied):
    home, _ = applied
    url = json.loads(envmgr(home, "env", "--json").stdout)["environment"]
    assert url.startswith("venv:///") and url.endswith("/generations/1/venv")
    results = [envmgr(home, "env", "--env", url, *form) for form in ([], ["--json"], ["--sh"])]
    assert [r.returncode for r in results] == [0, 0, 0] and leaked(*results) == []
    assert json.loads(results[1].stdout)["env"]["MY_CRED"] == "<redacted>"


def test_a_rewritten_spec_yaml_does_not_unmark_the_secrets(applied):
    home, _ = applied
    recorded = home / "generations" / "1" / "spec.yaml"
    original = recorded.read_text()
    try:  # what someone who can write the spec.yaml but not the 0600 env file would do
        tampered = yaml.safe_load(original)
        tampered["secrets"] = {"MY_CRED": False, "HF_TOKEN": False}
        recorded.write_text(yaml.safe_dump(tampered))
        results = [envmgr(home, "env", *form) for form in ([], ["--json"], ["--sh"])]
        assert [r.returncode for r in results] == [0, 0, 0] and leaked(*results) == []
    finally:
        recorded.write_text(original)


def test_apply_json_shows_no_secret(tmp_path):
    spec = tmp_path / "json.yaml"
    spec.write_text(f"""apiVersion: envmgr/v1
metadata: {{name: use-env-json}}
hardware: {{gpu: {{arch: sm_90}}}}
python: {{version: "{sys.version_info.major}.{sys.version_info.minor}", packages: {{six: "1.16.0"}}}}
env: {{HF_TOKEN: {TOKEN}, URLX: "{URLX}", MY_CRED: {CRED}}}
secrets: {{MY_CRED: true}}
""")
    done = envmgr(tmp_path / "home", "apply", str(spec), "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert leaked(done) == []
    (url,) = [a for a in json.loads(done.stdout)["actions"] if a["target"] == "URLX"]
    assert url["after"] == "https://u:<redacted>@h"


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
