"""Stores for tests that need generations but no build: a complete venv generation whose
venv's python is this interpreter (a link), with a recorded env file and spec."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from envmgr.state import Store
from envmgr.targets.urls import make_url

SPEC = "apiVersion: envmgr/v1\nmetadata: {name: %s}\nhardware: {gpu: {arch: sm_90}}\n"


def venv_generation(home: Path, name: str = "t", env: dict | None = None) -> Path:
    """A new current generation in the store at ``home``; its venv's path."""
    store = Store(home)
    with store.locked():
        path = store.begin()
        venv = path / "venv"
        (venv / "bin").mkdir(parents=True)
        os.symlink(sys.executable, venv / "bin" / "python")
        (venv / "envmgr-env.json").write_text(json.dumps(env if env is not None else {"PLAIN": "1"}))
        (path / "spec.yaml").write_text(SPEC % name)
        gen = store.commit(path, {"spec_name": name, "spec_digest": "d" * 64, "backend": make_url("venv", str(venv)),
                                  "backend_kind": "venv", "location": str(venv), "details": {}})
        store.record_gate(gen, [], [])
        store.switch(gen.number)
    return venv
