"""`envmgr gc`: which generations stay, what goes (a generation's folder, a venv it keeps
elsewhere), sizes, and that the current and the previous good generation are never removed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envmgr.confine import mark_owner
from envmgr.gc import Garbage, collect, garbage, human, kept, tree_size
from envmgr.state import Store


@pytest.fixture(autouse=True)
def no_docker_engine(tmp_path, monkeypatch):
    """gc lists (and `gc --keep 0` removes) the engine's dangling build stages of *any* envmgr
    build: on a shared daemon those of other sessions' image builds. These tests are about
    generations: no daemon answers them (in-process, and for the `envmgr gc` they run)."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")


def generation(store: Store, *, gate_failed: bool = False, venv_root: Path | None = None) -> int:
    """A complete venv generation with a real folder for its venv (in it, or under venv_root)."""
    with store.locked():
        path = store.begin()
        venv = (venv_root / f"generation-{path.name}") if venv_root else path / "venv"
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").write_bytes(b"x" * 8192)
        if venv_root:  # what the venv builder writes into a venv it keeps outside the generation
            mark_owner(venv, store.home, int(path.name))
        gen = store.commit(path, {"spec_name": "s", "spec_digest": path.name, "backend": f"venv://{venv}",
                                  "backend_kind": "venv", "location": str(venv)})
        store.record_gate(gen, ["gpu"] if gate_failed else [], ["gpu"] if gate_failed else [])
    return gen.number


def test_current_and_previous_good_are_kept_whatever_keep_says(tmp_path):
    store = Store(tmp_path / "home")
    for failed in (False, False, True, False, False):
        generation(store, gate_failed=failed)
    with store.locked():
        store.switch(4)
    # 3 failed its gate: the previous good one is 2; 5 is newer than current and kept by --keep 1
    assert kept(store, 0) == {4, 2}
    assert kept(store, 1) == {5, 4, 2}
    assert {g.generation for g in garbage(store, 0)} == {1, 3, 5}


def test_gc_removes_the_folders_and_a_venv_kept_elsewhere_and_reports_the_sizes(tmp_path):
    store = Store(tmp_path / "home")
    outside = tmp_path / "envs"
    first = generation(store, venv_root=outside)
    generation(store)  # the previous good one: kept
    generation(store)
    with store.locked():
        store.switch(3)
    items = [i for i in garbage(store, 0) if i.kind != "build-stage"]  # the engine's dangling stages aside
    assert [(i.kind, i.generation) for i in items] == [("generation", first), ("venv", first)]
    assert items[1].what == str(outside / "generation-1") and items[1].size_bytes >= 8192
    lines: list[str] = []
    with store.locked():
        freed = collect(store, items, lines.append)
    assert freed == sum(i.size_bytes for i in items)
    assert [g.number for g in store.generations()] == [2, 3] and not (outside / "generation-1").exists()
    assert lines[0].startswith("removing generation") and "KB" in lines[0]


def test_the_cli_lists_before_it_removes_and_never_touches_current(tmp_path):
    home = tmp_path / "home"
    store = Store(home)
    for _ in range(3):
        generation(store)
    with store.locked():
        store.switch(3)

    def envmgr(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "envmgr", "gc", "--home", str(home), *args],
                              capture_output=True, text=True, timeout=120)

    listed = json.loads(envmgr("--keep", "0", "--dry-run", "--json").stdout)
    assert listed["kept"] == [2, 3] and [i["generation"] for i in listed["items"] if i["kind"] == "generation"] == [1]
    assert listed["freed_bytes"] == 0 and len(store.generations()) == 3  # a dry run removes nothing
    done = envmgr("--keep", "0")
    assert done.returncode == 0 and "freed" in done.stdout and "removing generation" in done.stderr
    assert [g.number for g in store.generations()] == [2, 3] and store.current().number == 3
    refused = envmgr("--keep", "-1", "--json")
    assert refused.returncode == 1 and json.loads(refused.stdout)["error"]["type"] == "UsageError"


def test_sizes_count_a_hard_link_once_and_read_well(tmp_path):
    (tmp_path / "a").write_bytes(b"y" * 10000)
    (tmp_path / "b").hardlink_to(tmp_path / "a")
    assert 10000 <= tree_size(tmp_path) < 20000
    assert (human(512), human(1_500_000), human(2_000_000_000)) == ("512 B", "1.5 MB", "2.0 GB")
    assert Garbage("image", "sha256:x", 1).to_dict()["kind"] == "image"
