"""The lock a user commits beside a spec (``envmgr lock SPEC``): exactly what apply installs, on
any host, until the spec's packages or sources change.

The file is the spec's name with ``.lock`` (``specs/cuda13.yaml`` -> ``specs/cuda13.lock``):
requirements text that pip and uv read as it is (``name==version --hash=sha256:...`` and the
index each package came from, as a comment), whose first line is a comment envmgr reads back:

    # envmgr-lock v1 {"spec": "cuda13.yaml", "inputs": {...}, "inputs_digest": "<sha256>"}

``inputs`` are what the resolver was given: the requirement lines, the Python version and
platform (``x86_64-manylinux_2_28``, what an image or a fleet host runs, and any newer glibc),
the wheel sources and ``no_deps``. The lock is *current* while the spec gives the same inputs.
apply chooses the lock as uv does (``--locked``, ``--frozen``):

- default: a current lock is installed as it is (nothing resolved); a stale one is said, and the
  generation is resolved anew;
- ``locked``: a missing or stale lock stops apply before a generation is started;
- ``frozen``: the lock is installed as it is, without asking whether it is current.

A spec that inherits packages from a base interpreter (``python.inherit``) is locked per
generation: what is left out of its lock depends on that interpreter, read at apply.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion

from envmgr.errors import StateError, UsageError
from envmgr.lock import locked_versions, requirement_lines, resolve, source_args
from envmgr.progress import Progress, prefixed
from envmgr.spec.load import LoadedSpec
from envmgr.spec.models import canonical_name
from envmgr.userfiles import write_user_file

HEADER = "# envmgr-lock v1 "
PLATFORM = "x86_64-manylinux_2_28"
Mode = Literal["default", "locked", "frozen"]


@dataclass(frozen=True)
class Locked:
    """A lock file read back: where it is, its text, and whether the spec still gives its inputs."""

    path: Path
    text: str  # the requirements text (the header line left out)
    inputs_digest: str
    current: bool
    changed: tuple[str, ...] = ()  # the inputs that differ, when it is stale
    unmet: tuple[str, ...] = ()  # the spec's pins its own lines do not meet (edited by hand)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @property
    def packages(self) -> int:
        return len(locked_versions(self.text))

    def status(self) -> str:
        """``specs/cuda13.lock: current (12 packages)`` or ``...: stale (requirements changed)``."""
        if self.current:
            return f"{self.path}: current ({self.packages} packages)"
        why = ([f"{', '.join(self.changed)} changed since it was made"] if self.changed else []) + list(self.unmet)
        return f"{self.path}: stale ({'; '.join(why)})"

    def to_dict(self) -> dict:
        return {"path": str(self.path), "current": self.current, "changed": list(self.changed), "unmet": list(self.unmet),
                "packages": self.packages, "digest": self.digest}


def lock_path(loaded: LoadedSpec) -> Path:
    return loaded.path.with_suffix(".lock")


def inputs(loaded: LoadedSpec) -> dict:
    """What the resolver is given for this spec (the lock is current while these are the same)."""
    spec = loaded.spec
    return {"python": spec.python.version, "platform": PLATFORM, "requirements": requirement_lines(spec),
            "sources": source_args(spec, "uv"), "no_deps": spec.python.no_deps}


def _digest(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _refuse_inherit(loaded: LoadedSpec) -> None:
    if loaded.spec.python.inherit is not None:
        raise UsageError(f"{loaded.path}: python.inherit: this spec's lock depends on the base interpreter's "
                         "packages, read when it is applied; it is locked per generation (generations/N/lock.txt)",
                         hint="apply it without a committed lock, or pin every package instead of inheriting")


def write_lock(loaded: LoadedSpec, progress: Progress) -> Locked:
    """Resolve the spec's packages (uv, hashes) and write the lock beside it."""
    _refuse_inherit(loaded)
    target = lock_path(loaded)
    existing = _read_header(target) if target.is_file() and not target.is_symlink() else None
    if target.exists() and existing is None:  # not a lock envmgr wrote: a user's file, kept
        raise UsageError(f"{target} exists and is not an envmgr lock", hint="move it away: envmgr lock writes its lock there")
    spec = loaded.spec
    given = inputs(loaded)
    with tempfile.TemporaryDirectory(prefix="envmgr-lock-") as scratch:
        text = resolve(spec, Path(scratch), spec.python.version, prefixed(progress, "uv"))
    digest = _digest(given)
    header = {"spec": loaded.path.name, "inputs": given, "inputs_digest": digest}
    write_user_file(target, HEADER + json.dumps(header, sort_keys=True) + "\n" + text, force=True,
                    protected=loaded.chain, what="the lock")
    return Locked(target, text, digest, True)


def read_lock(loaded: LoadedSpec) -> Locked | None:
    """The spec's lock beside it, if there is one (never for a spec that inherits: it is locked
    per generation); raises when it is damaged."""
    where = lock_path(loaded)
    if loaded.spec.python.inherit is not None or not where.exists():
        return None
    if where.is_symlink() or not where.is_file():
        raise StateError(f"{where} is not a regular file", hint="a lock is a file `envmgr lock` wrote")
    raw = where.read_text(encoding="utf-8", errors="replace")
    first, _, text = raw.partition("\n")
    header = _parse_header(first)
    if header is None:
        raise StateError(f"{where}:1: not an envmgr lock (the first line is not `{HEADER.strip()} {{...}}`)",
                         hint=f"write it again: envmgr lock {loaded.path}")
    raw_inputs = header.get("inputs")
    recorded: dict = raw_inputs if isinstance(raw_inputs, dict) else {}
    given = inputs(loaded)
    changed = tuple(k for k in sorted(set(given) | set(recorded)) if given.get(k) != recorded.get(k))
    if _digest(recorded) != header.get("inputs_digest"):
        changed = changed or ("its header",)  # edited by hand: not what the resolver was given
    unmet = _unmet(loaded, text)
    return Locked(where, text, str(header.get("inputs_digest")), not changed and not unmet, changed, unmet)


def _unmet(loaded: LoadedSpec, text: str) -> tuple[str, ...]:
    """The spec's pins the lock's own lines do not meet (its body edited by hand): as uv's
    ``--locked`` asks, the lock must still satisfy the project, whatever its header says."""
    versions = locked_versions(text)
    unmet = []
    for name, specifier in loaded.spec.python.installed_packages.items():
        version = versions.get(canonical_name(name))
        try:
            ok = version is not None and SpecifierSet(specifier).contains(version, prereleases=True)
        except (InvalidSpecifier, InvalidVersion):
            ok = False
        if not ok:
            unmet.append(f"{name}{specifier} not met by the lock ({version or 'not in it'})")
    return tuple(unmet)


def _read_header(path: Path) -> dict | None:
    with path.open(encoding="utf-8", errors="replace") as f:
        return _parse_header(f.readline().rstrip("\n"))


def _parse_header(line: str) -> dict | None:
    if not line.startswith(HEADER):
        return None
    try:
        header = json.loads(line[len(HEADER):])
    except json.JSONDecodeError:
        return None
    return header if isinstance(header, dict) else None


def choose_lock(loaded: LoadedSpec, mode: Mode, progress: Progress) -> Locked | None:
    """The lock apply installs for ``loaded``, chosen by ``mode`` (None: apply resolves)."""
    if mode != "default":
        _refuse_inherit(loaded)
    found = read_lock(loaded)
    if found is None:
        if mode != "default":
            raise StateError(f"--{mode}: {lock_path(loaded)} does not exist",
                             hint=f"make it: envmgr lock {loaded.path}")
        return None
    if not found.current and mode == "locked":
        raise StateError(f"--locked: {found.status()}", hint=f"update it: envmgr lock {loaded.path}")
    if not found.current and mode == "default":
        progress(f"{found.status()}: not used, this generation is resolved anew (envmgr lock {loaded.path} updates it)")
        return None
    progress(f"lock: {found.path}{'' if found.current else ' (--frozen: not checked)'}, {found.packages} packages")
    return found
