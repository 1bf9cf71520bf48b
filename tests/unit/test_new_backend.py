"""A backend is one unit (issue 28): a new one is one module (tests/dir_backend.py) plus one
registry line, and the spec, plan, apply, run, rollback and gc take it as they take the shipped
ones; nothing in envmgr compares a backend's name outside the registry and the backends."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from envmgr import backends
from envmgr.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dir_backend():
    backends.register(backends.Backend("dir", "dir_backend:DirTarget", "dir_backend:DirBuilder", "dir://[PATH]"))
    yield
    backends.unregister("dir")


def spec_file(tmp_path: Path, marker: str) -> Path:
    path = tmp_path / f"dir-{marker}.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "envmgr/v1", "metadata": {"name": "dir-demo"},
        "hardware": {"gpu": {"arch": "sm_90", "count": 1, "segment": "datacenter"}, "interconnect": "nvlink"},
        "python": {"version": "3.11", "packages": {"packaging": ">=23"}},
        "env": {"DEMO_MARKER": marker}, "realize": {"backend": "dir"}}))
    return path


def test_a_registered_backend_plans_applies_runs_rolls_back_and_is_collected(dir_backend, tmp_path, capsys):
    home = tmp_path / "home"
    assert main(["plan", str(spec_file(tmp_path, "a")), "--home", str(home), "--json"]) == 2
    plan = json.loads(capsys.readouterr().out)
    assert plan["builder"] == "dir" and [s["step"] for s in plan["steps"]] == ["folder", "env"]

    for marker in ("a", "b", "c"):
        assert main(["apply", str(spec_file(tmp_path, marker)), "--yes", "--home", str(home)]) == 0, marker
    capsys.readouterr()

    assert main(["run", "--home", str(home), "--", "sh", "-c", "echo $DEMO_MARKER $DIR_ENV"]) == 0
    marker, folder = capsys.readouterr().out.split()
    assert marker == "c" and folder == str(home / "generations" / "3" / "env")

    # the backend says when its environment is gone, and rollback refuses it
    (home / "generations" / "2" / "env" / "env.json").unlink()
    assert main(["rollback", "--to", "2", "--home", str(home)]) == 1
    assert "generation 2's folder" in capsys.readouterr().err
    assert main(["rollback", "--to", "1", "--home", str(home)]) == 0
    capsys.readouterr()

    assert main(["gc", "--keep", "0", "--home", str(home), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["kept"] == [1] and {i["generation"] for i in report["items"] if i["kind"] == "generation"} == {2, 3}
    assert sorted(p.name for p in (home / "generations").iterdir() if p.name.isdigit()) == ["1"]


def test_an_unregistered_backend_is_a_clear_spec_error(tmp_path, capsys):
    assert main(["validate", str(spec_file(tmp_path, "a"))]) == 1
    err = capsys.readouterr().err
    assert "'dir' is no backend envmgr knows: one of local, venv, docker, ansible" in err


KIND_NAMES = "|".join(backends.schemes())
# a comparison of something with a backend's name: `kind == "venv"`, `"docker" != scheme`, `in ("venv", ...)`
COMPARED = re.compile(rf"""(?:==|!=)\s*["'](?:{KIND_NAMES})["']|["'](?:{KIND_NAMES})["']\s*(?:==|!=)"""
                      rf"""|\bin\s*[(\[{{]\s*["'](?:{KIND_NAMES})["']""")
# where a backend's own name belongs: the registry and the backends themselves
OWN = ("envmgr/backends.py", "envmgr/targets/", "envmgr/builders/")


def test_no_backend_name_is_compared_outside_the_registry_and_the_backends():
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / "envmgr").rglob("*.py"))
             if not str(path.relative_to(ROOT)).startswith(OWN)
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if COMPARED.search(line)]
    assert found == []


def test_the_name_check_can_fail():
    for line in ('if kind != "venv":', "if target.scheme == 'docker':", 'if backend in ("ansible", "x"):'):
        assert COMPARED.search(line), line
    assert not COMPARED.search('Garbage(FOLDER, location)')
