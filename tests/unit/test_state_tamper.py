"""A damaged or tampered store: every command that reads it answers with a clear error or a
result, never a traceback, and nothing outside the store is ever deleted (issue 24).

A store with three generations (venvs whose python is this interpreter) is damaged one file
at a time, in every way a crash or a hand with write access to one file can: truncated, empty,
a list or a number instead of an object, each recorded field of the wrong type, binary, NUL
bytes, nested 100 000 deep, 5 MB, a symlink out of the store, a FIFO, a folder in place of a
file; ``current`` pointing at a non-number, outside, nowhere, or replaced by a file. Then each
command runs in-process through ``envmgr.cli.main``. A canary folder and file outside the store
must survive every run, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from envmgr.cli import main
from envmgr.records import META
from envmgr.state import Store

SPEC = """apiVersion: envmgr/v1
metadata: {name: tamper}
hardware: {gpu: {arch: sm_90}}
python: {version: "%d.%d", packages: {six: "1.16.0"}}
env: {HF_TOKEN: hf_canary_secret_value_123456, PLAIN: "1"}
""" % sys.version_info[:2]


def build_store(home: Path) -> Store:
    store = Store(home)
    for number in (1, 2, 3):
        with store.locked():
            path = store.begin()
            venv = path / "venv"
            (venv / "bin").mkdir(parents=True)
            os.symlink(sys.executable, venv / "bin" / "python")
            (venv / "envmgr-env.json").write_text(json.dumps({"PLAIN": "1", "HF_TOKEN": "hf_canary_secret_value_123456"}))
            (path / "spec.yaml").write_text(SPEC)
            (path / "plan.json").write_text(json.dumps({"actions": [], "steps": []}))
            (path / "lock.txt").write_text("six==1.16.0 \\\n    --hash=sha256:8abb\n")
            gen = store.commit(path, {"spec_name": "tamper", "spec_digest": f"d{number}", "backend": f"venv://{venv}",
                                      "backend_kind": "venv", "location": str(venv), "details": {}})
            store.record_gate(gen, [], [])
    with store.locked():
        store.switch(2)
    return store


def canary(root: Path) -> tuple[Path, Path]:
    folder = root / "victim"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text("precious")
    file = root / "victim.txt"
    file.write_text("precious")
    return folder, file


def fingerprint(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for root in paths:
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            digest.update(str(path).encode() + (path.read_bytes() if path.is_file() else b"dir"))
    return digest.hexdigest()


def _mutations(victim: Path, victim_file: Path) -> dict[str, object]:
    """name -> bytes to write, or a callable(path) that makes the entry."""
    out: dict[str, object] = {
        "truncated": lambda p: p.write_bytes(p.read_bytes()[: max(1, len(p.read_bytes()) // 2)]),
        "empty": b"", "list": b"[1, 2]", "number": b"42", "string": b'"x"', "null": b"null",
        "binary": bytes(range(256)) * 8, "nul": b'{"a\x00": "\x00"}', "deep": b"[" * 100_000,
        "deep_object": b'{"a":' * 1000 + b"1" + b"}" * 1000, "huge": b'{"x": "' + b"a" * (5 << 20) + b'"}',
        "not_utf8": b'{"spec_name": "\xff\xfe"}',
        "link_out": lambda p: (p.unlink(missing_ok=True), os.symlink(victim_file, p)),
        "link_dangling": lambda p: (p.unlink(missing_ok=True), os.symlink("/nonexistent/x", p)),
        "fifo": lambda p: (p.unlink(missing_ok=True), os.mkfifo(p)),
        "folder": lambda p: (p.unlink(missing_ok=True), p.mkdir()),
    }
    for field, (check, _) in META.items():  # each field as a list, and as the other scalar kind
        for kind, value in (("list", []), ("string", "x") if not check("x") else ("number", 7)):
            out[f"meta_{field}_{kind}"] = ("meta", field, value)
    out["meta_location_victim"] = ("meta", "location", str(victim))
    out["meta_backend_victim"] = ("meta", "backend", f"venv://{victim}")
    out["meta_number_other"] = ("meta", "number", 99)
    return out


TARGETS = ["generations/1/meta.json", "generations/2/meta.json", "generations/1/gate.json",
           "generations/2/gate.json", "generations/2/plan.json", "generations/2/venv/envmgr-env.json",
           "generations/2/spec.yaml", "generations/2/lock.txt"]
CURRENT = {
    "current_non_numeric": "generations/two", "current_outside": None, "current_dangling": "generations/9",
    "current_absolute": "/etc", "current_dotdot": "../../../etc", "current_file": "FILE",
}
COMMANDS = [["status", "--json"], ["generations"], ["gc", "--dry-run"], ["gc", "--keep", "0"], ["rollback"],
            ["rollback", "--to", "1"], ["env"], ["env", "--sh"], ["verify", "--json"]]


def apply_mutation(home: Path, target: str, mutation: object) -> None:
    path = home / target
    if isinstance(mutation, tuple):
        _, field, value = mutation
        data = json.loads(path.read_text())
        data[field] = value
        path.write_text(json.dumps(data))
    elif callable(mutation):
        mutation(path)
    else:
        path.unlink(missing_ok=True)
        path.write_bytes(mutation)


def cases(victim: Path, victim_file: Path) -> list[tuple[str, str, object]]:
    found = []
    for target in TARGETS:
        for name, mutation in _mutations(victim, victim_file).items():
            if isinstance(mutation, tuple) and not target.endswith("meta.json"):
                continue
            found.append((target, name, mutation))
    return found


@pytest.mark.slow
def test_tampered_state_never_gives_a_traceback_nor_deletes_outside_the_store(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")  # gc asks no daemon: fast, alike
    victim, victim_file = canary(tmp_path / "outside")
    before = fingerprint([victim, victim_file])
    template = tmp_path / "template"
    build_store(template)
    runs = tracebacks = 0
    failures = []
    kinds = cases(victim, victim_file) + [("current", name, link) for name, link in CURRENT.items()]
    for target, name, mutation in kinds:
        for argv in COMMANDS:
            home = tmp_path / "home"
            shutil.rmtree(home, ignore_errors=True)
            shutil.copytree(template, home, symlinks=True)
            if target == "current":
                link = home / "current"
                link.unlink()
                if mutation == "FILE":
                    link.write_text("generations/2")
                else:
                    os.symlink(str(victim) if mutation is None else mutation, link)
            else:
                apply_mutation(home, target, mutation)
            monkeypatch.setenv("ENVMGR_HOME", str(home))
            monkeypatch.chdir(tmp_path)
            try:
                rc = main(list(argv))
            except SystemExit as exc:  # argparse
                rc = exc.code
            except BaseException as exc:  # noqa: BLE001 - the finding itself
                rc = None
                failures.append((target, name, argv, repr(exc)[:300]))
            out, err = capsys.readouterr()
            runs += 1
            if "Traceback" in out + err or rc not in (0, 1, 2):
                tracebacks += 1
                failures.append((target, name, argv, rc, (out + err)[-300:]))
            assert "hf_canary_secret_value_123456" not in out + err, (target, name, argv)
            assert fingerprint([victim, victim_file]) == before, (target, name, argv)
    print(f"tampered-state fuzz: {len(kinds)} kinds x {len(COMMANDS)} commands = {runs} runs, "
          f"{tracebacks} tracebacks or bad exits")
    assert not failures, "\n".join(map(str, failures[:25]))
