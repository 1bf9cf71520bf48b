"""Issue 29 items 1-2, for real (uv, venvs): a lock committed beside the spec reproduces the same
environment in a second store; a saved plan is applied exactly, or refused when its spec, lock or
generation changed; plan and apply start from the same baseline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from envmgr.cli import main

pytestmark = pytest.mark.integration
SPECS = Path(__file__).resolve().parents[2] / "specs"
INSTALLED = "import importlib.metadata as m, json; print(json.dumps(sorted((d.metadata['Name'].lower(), d.version) for d in m.distributions())))"


def run(capsys, *args: str) -> tuple[int, str, str]:
    rc = main([*args])
    out, err = capsys.readouterr()
    return rc, out, " ".join(err.split())


@pytest.fixture()
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "project" / "demo-cpu.yaml"
    path.parent.mkdir()
    path.write_text((SPECS / "demo-cpu.yaml").read_text())
    return path


def installed(home: Path) -> list:
    venv = home / "generations" / "1" / "venv"  # meta.json says "@generation/venv": relative to its folder
    return json.loads(subprocess.run([f"{venv}/bin/python", "-c", INSTALLED], capture_output=True, text=True,
                                     check=True).stdout)


def test_a_committed_lock_reproduces_the_same_environment_in_a_second_store(capsys, tmp_path, spec):
    rc, out, _ = run(capsys, "lock", str(spec))
    assert rc == 0 and "5 packages" in out
    lock = spec.with_suffix(".lock")
    body = lock.read_text().split("\n", 1)[1]
    homes = [tmp_path / "machine-a", tmp_path / "machine-b"]
    for home in homes:
        rc, _, err = run(capsys, "apply", str(spec), "--locked", "--yes", "--home", str(home))
        assert rc == 0, err
        assert "take the committed lock" in err and "resolve " not in err.split("take the committed lock")[0]
        assert (home / "generations" / "1" / "lock.txt").read_text() == body  # installed as committed
    assert installed(homes[0]) == installed(homes[1])
    assert ("nvidia-cuda-nvcc", "13.0.88") in [tuple(p) for p in installed(homes[0])]
    assert run(capsys, "probe", "--home", str(homes[1]), "--only", "toolchain_arch")[0] == 0  # its nvcc builds sm_90
    meta = json.loads((homes[1] / "generations" / "1" / "meta.json").read_text())
    assert meta["lock_file"] == str(lock.resolve()) and len(meta["lock_digest"]) == 64
    # the same spec and lock again: unchanged; a new lock (`envmgr lock` after the index moved): rebuilt
    assert run(capsys, "apply", str(spec), "--locked", "--yes", "--home", str(homes[0]))[0] == 0
    assert not (homes[0] / "generations" / "2").exists()
    lock.write_text(lock.read_text() + "# a comment: another lock text\n")
    assert run(capsys, "apply", str(spec), "--locked", "--yes", "--home", str(homes[0]))[0] == 0
    assert (homes[0] / "generations" / "2" / "lock.txt").read_text().endswith("another lock text\n")


def test_a_stale_lock_stops_locked_is_said_by_default_and_frozen_installs_it(capsys, tmp_path, spec):
    assert run(capsys, "lock", str(spec))[0] == 0
    body = spec.with_suffix(".lock").read_text().split("\n", 1)[1]
    spec.write_text(spec.read_text().replace('packaging: ">=23"', 'packaging: ">=24"'))
    rc, out, _ = run(capsys, "plan", str(spec), "--home", str(tmp_path / "h"))
    assert "lock: " in out and "stale (requirements changed since it was made)" in " ".join(out.split())
    rc, _, err = run(capsys, "apply", str(spec), "--locked", "--yes", "--home", str(tmp_path / "locked"))
    assert rc == 1 and "--locked:" in err and "stale (requirements changed" in err and "envmgr lock" in err
    assert not (tmp_path / "locked" / "generations" / "1").exists()  # stopped before a generation
    rc, _, err = run(capsys, "apply", str(spec), "--yes", "--home", str(tmp_path / "default"))
    assert rc == 0 and "not used, this generation is resolved anew" in err
    rc, _, err = run(capsys, "apply", str(spec), "--frozen", "--yes", "--home", str(tmp_path / "frozen"))
    assert rc == 0 and "(--frozen: not checked)" in err
    assert (tmp_path / "frozen" / "generations" / "1" / "lock.txt").read_text() == body
    spec.with_suffix(".lock").unlink()
    rc, _, err = run(capsys, "apply", str(spec), "--locked", "--yes", "--home", str(tmp_path / "none"))
    assert rc == 1 and "does not exist" in err


def test_a_saved_plan_is_applied_exactly_or_refused(capsys, tmp_path, spec):
    home, plan = tmp_path / "home", tmp_path / "reviewed.plan"
    rc, out, _ = run(capsys, "plan", str(spec), "--home", str(home), "-o", str(plan))
    assert rc == 2 and f"saved the plan to {plan}" in out
    saved = json.loads(plan.read_text())
    assert saved["format"] == "envmgr-plan/v1" and saved["generation"] is None and len(saved["actions"]) == 9
    # plan and apply start from the same baseline: the nine actions shown are the nine applied
    rc, _, err = run(capsys, "apply", str(plan), "--home", str(home))  # no prompt: the plan was the question
    assert rc == 0, err
    recorded = json.loads((home / "generations" / "1" / "plan.json").read_text())
    assert recorded["actions"] == saved["actions"] and recorded["steps"] == saved["steps"]
    # made against generation 1; another apply since: refused, nothing built
    second = tmp_path / "second.plan"
    spec.write_text(spec.read_text().replace('ENVMGR_DEMO: "1"', 'ENVMGR_DEMO: "2"'))
    assert run(capsys, "plan", str(spec), "--home", str(home), "-o", str(second))[0] == 2
    other = tmp_path / "other.yaml"
    other.write_text(spec.read_text().replace('ENVMGR_DEMO: "2"', 'ENVMGR_DEMO: "3"'))
    assert run(capsys, "apply", str(other), "--yes", "--home", str(home))[0] == 0  # generation 2
    rc, _, err = run(capsys, "apply", str(second), "--home", str(home))
    assert rc == 1 and "the plan is stale: it was made from generation 1, the current one now is generation 2" in err
    assert not (home / "generations" / "3").exists()
    # the spec changed after the plan: refused
    third = tmp_path / "third.plan"
    assert run(capsys, "plan", str(spec), "--home", str(home), "-o", str(third))[0] == 2
    spec.write_text(spec.read_text().replace('ENVMGR_DEMO: "2"', 'ENVMGR_DEMO: "4"'))
    rc, _, err = run(capsys, "apply", str(third), "--home", str(home))
    assert rc == 1 and "changed since it was made" in err and not (home / "generations" / "3").exists()
    # a lock committed after the plan: refused
    spec.write_text(spec.read_text().replace('ENVMGR_DEMO: "4"', 'ENVMGR_DEMO: "2"'))
    assert run(capsys, "lock", str(spec))[0] == 0
    rc, _, err = run(capsys, "apply", str(third), "--home", str(home))
    assert rc == 1 and "the committed lock changed since it was made (now " in err and "the plan's none" in err
