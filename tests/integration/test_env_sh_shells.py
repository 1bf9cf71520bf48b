"""`eval "$(envmgr env --sh)"` in sh, dash, bash, zsh and ksh (issue 24): each shell ends with
exactly the values commands get from `envmgr run`, for a generation applied into a store whose
path holds a newline followed by a command, quotes, `$(...)`, '?', '#' and '%'; values with a
leading '=' (zsh expands a bare one), quotes and every other shell character; secrets read
from the 0600 env file, never printed; names that are not portable shell names refused on
stderr while the rest is still set. A shell this machine lacks is skipped, saying so
(.ci/run installs zsh and ksh, so CI runs all five)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envmgr.targets.urls import make_url

pytestmark = pytest.mark.integration
SHELLS = ["sh", "dash", "bash", "zsh", "ksh"]
TOKEN = "hf_canary_1234567890"
# a store path that runs `touch PWNED...` if any of it reaches shell text unquoted or in a comment
HOME_NAME = "h ?#%'$(touch PWNED1)`touch PWNED2`\ntouch PWNED3\n#x"
VALUES = {
    "EQ": "=ls", "PIN": "==2.9.1", "QUOTES": "it's \"q\" \\ $HOME `id` $(touch PWNED4)", "GLOB": "*",
    "TILDE": "~root", "SPACES": "  a  b  ", "BANG": "!x", "HASH": "#x", "PCT": "%s", "DASH": "-n",
    "UNI": "é ü", "EMPTY": "", "URLX": f"https://u:{TOKEN}@h", "HF_TOKEN": TOKEN,
}


def envmgr(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    command, *rest = args
    return subprocess.run([sys.executable, "-m", "envmgr", command, "--home", str(home), *rest],
                          capture_output=True, text=True, timeout=300, cwd=cwd, env=ENV)


ENV = {**os.environ, "PATH": os.environ["PATH"]}  # one PATH for envmgr and the shells alike


@pytest.fixture(scope="module")
def applied(tmp_path_factory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("shells")
    spec = where / "shells.yaml"
    spec.write_text(f"""\
apiVersion: envmgr/v1
metadata: {{name: shells}}
hardware: {{gpu: {{arch: sm_90}}}}
python: {{version: "{sys.version_info.major}.{sys.version_info.minor}", packages: {{}}}}
env: {json.dumps(VALUES)}
realize: {{backend: venv}}
""")
    home = where / HOME_NAME
    done = envmgr(home, "apply", str(spec), "--yes")
    assert done.returncode == 0, done.stderr
    return home, where


def what_commands_get(home: Path, names: list[str], *env_args: str) -> dict[str, str]:
    ran = envmgr(home, "run", *env_args, "--", "python", "-c",
                 f"import json, os; print(json.dumps({{n: os.environ.get(n) for n in {names!r}}}))")
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def evaluate(shell: str, exports: str, names: list[str], cwd: Path) -> dict[str, str | None]:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed here (apt-get install -y zsh ksh; .ci/run does)")
    dump = "".join(f'printf "%s\\0" "${{{n}-UNSET}}"; ' for n in names)
    done = subprocess.run([shell, "-c", 'eval "$ENVMGR_EXPORTS"; ' + dump], capture_output=True, timeout=60,
                          cwd=cwd, env={"PATH": ENV["PATH"], "ENVMGR_EXPORTS": exports})
    assert done.returncode == 0, done.stderr
    values = done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]
    return {n: (None if v == "UNSET" else v) for n, v in zip(names, values, strict=True)}


@pytest.mark.parametrize("shell", SHELLS)
def test_each_shell_evaluates_the_exports_to_the_values_commands_get(applied, shell, tmp_path):
    home, _ = applied
    names = [*VALUES, "VIRTUAL_ENV", "PATH"]
    exports = envmgr(home, "env", "--sh")
    assert exports.returncode == 0 and exports.stderr == "", exports.stderr
    assert TOKEN not in exports.stdout
    assert evaluate(shell, exports.stdout, names, tmp_path) == what_commands_get(home, names)
    assert list(tmp_path.iterdir()) == []  # no PWNED*: nothing of a path or value ran


@pytest.mark.parametrize("shell", SHELLS)
def test_names_no_shell_takes_are_refused_and_the_rest_is_set(applied, shell, tmp_path):
    _, where = applied
    venv = where / "not envmgr's"  # named by URL, no generation built it: every value read when evaluated
    if not venv.exists():
        (venv / "bin").mkdir(parents=True)
        os.symlink(sys.executable, venv / "bin" / "python")
        (venv / "envmgr-env.json").write_text(json.dumps({"A": "=ls", "é": "e", "B-C": "x", "Z": "it's last"}))
    url = make_url("venv", str(venv))
    exports = envmgr(where / "no-store", "env", "--env", url, "--sh")
    assert exports.returncode == 0
    assert "'é' is not exported: not a portable shell variable name" in exports.stderr
    assert "'B-C' is not exported" in exports.stderr and "é" not in exports.stdout
    assert "=ls" not in exports.stdout and "it's last" not in exports.stdout  # nothing says they are no secrets
    assert evaluate(shell, exports.stdout, ["A", "Z", "VIRTUAL_ENV"], tmp_path) == {
        "A": "=ls", "Z": "it's last", "VIRTUAL_ENV": str(venv)}
