"""Nothing outside the store is ever deleted, nothing is deleted through a link, nothing on the
word of a recorded file; locks name their holder and readers never take them (issue 24).

Each HIGH case builds the state an attacker with write access to one file (or a careless
operator) would leave, runs the command, and checks a canary outside the store."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from envmgr.cli import main
from envmgr.confine import OWNER_FILE, Refused, inside, mark_owner
from envmgr.errors import StateError
from envmgr.records import DamagedRecord
from envmgr.state import Store


def venv_at(path: Path, size: int = 4096) -> Path:
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_bytes(b"x" * size)
    return path


def generation(store: Store, venv_root: Path | None = None) -> int:
    with store.locked():
        path = store.begin()
        number = int(path.name)
        venv = venv_at(venv_root / f"generation-{number}" if venv_root else path / "venv")
        if venv_root:
            mark_owner(venv, store.home, number)
        gen = store.commit(path, {"spec_name": "s", "spec_digest": str(number), "backend": f"venv://{venv}",
                                  "backend_kind": "venv", "location": str(venv)})
        store.record_gate(gen, [], [])
    return number


def tamper_meta(store: Store, number: int, **fields) -> None:
    meta = store.generations_dir / str(number) / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), **fields}))


@pytest.fixture
def store(tmp_path: Path, monkeypatch) -> Store:
    monkeypatch.setenv("ENVMGR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")  # no daemon: nothing else to remove
    store = Store(tmp_path / "home")
    for _ in range(3):
        generation(store)
    with store.locked():
        store.switch(3)
    return store


def test_gc_never_deletes_a_folder_a_tampered_meta_json_names(store, tmp_path, capsys):
    victim = venv_at(tmp_path / "victim")
    tamper_meta(store, 1, location=str(victim), backend=f"venv://{victim}")
    assert main(["gc", "--keep", "0"]) == 1  # refused: said, and an error exit
    assert (victim / "bin" / "python").read_bytes() == b"x" * 4096
    err = capsys.readouterr().err
    assert f"refused: {victim}" in err and "is not named generation-1" in err
    # even named like one and in a folder of its own: without this store's owner mark it is not ours
    generation(store)
    with store.locked():
        store.switch(4)  # 3 is now the previous good one: 2 goes
    named = venv_at(tmp_path / "elsewhere" / "generation-2")
    tamper_meta(store, 2, location=str(named))
    assert main(["gc", "--keep", "0"]) == 1
    assert named.is_dir() and OWNER_FILE in capsys.readouterr().err


def test_a_generation_folder_replaced_by_a_link_is_never_followed(store, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    (store.generations_dir / "1").rename(elsewhere)
    (store.generations_dir / "1").symlink_to(elsewhere)
    main(["gc", "--keep", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert (elsewhere / "venv" / "bin" / "python").exists() and (elsewhere / "meta.json").exists()
    assert all(item["generation"] != 1 for item in out["items"])  # neither removed nor counted as freed
    assert not list(store.generations_dir.glob(".trash-*"))
    assert (store.generations_dir / "1").is_symlink()  # left as it is, listed as damaged
    assert main(["generations"]) == 0 and "damaged" in capsys.readouterr().out


def test_a_kept_environment_inside_a_folder_that_goes_keeps_the_folder(store, tmp_path, capsys):
    # generation 3 (current) keeps its venv inside generation 1's folder
    inner = venv_at(store.generations_dir / "1" / "generation-3")
    tamper_meta(store, 3, location=str(inner), backend=f"venv://{inner}")
    with store.locked():
        store.switch(3)
    main(["gc", "--keep", "0"])
    assert (inner / "bin" / "python").exists()
    assert "a kept generation's environment" in capsys.readouterr().err


def test_a_store_reached_through_a_link_is_one_store(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    real_home, link_home = tmp_path / "real", tmp_path / "link"
    outside = tmp_path / "envs"
    store = Store(real_home)
    for _ in range(3):
        generation(store, venv_root=outside)
    with store.locked():
        store.switch(3)
    link_home.symlink_to(real_home)
    monkeypatch.setenv("ENVMGR_HOME", str(link_home))
    assert Store(link_home).home == Store(real_home).home == real_home.resolve()
    assert main(["gc", "--keep", "0"]) == 0, capsys.readouterr().err
    assert (outside / "generation-3" / "bin" / "python").exists()  # current's venv
    assert not (outside / "generation-1").exists()  # the old one's, provably its own, went
    assert [g.number for g in Store(link_home).generations()] == [2, 3]


def test_a_truncated_current_meta_json_is_damaged_never_swept(store, capsys):
    current = store.current().number
    (store.generations_dir / str(current) / "meta.json").write_text('{"spec_na')
    with pytest.raises(DamagedRecord) as info:
        store.current()
    assert "meta.json is damaged" in info.value.message and "rollback --to" in (info.value.hint or "")
    with store.locked():
        new = store.begin()  # what apply does first: sweep, then a new number
    assert (store.generations_dir / str(current)).is_dir()
    assert int(new.name) == 4  # never the damaged one's number again
    assert main(["status"]) == 1 and "is damaged" in capsys.readouterr().err
    assert main(["rollback", "--to", "1"]) == 0  # the way out still works


@pytest.mark.parametrize("target", ["generations/two", "/etc", "../../etc", "generations/9", "generations"])
def test_a_current_link_to_anything_but_a_generation_is_a_clear_error(store, target, capsys):
    store.current_link.unlink()
    store.current_link.symlink_to(target)
    with pytest.raises(DamagedRecord):
        store.current()
    assert main(["status"]) == 1
    assert "Traceback" not in capsys.readouterr().err
    with store.locked():
        store.begin()  # sweeps nothing it cannot be sure of
    assert [g.number for g in store.generations()] == [1, 2, 3]


def test_confinement_refuses_paths_outside_or_through_links(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "link").symlink_to(tmp_path)
    assert inside(root, root / "a", "x") == root.resolve() / "a"
    for bad in (tmp_path / "other", root / "link" / "root", root, Path("/")):
        with pytest.raises(Refused):
            inside(root, bad, "x")


def test_the_lock_names_its_holder_and_readers_never_take_it(store, capsys):
    with store.locked("gc"):
        with pytest.raises(StateError) as info:
            with Store(store.home).locked("apply"):
                pass
        assert "another envmgr gc (pid " in info.value.message
        # read-only commands run beside a writer: they neither wait nor fail
        assert main(["gc", "--dry-run"]) == 0
        assert main(["generations"]) == 0
        assert main(["status"]) in (0, 1, 2)
    assert "holds" not in capsys.readouterr().err


def test_a_venv_root_inside_the_store_is_refused_at_apply(tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""apiVersion: envmgr/v1
metadata: {{name: inside}}
hardware: {{gpu: {{arch: sm_90}}}}
python: {{version: "{sys.version_info.major}.{sys.version_info.minor}", packages: {{}}}}
realize: {{backend: venv, venv: {{path: {home / 'generations' / '1'}}}}}
""")
    monkeypatch.setenv("ENVMGR_HOME", str(home))
    assert main(["apply", str(spec), "--yes"]) == 1
    assert "lies inside the store" in capsys.readouterr().err
    assert Store(home).current() is None
    os.sync()
