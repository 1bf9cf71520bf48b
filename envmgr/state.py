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
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envmgr import confine, failpoints
from envmgr.errors import StateError, UsageError
from envmgr.records import GATE, META, DamagedRecord, read_bytes, read_record


@dataclass(frozen=True)
class Generation:
    number: int
    path: Path
    meta: dict[str, Any]

    @property
    def backend(self) -> str:
        """The URL of the environment built, with this generation's own folder filled in."""
        return _resolve(self.meta.get("backend") or "local://", self.path, "backend")

    @property
    def location(self) -> str | None:
        """Where the environment lives (a venv's folder, an image id), resolved like ``backend``."""
        value = self.meta.get("location")
        return _resolve(value, self.path) if isinstance(value, str) else value

    @property
    def lock(self) -> str:
        """The generation's lock text ("" when it has none); a lock that is no regular UTF-8 file
        raises ``DamagedRecord``."""
        data = read_bytes(self.path / "lock.txt")
        if data is None:
            return ""
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise DamagedRecord(self.path / "lock.txt", "is not UTF-8 text") from None

    @property
    def gate_record(self) -> dict[str, Any] | None:
        """What the probe gate recorded (required, failed, at), or None; a damaged gate.json
        raises ``DamagedRecord``."""
        return read_record(self.path / GATE_FILE, GATE)

    @property
    def gate(self) -> str:
        """``passed`` (or nothing required), ``failed``, ``interrupted`` (the apply died
        between commit and gate), ``unknown`` for generations older than gate records, or
        ``damaged`` when gate.json cannot be read."""
        try:
            record = self.gate_record
        except DamagedRecord:
            return "damaged"
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
    return {k: (v.replace(_as_in(k, here), GENERATION_DIR) if k in RELATIVE_KEYS and isinstance(v, str) else v)
            for k, v in meta.items()}


def _resolve(value: str, path: Path, key: str = "location") -> str:
    return value.replace(GENERATION_DIR, _as_in(key, str(path.resolve())))


def _as_in(key: str, folder: str) -> str:
    """The folder as ``key`` holds it: in the backend URL percent-encoded as
    ``envmgr.targets.urls.url_path`` does it (state sits below targets; a test checks they
    agree), so a '?' or '#' in the store's path stays part of the venv's path."""
    from urllib.parse import quote

    return quote(folder, safe="/:@", errors="surrogateescape") if key == "backend" else folder


def default_home() -> Path:
    if os.environ.get("ENVMGR_HOME"):
        return Path(os.environ["ENVMGR_HOME"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "envmgr"


class Store:
    """The generations of one host profile."""

    def __init__(self, home: Path | None = None) -> None:
        # real and absolute: what is recorded must not depend on where envmgr runs next time, nor
        # on the link a store is reached through (apply by one path, gc by another: one store)
        self.home = Path(os.path.realpath(home if home else default_home()))
        self.generations_dir = self.home / "generations"
        self.current_link = self.home / "current"
        if self.home.exists() and not self.home.is_dir():
            raise StateError(f"the state directory {self.home} is not a directory",
                             hint="point --home or ENVMGR_HOME at a directory (it is created if missing)")

    # --- one writer at a time ---------------------------------------------------------

    @contextmanager
    def locked(self, command: str = "apply") -> Iterator[None]:
        """Hold the store's lock for ``command`` (apply, rollback, gc): a second writer fails at
        once, naming the holder, instead of interleaving. Readers never take it."""
        try:
            self.generations_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.home / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise StateError(f"cannot use {self.home} as the state directory: {exc.strerror}",
                             hint="point --home or ENVMGR_HOME at a directory you can write") from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(os.pread(fd, 128, 0))
                raise StateError(f"another envmgr {holder} holds {self.home / 'lock'}",
                                 hint="wait for it to finish; the lock is released when it exits") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {command}".encode(), 0)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    # --- reading --------------------------------------------------------------------

    def generations(self) -> list[Generation]:
        """Complete generations, oldest first (a damaged one is left out: ``damaged`` lists it)."""
        out = []
        for number, path in self._numbered():
            try:
                meta = _read_meta(path)
            except DamagedRecord:
                continue
            if meta is not None:
                out.append(Generation(number, path, meta))
        return out

    def damaged(self) -> list[tuple[int, str]]:
        """``(number, why)`` of every numbered entry that cannot be used: a link or a file in
        place of a folder, a meta.json that does not read."""
        found = []
        for entry in self._entries():
            number = int(entry.name)
            if entry.is_symlink() or not entry.is_dir():
                found.append((number, f"{entry} is {'a symbolic link' if entry.is_symlink() else 'not a folder'}"
                                      " (never followed)"))
                continue
            try:
                _read_meta(entry)
            except DamagedRecord as exc:
                found.append((number, exc.message))
        return sorted(found)

    def current_number(self) -> int | None:
        """The generation ``current`` names, read from the link alone (None without a link);
        ``DamagedRecord`` when it is no link to ``generations/N``."""
        if not self.current_link.is_symlink():
            if self.current_link.exists():
                raise DamagedRecord(self.current_link, "is not a symbolic link",
                                    hint=f"remove it and switch with `envmgr rollback --to N` ({self.home})")
            return None
        target = os.readlink(self.current_link)
        parts = Path(target).parts
        if len(parts) != 2 or parts[0] != "generations" or not parts[1].isdigit() or len(parts[1]) > 9:
            raise DamagedRecord(self.current_link, f"points to {target!r}, not to generations/N",
                                hint="switch to a good generation with `envmgr rollback --to N`")
        return int(parts[1])

    def current(self) -> Generation | None:
        """The current generation, None when there is none; ``DamagedRecord`` when ``current``
        exists but what it names cannot be used (say which, never 'no current generation')."""
        number = self.current_number()
        if number is None:
            return None
        path = self.generations_dir / str(number)
        if path.is_symlink() or not path.is_dir():
            raise DamagedRecord(path, "is current but not a folder of the store",
                                hint="switch to a good generation with `envmgr rollback --to N`")
        meta = _read_meta(path)
        if meta is None:
            raise DamagedRecord(path / "meta.json", f"is missing, and generation {number} is current",
                                hint="switch to a good generation with `envmgr rollback --to N`")
        return Generation(number, path, meta)

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
        """A fresh, empty generation directory numbered after every existing entry (damaged
        ones too: a number is never used twice)."""
        self.sweep_incomplete()
        numbers = [int(e.name) for e in self._entries()]
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
        """Point ``current`` at generation ``number`` with one atomic rename (a kill before it
        leaves the old link, after it the new one: never none)."""
        target = Path("generations") / str(number)
        path = self.home / target
        if path.is_symlink() or _read_meta(path) is None:
            raise StateError(f"generation {number} is not complete; not switching to it")
        for stale in self.home.glob(".current.*"):  # links a killed switch left behind
            if stale.is_symlink():
                stale.unlink(missing_ok=True)
        tmp = self.home / f".current.{os.getpid()}"
        os.symlink(target, tmp)
        failpoints.reach("link-made")
        os.replace(tmp, self.current_link)
        _fsync_dir(self.home)

    def sweep_incomplete(self) -> list[int]:
        """Remove generations that an interrupted apply left without meta.json: never the one
        ``current`` names (whatever state it is in), never a damaged or linked entry."""
        try:
            current = self.current_number()
        except DamagedRecord:
            return []  # what current means is unknown: sweep nothing
        swept = []
        for number, path in self._numbered():
            if number == current or (path / "meta.json").exists() or (path / "meta.json").is_symlink():
                continue
            confine.remove_tree(self.generations_dir, path, f"incomplete generation {number}")
            swept.append(number)
        confine.empty_trash(self.generations_dir)
        return swept

    def remove(self, generation: Generation) -> None:
        """Delete a generation that is not current (``envmgr gc``), by the confinement rule."""
        if self.current_number() == generation.number:
            raise StateError(f"generation {generation.number} is current: it is never removed")
        confine.remove_tree(self.generations_dir, generation.path, f"generation {generation.number}")

    def _entries(self) -> list[Path]:
        """Every numbered entry of ``generations/``, whatever it is."""
        if not self.generations_dir.is_dir():
            return []
        return sorted((p for p in self.generations_dir.iterdir() if p.name.isdigit() and len(p.name) <= 9),
                      key=lambda p: int(p.name))

    def _numbered(self) -> list[tuple[int, Path]]:
        """The numbered entries that are real folders (a link is never followed)."""
        return [(int(p.name), p) for p in self._entries() if p.is_dir() and not p.is_symlink()]


def _holder(recorded: bytes) -> str:
    """``apply (pid 123)`` from the lock file's ``123 apply``."""
    pid, _, command = recorded.decode(errors="replace").strip().partition(" ")
    command = command if command.isidentifier() else "command"
    return f"{command} (pid {pid if pid.isdigit() else '?'})"


def _read_meta(path: Path) -> dict[str, Any] | None:
    """A generation's meta.json, validated; None when it has none (incomplete)."""
    meta = read_record(path / "meta.json", META)
    if meta is not None and "number" in meta and str(meta["number"]) != path.name:
        raise DamagedRecord(path / "meta.json", f"says generation {meta['number']}, in the folder of {path.name}")
    return meta


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
    from envmgr.errors import SpecError
    from envmgr.spec import load_spec

    recorded = gen.path / "spec.yaml"
    if recorded.is_symlink() or not recorded.is_file():
        raise DamagedRecord(recorded, "is missing or not a regular file")
    try:
        return load_spec(recorded)
    except SpecError as exc:
        raise DamagedRecord(recorded, f"no longer loads as a spec ({exc.problems[0].message if exc.problems else exc})") from None
