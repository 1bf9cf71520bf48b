"""Files a user names (``advise --write``): regular files only, never the spec or what it
extends, no overwrite without --force, atomic, no temp file left (issue 24)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from envmgr.cli import main
from envmgr.errors import UsageError
from envmgr.userfiles import output_dir, write_user_file

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    """The scenario's specs in a folder of their own (advise --write must never change them)."""
    for name in ("cuda128.yaml", "cuda13.yaml"):
        shutil.copy(SPECS / name, tmp_path / name)
    return tmp_path


def advise_write(spec: Path, target: Path, *extra: str) -> int:
    return main(["advise", str(spec), "--write", str(target), *extra])


def test_a_character_device_or_fifo_is_never_replaced(specs, capsys):
    fifo = specs / "fifo"
    os.mkfifo(fifo)
    assert advise_write(specs / "cuda13.yaml", fifo, "--force") == 1
    assert fifo.is_fifo() and "not a regular file" in capsys.readouterr().err
    # /dev/null itself: as root the old code replaced the system's /dev/null with a spec
    assert advise_write(specs / "cuda13.yaml", Path("/dev/null"), "--force") == 1
    assert Path("/dev/null").is_char_device()


def test_the_spec_and_what_it_extends_are_never_written(specs, capsys):
    before = {p.name: p.read_bytes() for p in specs.iterdir()}
    for target in ("cuda13.yaml", "cuda128.yaml"):  # the spec, and the file it extends
        assert advise_write(specs / "cuda13.yaml", specs / target, "--force") == 1
        assert "a spec this command reads" in capsys.readouterr().err
    os.link(specs / "cuda128.yaml", specs / "hardlink.yaml")  # the same file by another name
    assert advise_write(specs / "cuda13.yaml", specs / "hardlink.yaml", "--force") == 1
    assert {p.name: p.read_bytes() for p in specs.iterdir() if p.name != "hardlink.yaml"} == before


def test_an_existing_file_or_link_needs_force_and_a_folder_is_refused(specs, capsys):
    existing = specs / "child.yaml"
    existing.write_text("mine\n")
    assert advise_write(specs / "cuda13.yaml", existing) == 1
    assert existing.read_text() == "mine\n" and "--force" in capsys.readouterr().err
    link = specs / "link.yaml"
    link.symlink_to(specs / "elsewhere.yaml")
    assert advise_write(specs / "cuda13.yaml", link, "--force") == 1
    assert link.is_symlink() and not (specs / "elsewhere.yaml").exists()
    folder = specs / "a-folder"
    folder.mkdir()
    assert advise_write(specs / "cuda13.yaml", folder, "--force") == 1
    assert not [p for p in specs.iterdir() if p.name.endswith(".tmp")]  # nothing left behind


def test_force_replaces_a_regular_file_atomically(specs):
    child = specs / "child.yaml"
    child.write_text("old\n")
    assert advise_write(specs / "cuda13.yaml", child, "--force") in (0, 1)
    assert "extends: cuda13.yaml" in child.read_text()
    assert not [p for p in specs.iterdir() if p.name.startswith(".child")]


def test_a_failed_write_leaves_no_temp_file(tmp_path, monkeypatch):
    def broken(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError):
        write_user_file(tmp_path / "x.yaml", "text")
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_is_a_real_folder(tmp_path):
    assert output_dir(tmp_path / "new" / "report").is_dir()
    (tmp_path / "file").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "new")
    for bad in ("file", "link"):
        with pytest.raises(UsageError):
            output_dir(tmp_path / bad)


def test_report_out_refuses_what_it_would_replace_unless_forced(tmp_path, capsys):
    results = ROOT / "tests" / "fixtures" / "bench" / "results_h200_sglang_0.5.11"
    out = tmp_path / "report"
    assert main(["report", "--results", str(results), "--out", str(out)]) == 0
    first = (out / "report.json").read_bytes()
    capsys.readouterr()
    assert main(["report", "--results", str(results), "--out", str(out)]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err and (out / "report.json").read_bytes() == first
    assert main(["report", "--results", str(results), "--out", str(out), "--force"]) == 0
    (out / "report.html").unlink()
    (out / "report.html").symlink_to(tmp_path / "elsewhere.html")
    assert main(["report", "--results", str(results), "--out", str(out), "--force"]) == 1
    assert not (tmp_path / "elsewhere.html").exists() and "symbolic link" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json", "throughput.png"]  # no temp file
