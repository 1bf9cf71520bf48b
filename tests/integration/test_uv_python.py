"""A spec's Python this host lacks is installed by uv into the generation (issue 29), for real:
`uv python install` from a python-build-standalone-shaped archive of this machine's pyenv 3.12
(served through UV_PYTHON_DOWNLOADS_JSON_URL, as an offline mirror would be), then the venv made
from it. Nothing is written outside the store (no ~/.local/bin link)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from envmgr.builders.venv import find_interpreter
from envmgr.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.slow]
PYENV_312 = Path("/root/.pyenv/versions/3.12.1")


@pytest.fixture()
def mirror(tmp_path, monkeypatch):
    if find_interpreter("3.12") is not None:
        pytest.skip("this host has a Python 3.12: nothing to provision")
    if not (PYENV_312 / "bin" / "python3.12").exists():
        pytest.skip(f"no {PYENV_312} here to pack as a python-build-standalone archive")
    archive = tmp_path / "cpython-3.12.1.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:  # python-build-standalone's install_only layout: python/...
        tar.add(PYENV_312, arcname="python",
                filter=lambda info: None if "/site-packages/" in info.name or "/test/" in info.name else info)
    entry = {"name": "cpython", "arch": {"family": "x86_64", "variant": None}, "os": "linux", "libc": "gnu",
             "major": 3, "minor": 12, "patch": 1, "prerelease": "", "url": archive.as_uri(),
             "sha256": hashlib.sha256(archive.read_bytes()).hexdigest(), "variant": None, "build": "local"}
    downloads = tmp_path / "downloads.json"
    downloads.write_text(json.dumps({"cpython-3.12.1-linux-x86_64-gnu": entry}))
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS_JSON_URL", downloads.as_uri())
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))  # where uv would link a bin (it must not)
    return tmp_path


def test_a_missing_python_is_installed_into_the_generation_and_the_venv_made_from_it(mirror, capsys):
    spec = mirror / "py312.yaml"
    spec.write_text("apiVersion: envmgr/v1\nmetadata: {name: py312}\nhardware: {gpu: {arch: sm_90}}\n"
                    "python: {version: '3.12', packages: {packaging: '>=23'}}\n")
    home = mirror / "store"
    rc = main(["plan", str(spec), "--home", str(home)])
    assert rc == 2 and "[1/5] install Python 3.12 with uv (none on this host)" in capsys.readouterr().out
    assert main(["apply", str(spec), "--yes", "--home", str(home)]) == 0, capsys.readouterr().err
    generation = home / "generations" / "1"
    venv_python = generation / "venv" / "bin" / "python"
    version = subprocess.run([str(venv_python), "-c", "import sys, packaging; print(sys.version_info[:2], sys.base_prefix)"],
                             capture_output=True, text=True, check=True).stdout
    assert version.startswith("(3, 12)") and str(generation / "python") in version  # made from the one uv put there
    assert not (mirror / "user-home" / ".local" / "bin").exists()  # --no-bin: nothing outside the store
    shutil.rmtree(home)
