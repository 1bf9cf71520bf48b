"""`envmgr env` never prints a secret (issue 24): not inside another value, not when the
environment is named by its URL, not when the generation's spec.yaml was rewritten, and not
where nothing says which variables are secrets. Generations here are made by hand (a venv
whose python is this interpreter); tests/integration/test_use_env.py does it with a real apply."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envmgr.apply import recorded_spec
from envmgr.cli import main
from envmgr.secrets import REDACTED, Redactor, secret_names
from envmgr.spec import Spec
from envmgr.state import Store
from envmgr.targets.urls import make_url
from envmgr.targets.venv import env_file_text

TOKEN = "hf_canary_1234567890"
CRED = "cred_canary_0987654321"  # a secret only because the spec marks it


def spec_of(env: dict, secrets: dict | None = None) -> Spec:
    return Spec.model_validate({"apiVersion": "envmgr/v1", "metadata": {"name": "use"},
                                "hardware": {"gpu": {"arch": "sm_90"}}, "env": env, "secrets": secrets or {}})


def make_venv(venv: Path, env: dict, names: set[str] | None) -> Path:
    """A venv whose python is this one, with its env file (``names``: the secret names the
    builder records; None: an env file without them, as older generations and other tools have)."""
    (venv / "bin").mkdir(parents=True)
    os.symlink(sys.executable, venv / "bin" / "python")
    text = json.dumps(env) if names is None else env_file_text(env, names)
    (venv / "envmgr-env.json").write_text(text)
    (venv / "envmgr-env.json").chmod(0o600)
    return venv


def make_generation(home: Path, spec: Spec, *, record_names: bool = True, spec_text: str | None = None) -> Path:
    """A complete, current generation built from ``spec`` as apply records it; its venv's path."""
    store = Store(home)
    with store.locked():
        path = store.begin()
        env = {k: str(v) for k, v in spec.env.items()}
        venv = make_venv(path / "venv", env, secret_names(spec) if record_names else None)
        (path / "spec.yaml").write_text(spec_text if spec_text is not None else
                                        yaml.safe_dump(recorded_spec(spec, Redactor.for_spec(spec))))
        gen = store.commit(path, {"spec_name": "use", "spec_digest": "d" * 64, "backend": make_url("venv", str(venv)),
                                  "backend_kind": "venv", "location": str(venv), "details": {}})
        store.record_gate(gen, [], [])
        store.switch(gen.number)
    return venv


def env_outputs(capsys, *args: str) -> dict[str, str]:
    """stdout of `env`, `env --json` and `env --sh` (each must exit 0)."""
    out = {}
    for form in ("text", "--json", "--sh"):
        rc = main(["env", *args, *([form] if form != "text" else [])])
        captured = capsys.readouterr()
        assert rc == 0, captured.err
        out[form] = captured.out
    return out


def evaluated(exports: str, names: list[str]) -> dict[str, str]:
    """What `sh` has in each variable after evaluating ``exports``."""
    script = exports + "printf '%s\\0' " + " ".join(f'"${n}"' for n in names)
    done = subprocess.run(["sh", "-c", script], capture_output=True, timeout=60, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 0, done.stderr
    return dict(zip(names, done.stdout.decode().split("\0")[:-1], strict=True))


def test_a_value_that_holds_a_secret_is_redacted_in_text_json_and_sh(tmp_path, capsys):
    home = tmp_path / "home"
    make_generation(home, spec_of({"HF_TOKEN": TOKEN, "URLX": f"https://u:{TOKEN}@h", "PLAIN": "x"}))
    out = env_outputs(capsys, "--home", str(home))
    assert not [form for form, text in out.items() if TOKEN in text]
    assert json.loads(out["--json"])["env"]["URLX"] == f"https://u:{REDACTED}@h"
    assert f"URLX=https://u:{REDACTED}@h" in out["text"].splitlines()
    # the exports still give commands the real values: read from the 0600 file when evaluated
    assert evaluated(out["--sh"], ["URLX", "HF_TOKEN", "PLAIN"]) == {
        "URLX": f"https://u:{TOKEN}@h", "HF_TOKEN": TOKEN, "PLAIN": "x"}


def test_a_venv_named_by_url_gets_the_secrets_of_the_generation_that_built_it(tmp_path, capsys):
    home = tmp_path / "home"
    # no names recorded in the env file: only the spec's `secrets:` says MY_CRED is one
    venv = make_generation(home, spec_of({"MY_CRED": CRED, "PLAIN": "x"}, {"MY_CRED": True}), record_names=False)
    (tmp_path / "link").symlink_to(venv)
    for url in (make_url("venv", str(venv)), f"venv://{tmp_path / 'link'}"):
        out = env_outputs(capsys, "--home", str(home), "--env", url)
        assert not [form for form, text in out.items() if CRED in text], url
        doc = json.loads(out["--json"])
        assert doc["env"]["MY_CRED"] == REDACTED and doc["env"]["PLAIN"] == "x"
        assert doc["hidden_because"] is None  # the generation is known: only the secret is hidden


def test_a_venv_no_generation_built_shows_only_the_values_envmgr_sets(tmp_path, capsys):
    venv = make_venv(tmp_path / "someone's venv", {"MY_CRED": CRED, "PLAIN": "plain-value", "CUDA_HOME": "/opt/cuda"},
                     names=None)
    out = env_outputs(capsys, "--home", str(tmp_path / "home"), "--env", make_url("venv", str(venv)))
    assert not [form for form, text in out.items() if CRED in text or "plain-value" in text]
    doc = json.loads(out["--json"])
    assert doc["env"]["MY_CRED"] == doc["env"]["PLAIN"] == REDACTED
    assert doc["env"]["CUDA_HOME"] == "/opt/cuda" and doc["env"]["VIRTUAL_ENV"] == str(venv)
    why = doc["hidden_because"]
    assert "no generation" in why and "secrets is unknown" in why
    assert f"# {why}" in out["text"].splitlines() and f"# {why}" in out["--sh"].splitlines()
    assert evaluated(out["--sh"], ["MY_CRED", "PLAIN", "VIRTUAL_ENV"]) == {
        "MY_CRED": CRED, "PLAIN": "plain-value", "VIRTUAL_ENV": str(venv)}


def test_a_rewritten_spec_yaml_cannot_unmark_a_secret(tmp_path, capsys):
    home = tmp_path / "home"
    spec = spec_of({"HF_TOKEN": TOKEN, "MY_CRED": CRED}, {"MY_CRED": True})
    venv = make_generation(home, spec)
    tampered = recorded_spec(spec, Redactor.for_spec(spec))
    tampered["secrets"] = {"HF_TOKEN": False, "MY_CRED": False}
    (venv.parent / "spec.yaml").write_text(yaml.safe_dump(tampered))
    for env in ("current", make_url("venv", str(venv))):
        out = env_outputs(capsys, "--home", str(home), "--env", env)
        assert not [form for form, text in out.items() if TOKEN in text or CRED in text], env
        shown = json.loads(out["--json"])["env"]
        assert (shown["HF_TOKEN"], shown["MY_CRED"]) == (REDACTED, REDACTED)


def test_an_unreadable_spec_yaml_hides_every_value_and_says_why(tmp_path, capsys):
    home = tmp_path / "home"
    make_generation(home, spec_of({"MY_CRED": CRED}, {"MY_CRED": True}), record_names=False,
                    spec_text="apiVersion: [not, a, spec\n")
    out = env_outputs(capsys, "--home", str(home))
    assert not [form for form, text in out.items() if CRED in text]
    assert "spec.yaml of generation 1 cannot be read" in json.loads(out["--json"])["hidden_because"]


def test_the_venv_builder_records_the_secret_names_beside_the_values(tmp_path):
    from envmgr.builders.base import Build, Realized
    from envmgr.builders.venv import VenvBuilder
    from envmgr.spec import load_spec
    from envmgr.targets.venv import VenvTarget

    spec = tmp_path / "s.yaml"
    spec.write_text("apiVersion: envmgr/v1\nmetadata: {name: s}\nhardware: {gpu: {arch: sm_90}}\n"
                    f"env: {{HF_TOKEN: {TOKEN}, MY_CRED: {CRED}, CACHE_KEY: k, PLAIN: x}}\n"
                    "secrets: {MY_CRED: true, CACHE_KEY: false}\n")
    venv = tmp_path / "venv"
    venv.mkdir()
    build = Build(load_spec(spec), tmp_path, lambda line: None)
    build.realized = Realized(make_url("venv", str(venv)), str(venv), "", {})
    VenvBuilder()._record(build)
    assert (venv / "envmgr-env.json").stat().st_mode & 0o777 == 0o600
    target = VenvTarget(str(venv))
    assert target.recorded().secrets == {"HF_TOKEN", "MY_CRED"}
    env = target.environment()
    assert {k: env[k] for k in ("HF_TOKEN", "MY_CRED", "CACHE_KEY", "PLAIN")} == {
        "HF_TOKEN": TOKEN, "MY_CRED": CRED, "CACHE_KEY": "k", "PLAIN": "x"}
    assert set(env) == {"HF_TOKEN", "MY_CRED", "CACHE_KEY", "PLAIN", "VIRTUAL_ENV", "PATH"}  # no record key


@pytest.mark.parametrize("value", ["=ls", "==2.9.1", "it's", "$(touch pwned)", "`id`", "~root", "*", "", " a  b ",
                                   "back\\slash", "#x", "!x", "é"])
def test_every_value_is_exported_single_quoted(tmp_path, capsys, value):
    home = tmp_path / "home"
    make_generation(home, spec_of({"V": value}))
    assert main(["env", "--home", str(home), "--sh"]) == 0
    out = capsys.readouterr().out
    quoted = "'" + value.replace("'", "'\\''") + "'"
    assert f"export V={quoted}" in out.splitlines()
    assert evaluated(out, ["V"]) == {"V": value}


def test_a_name_that_is_no_portable_shell_name_is_refused_on_stderr(tmp_path, capsys):
    home = tmp_path / "home"
    venv = make_generation(home, spec_of({"A": "1", "Z": "26"}))
    recorded = json.loads((venv / "envmgr-env.json").read_text())
    (venv / "envmgr-env.json").write_text(json.dumps({**recorded, "é": "e", "0X": "0", "B-C": "-"}))
    assert main(["env", "--home", str(home), "--sh"]) == 0
    captured = capsys.readouterr()
    for name in ("é", "0X", "B-C"):
        assert name not in captured.out
        assert f"{name!r} is not exported: not a portable shell variable name" in captured.err
    assert evaluated(captured.out, ["A", "Z"]) == {"A": "1", "Z": "26"}  # the eval ran to its end
