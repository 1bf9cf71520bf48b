"""The committed lock and the saved plan read back (issue 29): current or stale by the resolver's
inputs, damaged files said with their path, user files never overwritten."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envmgr import lockfile
from envmgr.cli import main
from envmgr.errors import StateError, UsageError
from envmgr.savedplan import FORMAT, read_plan
from envmgr.spec import load_spec

SPECS = Path(__file__).resolve().parents[2] / "specs"
BODY = "".join(f"{pin} \\\n    --hash=sha256:{'a' * 64}\n" for pin in (  # what demo-cpu.yaml pins, met
    "nvidia-cuda-crt==13.0.88", "nvidia-cuda-nvcc==13.0.88", "nvidia-cuda-runtime==13.0.96", "nvidia-nvvm==13.0.88",
    "packaging==24.2"))


@pytest.fixture()
def loaded(tmp_path):
    path = tmp_path / "demo-cpu.yaml"
    path.write_text((SPECS / "demo-cpu.yaml").read_text())
    return load_spec(path)


def write_lock_by_hand(loaded, inputs=None, body=BODY) -> Path:
    given = inputs if inputs is not None else lockfile.inputs(loaded)
    header = {"spec": loaded.path.name, "inputs": given, "inputs_digest": lockfile._digest(given)}
    path = lockfile.lock_path(loaded)
    path.write_text(lockfile.HEADER + json.dumps(header) + "\n" + body)
    return path


def test_a_lock_is_current_while_the_spec_gives_its_inputs_and_stale_after(loaded):
    path = write_lock_by_hand(loaded)
    found = lockfile.read_lock(loaded)
    assert found is not None and found.current and found.text == BODY and found.packages == 5
    assert found.status() == f"{path}: current (5 packages)"
    write_lock_by_hand(loaded, {**lockfile.inputs(loaded), "python": "3.10", "requirements": ["x==1"]})
    stale = lockfile.read_lock(loaded)
    assert stale is not None and not stale.current and stale.changed == ("python", "requirements")
    assert "stale (python, requirements changed" in stale.status()


def test_a_body_that_no_longer_meets_the_pins_is_stale_whatever_its_header_says(loaded):
    write_lock_by_hand(loaded, body=BODY.replace("nvidia-cuda-nvcc==13.0.88", "nvidia-cuda-nvcc==13.0.48"))
    found = lockfile.read_lock(loaded)
    assert found is not None and not found.current
    assert found.changed == () and found.unmet == ("nvidia-cuda-nvcc==13.0.88 not met by the lock (13.0.48)",)
    assert found.status().endswith("stale (nvidia-cuda-nvcc==13.0.88 not met by the lock (13.0.48))")


def test_a_header_edited_by_hand_makes_the_lock_stale(loaded):
    path = write_lock_by_hand(loaded)
    path.write_text(path.read_text().replace('"inputs_digest": "', '"inputs_digest": "0'))
    found = lockfile.read_lock(loaded)
    assert found is not None and not found.current and found.changed == ("its header",)


def test_choose_lock_by_mode(loaded):
    said: list[str] = []
    assert lockfile.choose_lock(loaded, "default", said.append) is None  # no lock: apply resolves
    with pytest.raises(StateError, match="--locked: .* does not exist"):
        lockfile.choose_lock(loaded, "locked", said.append)
    write_lock_by_hand(loaded, {**lockfile.inputs(loaded), "no_deps": True})
    assert lockfile.choose_lock(loaded, "default", said.append) is None and "resolved anew" in said[-1]
    with pytest.raises(StateError, match="--locked: .*stale"):
        lockfile.choose_lock(loaded, "locked", said.append)
    assert lockfile.choose_lock(loaded, "frozen", said.append).text == BODY


@pytest.mark.parametrize("content", ["sglang==0.5.11\n", "# envmgr-lock v1 {not json\nx==1\n", ""])
def test_a_file_that_is_not_an_envmgr_lock_is_said_with_its_path(loaded, content):
    lockfile.lock_path(loaded).write_text(content)
    with pytest.raises(StateError, match=r"demo-cpu\.lock:1: not an envmgr lock"):
        lockfile.read_lock(loaded)


def test_lock_never_overwrites_a_file_it_did_not_write_nor_follows_a_link(loaded, tmp_path):
    target = lockfile.lock_path(loaded)
    target.write_text("my notes\n")
    with pytest.raises(UsageError, match="exists and is not an envmgr lock"):
        lockfile.write_lock(loaded, lambda line: None)
    assert target.read_text() == "my notes\n"
    target.unlink()
    (tmp_path / "elsewhere").write_text("x")
    target.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StateError, match="not a regular file"):
        lockfile.read_lock(loaded)


def test_a_spec_that_inherits_is_not_locked(tmp_path):
    spec = tmp_path / "inherit.yaml"
    spec.write_text((SPECS / "demo-cpu.yaml").read_text().replace(
        'python:\n  version: "3.11"\n', 'python:\n  version: "3.11"\n  inherit: {packages: [packaging]}\n')
        .replace('packaging: ">=23"', 'packaging: "==24.2"'))
    loaded = load_spec(spec)
    assert loaded.spec.python.inherit is not None
    with pytest.raises(UsageError, match="python.inherit"):
        lockfile.write_lock(loaded, lambda line: None)
    with pytest.raises(UsageError, match="python.inherit"):
        lockfile.choose_lock(loaded, "locked", lambda line: None)


def test_a_spec_is_no_saved_plan_and_a_damaged_plan_is_said(tmp_path):
    assert read_plan(SPECS / "demo-cpu.yaml") is None
    assert read_plan(tmp_path / "absent") is None
    damaged = tmp_path / "p.plan"
    damaged.write_text(json.dumps({"format": FORMAT, "spec": "/x"}))
    with pytest.raises(StateError, match="a damaged envmgr plan"):
        read_plan(damaged)
    assert read_plan(damaged, quiet=True) is None


def test_plan_saves_only_what_apply_would_do(capsys, tmp_path):
    spec = str(SPECS / "demo-cpu.yaml")
    assert main(["plan", spec, "--from", spec, "-o", str(tmp_path / "p")]) == 1
    assert "-o saves what apply would do" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()
    mine = tmp_path / "mine.txt"
    mine.write_text("keep me\n")
    assert main(["plan", spec, "--home", str(tmp_path / "h"), "-o", str(mine)]) == 1
    assert "is not a saved envmgr plan" in capsys.readouterr().err and mine.read_text() == "keep me\n"
