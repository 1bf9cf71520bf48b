"""Secrets never show: which env names are secret, and that their values are replaced in
what plan, bench --dry-run and the Dockerfile show (the recorded files: test_venv_apply)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envmgr.builders.dockerfile import image_env, render_dockerfile
from envmgr.cli import main
from envmgr.secrets import REDACTED, Redactor, looks_secret, secret_names
from envmgr.spec import Spec

SPECS = Path(__file__).resolve().parents[2] / "specs"
TOKEN = "hf_SeCrEtVaLuE0123456789abcdefghij"


@pytest.mark.parametrize("name,secret", [
    ("HF_TOKEN", True), ("OPENAI_API_KEY", True), ("AWS_SECRET_ACCESS_KEY", True), ("DB_PASSWORD", True),
    ("MY_PASSWD_FILE", True), ("TOKEN", True), ("CUDA_HOME", False), ("NCCL_DEBUG", False),
    ("TOKENIZERS_PARALLELISM", False), ("KEYBOARD", False),
])
def test_names_that_look_secret(name, secret):
    assert looks_secret(name) is secret


def spec_with(env: dict, secrets: dict | None = None, config_env: dict | None = None) -> Spec:
    return Spec.model_validate({
        "apiVersion": "envmgr/v1", "metadata": {"name": "s"}, "hardware": {"gpu": {"arch": "sm_90"}},
        "env": env, "secrets": secrets or {},
        "benchmarks": {"model_path": "/m", "configs": {"a": {"env": config_env or {}}}}})


def test_the_secrets_section_marks_and_unmarks_names():
    spec = spec_with({"HF_TOKEN": TOKEN, "MY_CREDENTIAL": "c1", "CACHE_KEY": "not-secret"},
                     secrets={"MY_CREDENTIAL": True, "CACHE_KEY": False}, config_env={"RUN_TOKEN": "r1"})
    assert secret_names(spec) == {"HF_TOKEN", "MY_CREDENTIAL", "RUN_TOKEN"}


def test_the_redactor_replaces_values_by_name_and_in_text():
    redact = Redactor.for_spec(spec_with({"HF_TOKEN": TOKEN, "PLAIN": "x"}, config_env={"B_KEY": "k2k2k2"}))
    assert redact.env({"HF_TOKEN": TOKEN, "PLAIN": "x"}) == {"HF_TOKEN": REDACTED, "PLAIN": "x"}
    assert redact.text(f"curl -H 'Authorization: Bearer {TOKEN}' k2k2k2") == \
        f"curl -H 'Authorization: Bearer {REDACTED}' {REDACTED}"
    assert redact.data({"a": [TOKEN, {"b": f"x{TOKEN}"}], "n": 1}) == {"a": [REDACTED, {"b": f"x{REDACTED}"}], "n": 1}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_plan_shows_no_secret_in_text_or_json(tmp_path, capsys):
    base = (SPECS / "cuda128.yaml").read_text()
    (tmp_path / "cuda128.yaml").write_text(base)
    child = write(tmp_path, "c.yaml", "apiVersion: envmgr/v1\nextends: cuda128.yaml\nmetadata: {name: c}\n"
                  f"env: {{HF_TOKEN: {TOKEN}, MY_CRED: abcdef123456}}\nsecrets: {{MY_CRED: true}}\n")
    for args in ([], ["--json"]):
        rc = main(["plan", str(child), "--from", str(tmp_path / "cuda128.yaml"), *args])
        out = capsys.readouterr()
        assert rc == 2
        assert TOKEN not in out.out + out.err and "abcdef123456" not in out.out + out.err
        assert "HF_TOKEN" in out.out and REDACTED in out.out


def test_bench_dry_run_shows_no_secret(tmp_path, capsys):
    base = (SPECS / "cuda128.yaml").read_text()
    (tmp_path / "cuda128.yaml").write_text(base)
    child = write(tmp_path, "c.yaml", "apiVersion: envmgr/v1\nextends: cuda128.yaml\nmetadata: {name: c}\n"
                  f"env: {{HF_TOKEN: {TOKEN}}}\n"
                  "benchmarks: {configs: {baseline: {env: {RUN_API_KEY: zyxwvu987654}}}}\n")
    for args in ([], ["--json"]):
        main(["bench", str(child), "--env", "venv:///opt/envs/x", "--home", str(tmp_path / "h"),
              "--config", "baseline", "--dry-run", *args])
        out = capsys.readouterr()
        assert TOKEN not in out.out + out.err and "zyxwvu987654" not in out.out + out.err
    cells = json.loads(out.out)
    assert cells[0]["env_vars"] == {"HF_TOKEN": REDACTED, "RUN_API_KEY": REDACTED}  # both reach the server


def test_the_image_never_holds_a_secret():
    spec = spec_with({"HF_TOKEN": TOKEN, "ENVMGR_DEMO": "1"})
    assert dict(image_env(spec)) == {"VIRTUAL_ENV": "/opt/envmgr/venv", "ENVMGR_DEMO": "1"}
    dockerfile = render_dockerfile(spec, base_image="envmgr/base:bookworm", lock_name="lock.txt",
                                   wheelhouse=False, envmgr_version="0", spec_digest="d" * 64)
    assert TOKEN not in dockerfile and "HF_TOKEN" not in dockerfile


def test_a_secret_recorded_as_redacted_is_not_planned_as_a_change():
    from envmgr.plan import plan, state_from_spec

    spec = spec_with({"HF_TOKEN": TOKEN})
    recorded = spec_with({"HF_TOKEN": REDACTED})
    assert [a for a in plan(state_from_spec(recorded), spec) if a.kind.startswith("env.")] == []
    fresh = plan(state_from_spec(spec_with({})), spec)
    (action,) = [a for a in fresh if a.kind == "env.set"]
    assert (action.target, action.after) == ("HF_TOKEN", REDACTED)


CANARY = "hf_canary_1234567890"


def test_secret_names_are_never_fewer_than_the_name_rule():
    from envmgr.secrets import secret_names_of

    names = ["HF_TOKEN", "MY_CRED", "PLAIN", "CACHE_KEY"]
    assert secret_names_of(names) == {"HF_TOKEN", "CACHE_KEY"}
    assert secret_names_of(names, {"MY_CRED"}, set()) == {"HF_TOKEN", "CACHE_KEY", "MY_CRED"}
    assert secret_names_of(names, {"NOT_THERE"}) == {"HF_TOKEN", "CACHE_KEY"}  # a source adds, never clears


def test_the_redactor_replaces_a_secret_inside_another_value_of_an_env():
    redact = Redactor({"HF_TOKEN"}, [CANARY])
    assert redact.env({"HF_TOKEN": CANARY, "URLX": f"https://u:{CANARY}@h", "N": None, "I": 3}) == {
        "HF_TOKEN": REDACTED, "URLX": f"https://u:{REDACTED}@h", "N": None, "I": 3}


def test_plan_and_its_json_redact_a_value_that_holds_a_secret(tmp_path, capsys):
    old = write(tmp_path, "old.yaml", "apiVersion: envmgr/v1\nmetadata: {name: o}\nhardware: {gpu: {arch: sm_90}}\n"
                "env: {HF_TOKEN: hf_old_canary_abcdefghij, URLX: 'https://u:hf_old_canary_abcdefghij@h'}\n")
    new = write(tmp_path, "new.yaml", "apiVersion: envmgr/v1\nmetadata: {name: n}\nhardware: {gpu: {arch: sm_90}}\n"
                f"env: {{HF_TOKEN: {CANARY}, URLX: 'https://u:{CANARY}@h', MIRROR: 'https://m/{CANARY}/x'}}\n")
    for args in ([], ["--json"]):
        rc = main(["plan", str(new), "--from", str(old), *args])
        out = capsys.readouterr()
        assert rc == 2
        text = out.out + out.err
        assert CANARY not in text and "hf_old_canary_abcdefghij" not in text, args  # new and old secret
        assert f"https://u:{REDACTED}@h" in out.out and "URLX" in out.out
    (url,) = [a for a in json.loads(out.out)["actions"] if a["target"] == "URLX"]
    assert (url["before"], url["after"]) == (f"https://u:{REDACTED}@h", f"https://u:{REDACTED}@h")


@pytest.mark.parametrize("outcome", ["successful", "failed", "raises", "interrupted"])
def test_the_extravars_file_lives_only_as_long_as_the_ansible_run(tmp_path, monkeypatch, outcome):
    """Issue 24: the generation keeps ansible-runner's private data dir, so env/extravars (it
    holds the spec's secrets) must be gone after the run, however the run ends. The run with
    the real ansible-runner: tests/integration/test_ansible_fleet.py::test_first_run_provisions_every_host."""
    import sys
    import types

    from envmgr.ansible import runner
    from envmgr.errors import BackendError

    extravars = tmp_path / "env" / "extravars"
    seen = []

    def run(**kwargs):
        seen.append(json.loads(extravars.read_text()))  # there while ansible reads it
        if outcome == "raises":
            raise RuntimeError("ansible-playbook could not start")
        if outcome == "interrupted":  # Ctrl-C, SIGTERM (envmgr raises KeyboardInterrupt for both)
            raise KeyboardInterrupt
        return types.SimpleNamespace(status=outcome, rc=0 if outcome == "successful" else 2)

    monkeypatch.setitem(sys.modules, "ansible_runner", types.SimpleNamespace(run=run))
    monkeypatch.setitem(sys.modules, "ansible_runner.exceptions", types.SimpleNamespace(AnsibleRunnerException=RuntimeError))
    data = {"envmgr": {"env": {"HF_TOKEN": CANARY}}}
    if outcome in ("raises", "interrupted"):
        with pytest.raises(BackendError if outcome == "raises" else KeyboardInterrupt):
            runner.run_runner(tmp_path, "site.yml", tmp_path / "inv", data, lambda e: None, ident="apply", check=False)
    else:
        assert runner.run_runner(tmp_path, "site.yml", tmp_path / "inv", data, lambda e: None,
                                 ident="apply", check=False).status == outcome
    assert seen == [{"envmgr": {"env": {"HF_TOKEN": {"__ansible_unsafe": CANARY}}}}]
    assert not extravars.exists()
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]


def test_a_value_that_holds_a_secret_stays_out_of_the_image_and_the_checks():
    """Issue 24: URLX embeds HF_TOKEN's value; an image's ENV (docker history) and verify's
    check titles would show it. Both leave such a variable out, as they leave secrets out."""
    from envmgr.builders.dockerfile import render_dockerfile
    from envmgr.secrets import holding_secrets
    from envmgr.spec import Spec
    from envmgr.verify.checks import checks_for

    spec = Spec.model_validate({"apiVersion": "envmgr/v1", "metadata": {"name": "x"},
                                "hardware": {"gpu": {"arch": "sm_90"}},
                                "env": {"HF_TOKEN": "hf_canary_value_42", "URLX": "https://u:hf_canary_value_42@h",
                                        "PLAIN": "1"}})
    assert holding_secrets(spec) == {"HF_TOKEN", "URLX"}
    dockerfile = render_dockerfile(spec, base_image="envmgr/base:bookworm", lock_name="lock.txt", wheelhouse=False,
                                   envmgr_version="x", spec_digest="0" * 64)
    assert "hf_canary_value_42" not in dockerfile and '"PLAIN"' not in dockerfile and 'PLAIN="1"' in dockerfile
    titles = " ".join(c.title + c.expected for c in checks_for(spec, None))
    assert "hf_canary_value_42" not in titles and "PLAIN=1" in titles
