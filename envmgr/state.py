"""Generations: every apply builds a new one beside the current one (Nix-like).

Layout under ``$ENVMGR_HOME`` (default ``$XDG_STATE_HOME/envmgr`` or ``~/.local/state/envmgr``)::

    lock                      flock: one apply (or rollback) at a time
    generations/N/            spec.yaml, plan.json, lock.txt, logs/, what the builder made
    generations/N/meta.json   written last, atomically: a generation without it is incomplete
    generations/N/gate.json   the probe gate's verdict, written before ``current`` may move
    current -> generations/N  switched with an atomic rename of a new symlink

Why this survives ``kill -9`` anywhere: the current generation is only ever replaced by
``os.replace`` of the ``current`` link, after the new generation's ``meta.json`` exists;
incomplete generations are ignored and swept by the next apply; the flock dies with
the process that held it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envmgr.errors import StateError, UsageError


@dataclass(frozen=True)
class Generation:
    number: int
    path: Path
    meta: dict[str, Any]

    @property
    def backend(self) -> str:
        """The URL of the environment built, with this generation's own folder filled in."""
        return _resolve(self.meta.get("backend") or "local://", self.path)

    @property
    def location(self) -> str | None:
        """Where the environment lives (a venv's folder, an image id), resolved like ``backend``."""
        value = self.meta.get("location")
        return _resolve(value, self.path) if isinstance(value, str) else value

    @property
    def lock(self) -> str:
        lock = self.path / "lock.txt"
        return lock.read_text(encoding="utf-8") if lock.is_file() else ""

    @property
    def gate_record(self) -> dict[str, Any] | None:
        """What the probe gate recorded (required, failed, at), or None."""
        return _read_json(self.path / GATE_FILE)

    @property
    def gate(self) -> str:
        """``passed`` (or nothing required), ``failed``, ``interrupted`` (the apply died
        between commit and gate), or ``unknown`` for generations older than gate records."""
        record = self.gate_record
        if record is None:
            return "interrupted" if self.meta.get("gate_recorded") else "unknown"
        return "failed" if record.get("failed") else "passed"


GATE_FILE = "gate.json"
# Paths inside a generation's folder are written with this in meta.json, so that a moved
# ENVMGR_HOME reads its own environments, never the old home's.
GENERATION_DIR = "@generation"
RELATIVE_KEYS = ("backend", "location")


def _relative(meta: dict[str, Any], path: Path) -> dict[str, Any]:
    here = str(path.resolve())
    return {k: (v.replace(here, GENERATION_DIR) if k in RELATIVE_KEYS and isinstance(v, str) else v)
            for k, v in meta.items()}


def _resolve(value: str, path: Path) -> str:
    return value.replace(GENERATION_DIR, str(path.resolve()))


def default_home() -> Path:
    if os.environ.get("ENVMGR_HOME"):
        return Path(os.environ["ENVMGR_HOME"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "envmgr"


class Store:
    """The generations of one host profile."""

    def __init__(self, home: Path | None = None) -> None:
        # absolute: what is recorded must not depend on where envmgr runs next time
        self.home = Path(os.path.abspath(home if home else default_home()))
        self.generations_dir = self.home / "generations"
        self.current_link = self.home / "current"
        if self.home.exists() and not self.home.is_dir():
            raise StateError(f"the state directory {self.home} is not a directory",
                             hint="point --home or ENVMGR_HOME at a directory (it is created if missing)")

    # --- one writer at a time ---------------------------------------------------------

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's lock; a second apply fails at once instead of interleaving."""
        try:
            self.generations_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.home / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StateError(f"cannot use {self.home} as the state directory: {exc.strerror}",
                             hint="point --home or ENVMGR_HOME at a directory you can write") from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
                raise StateError(f"another envmgr apply holds {self.home / 'lock'} (pid {holder})",
                                 hint="wait for it to finish; the lock is released when it exits") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    # --- reading --------------------------------------------------------------------

    def generations(self) -> list[Generation]:
        """Complete generations, oldest first."""
        out = []
        for number, path in self._numbered():
            meta = _read_meta(path)
            if meta is not None:
                out.append(Generation(number, path, meta))
        return out

    def current(self) -> Generation | None:
        try:
            target = os.readlink(self.current_link)
        except (FileNotFoundError, OSError):
            return None
        path = (self.home / target) if not os.path.isabs(target) else Path(target)
        meta = _read_meta(path)
        return Generation(int(path.name), path, meta) if meta is not None else None

    def get(self, number: int) -> Generation:
        for gen in self.generations():
            if gen.number == number:
                return gen
        raise UsageError(f"no complete generation {number} in {self.generations_dir}",
                         hint="`envmgr generations` lists them")

    def named(self, name: str, flag: str = "--env") -> Generation:
        """``current`` or a generation number, as ``--env`` names one."""
        if name == "current":
            gen = self.current()
            if gen is None:
                raise UsageError(f"there is no current generation in {self.home}",
                                 hint=f"`envmgr apply SPEC` first, or give {flag} with a target URL")
            return gen
        if name.isdigit():
            return self.get(int(name))
        raise UsageError(f"{flag} {name!r} is not a generation number, 'current' or a target URL",
                         hint="`envmgr generations` lists the generations")

    # --- writing (call inside ``locked()``) ---------------------------------------------

    def begin(self) -> Path:
        """A fresh, empty generation directory numbered after every existing one."""
        self.sweep_incomplete()
        numbers = [n for n, _ in self._numbered()]
        path = self.generations_dir / str(max(numbers, default=0) + 1)
        path.mkdir()
        (path / "logs").mkdir()
        return path

    def commit(self, path: Path, meta: dict[str, Any]) -> Generation:
        """Mark a generation complete: its meta.json appears atomically."""
        meta = {**_relative(meta, path), "number": int(path.name), "completed": time.time(), "gate_recorded": True}
        write_atomic(path / "meta.json", json.dumps(meta, indent=2, sort_keys=True))
        return Generation(int(path.name), path, meta)

    def record_gate(self, generation: Generation, required: list[str], failed: list[str]) -> None:
        """The probe gate's verdict (also when nothing was required), before any switch."""
        write_atomic(generation.path / GATE_FILE, json.dumps(
            {"required": required, "failed": failed, "at": time.time()}, indent=2))

    def switch(self, number: int) -> None:
        """Point ``current`` at generation ``number`` with one atomic rename."""
        target = Path("generations") / str(number)
        if _read_meta(self.home / target) is None:
            raise StateError(f"generation {number} is not complete; not switching to it")
        tmp = self.home / f".current.{os.getpid()}"
        if tmp.is_symlink() or tmp.exists():
            tmp.unlink()
        os.symlink(target, tmp)
        os.replace(tmp, self.current_link)
        _fsync_dir(self.home)

    def sweep_incomplete(self) -> list[int]:
        """Remove generations that an interrupted apply left without meta.json."""
        swept = []
        current = self.current()
        for number, path in self._numbered():
            if _read_meta(path) is None and (current is None or current.number != number):
                self._discard(number, path)
                swept.append(number)
        for stale in self.generations_dir.glob(".trash-*"):
            shutil.rmtree(stale, ignore_errors=True)
        return swept

    def remove(self, generation: Generation) -> None:
        """Delete a generation that is not current (``envmgr gc``)."""
        current = self.current()
        if current is not None and current.number == generation.number:
            raise StateError(f"generation {generation.number} is current: it is never removed")
        self._discard(generation.number, generation.path)

    def _discard(self, number: int, path: Path) -> None:
        trash = self.generations_dir / f".trash-{number}-{os.getpid()}-{time.monotonic_ns()}"
        os.rename(path, trash)  # out of the numbering at once, even if removal is slow
        shutil.rmtree(trash, ignore_errors=True)

    def _numbered(self) -> list[tuple[int, Path]]:
        if not self.generations_dir.is_dir():
            return []
        found = [(int(p.name), p) for p in self.generations_dir.iterdir() if p.name.isdigit()]
        return sorted(found)


def _read_meta(path: Path) -> dict[str, Any] | None:
    return _read_json(path / "meta.json")


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace ``path`` with ``text`` in one rename, fsynced: readers see the old or the new
    file. ``mode`` applies from the first byte (0o600 for a file that holds secrets)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # a leftover of a killed writer: O_EXCL below must create it anew
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def current_spec(gen: Generation):
    """The spec a generation was built from (its recorded, merged ``spec.yaml``), loaded."""
    from envmgr.spec import load_spec

    return load_spec(gen.path / "spec.yaml")
