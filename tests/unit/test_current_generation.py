"""The current generation as the commands see it: ``envmgr probe`` runs recorded beside the
apply-time gate's report (never over it); ``envmgr status`` telling a missing environment from drift."""

from __future__ import annotations

import json
from pathlib import Path

from envmgr.probes.session import ADHOC_DIR, PROBES_FILE, probe_environment
from envmgr.state import Store

ROOT = Path(__file__).resolve().parents[2]


def test_an_adhoc_probe_run_never_replaces_the_gates_report(tmp_path):
    store = Store(tmp_path / "home")
    with store.locked():
        path = store.begin()
        (path / "spec.yaml").write_text((ROOT / "specs" / "demo-cpu.yaml").read_text())
        gen = store.commit(path, {"spec_name": "demo", "backend": "local://", "backend_kind": "local"})
        store.switch(gen.number)
    gate_report = {"target": "local://", "results": [{"probe": "gpu", "status": "pass"}], "note": "the gate's"}
    (gen.path / PROBES_FILE).write_text(json.dumps(gate_report))
    for _ in range(2):
        report = probe_environment(target=None, spec_path=None, only=["gpu"], python=None, timeout=60,
                                   home=tmp_path / "home", progress=lambda line: None)
        assert report.recorded and Path(report.recorded).parent == gen.path / ADHOC_DIR
    assert json.loads((gen.path / PROBES_FILE).read_text()) == gate_report
    runs = sorted((gen.path / ADHOC_DIR).iterdir())
    assert len(runs) == 2 and all(json.loads(r.read_text())["results"][0]["probe"] == "gpu" for r in runs)


def test_status_tells_a_missing_environment_from_drift(tmp_path, capsys):
    from envmgr.cli import main

    store = Store(tmp_path / "home")
    with store.locked():
        path = store.begin()
        (path / "spec.yaml").write_text((ROOT / "specs" / "demo-cpu.yaml").read_text())
        (path / "lock.txt").write_text(f"six==1.16.0 \\\n    --hash=sha256:{'0' * 64}\n")
        gen = store.commit(path, {"spec_name": "demo", "backend": f"venv://{tmp_path / 'gone'}",
                                  "backend_kind": "venv"})
        store.switch(gen.number)
    assert main(["status", "--home", str(tmp_path / "home")]) == 1
    assert "environment missing" in capsys.readouterr().out
    assert main(["status", "--home", str(tmp_path / "home"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["missing"] and doc["drift"] is None and doc["drifted"] is False


def test_a_moved_home_reads_its_own_environments(tmp_path):
    """meta.json names the generation's own folder relatively: after `mv` of ENVMGR_HOME the
    generation's venv is the one in the new place, never the old home's."""
    import shutil

    store = Store(tmp_path / "old")
    with store.locked():
        path = store.begin()
        venv = path / "venv"
        gen = store.commit(path, {"spec_name": "demo", "backend": f"venv://{venv}", "backend_kind": "venv",
                                  "location": str(venv)})
        store.switch(gen.number)
    stored = json.loads((path / "meta.json").read_text())
    assert str(tmp_path / "old") not in json.dumps(stored)  # no absolute path into the home
    shutil.move(str(tmp_path / "old"), str(tmp_path / "new"))
    moved = Store(tmp_path / "new").current()
    assert moved.backend == f"venv://{(tmp_path / 'new').resolve()}/generations/{gen.number}/venv"
    assert moved.location == str((tmp_path / "new").resolve() / "generations" / str(gen.number) / "venv")
    # a backend outside the home stays as it was
    elsewhere = Store(tmp_path / "h2")
    with elsewhere.locked():
        other = elsewhere.commit(elsewhere.begin(), {"backend": "venv:///opt/shared-venv", "location": "/opt/shared-venv"})
    assert other.backend == "venv:///opt/shared-venv" and json.loads((other.path / "meta.json").read_text())["backend"] == "venv:///opt/shared-venv"
