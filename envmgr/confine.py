"""The one rule for everything envmgr deletes in its store (``gc``, apply's sweep of interrupted
generations, an orphaned venv): confinement.

envmgr runs as root on production hosts, so a path it removes is decided by the store's layout,
never on the word of a recorded file:

1. **Inside the store, for real.** The store's root is resolved once (``realpath``); a path to
   remove must lie under that root, and no component between the root and it may be a symbolic
   link (checked with ``lstat``, component by component): a generation folder swapped for a link
   to ``/elsewhere`` is refused, not followed.
2. **Owned by layout, checked against the record.** What generation N owns is its folder
   ``generations/N`` (found by listing the store) and, for a venv kept outside it
   (``realize.venv.path``), exactly ``ROOT/generation-N``: a real directory (not a link) that
   carries the owner mark envmgr wrote into it when it made it (this store's root, this
   number) and that ``meta.json`` names. A ``location`` of ``/tmp/victim`` is refused with an
   error naming it.
3. **Nothing kept inside what goes.** A folder is not removed while a kept generation's
   environment lies inside it.

Removal renames the tree into a ``.trash-*`` entry of its own parent first (out of sight at
once, same filesystem), then deletes it; ``shutil.rmtree`` never follows links inside it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from envmgr.errors import StateError

OWNER_FILE = ".envmgr-owner"
OWNER_MAX_BYTES = 4096


class Refused(StateError):
    """A removal the confinement rule does not allow; the message names the path and why."""


def store_id(store_root: Path) -> str:
    """A short, stable name of a store (its real path, hashed), for what it leaves in shared
    places: the build stages its image builds leave in the Docker engine carry it as a label,
    so that ``gc`` of one store never removes another's."""
    return hashlib.sha256(str(real(store_root)).encode()).hexdigest()[:16]


def real(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def inside(root: Path, path: Path | str, what: str) -> Path:
    """``path`` as it lies under ``root``'s real path, with no symbolic link on the way; else
    ``Refused``. ``path`` may be written under the root as given or under its real path."""
    root_real = real(root)
    candidate = Path(os.path.abspath(path))
    for base in (root_real, Path(os.path.abspath(root))):
        try:
            parts = candidate.relative_to(base).parts
            break
        except ValueError:
            continue
    else:
        raise Refused(f"refusing to remove {what} {candidate}: it is outside {root_real}",
                      hint="envmgr only removes what lies in its own store; remove it yourself if it is garbage")
    if not parts or ".." in parts:
        raise Refused(f"refusing to remove {what} {candidate}: not a path below {root_real}")
    current = root_real
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise Refused(f"refusing to remove {what} {candidate}: {current} is a symbolic link",
                          hint="a link in the store is never followed; remove the link yourself")
    return current


def remove_tree(root: Path, path: Path | str, what: str) -> None:
    """Remove the directory ``path`` under ``root`` by the rule above."""
    target = inside(root, path, what)
    if not target.is_dir():
        raise Refused(f"refusing to remove {what} {target}: not a directory")
    trash = target.parent / f".trash-{target.name}-{os.getpid()}-{time.monotonic_ns()}"
    os.rename(target, trash)  # out of the numbering (and of sight) at once, even if removal is slow
    shutil.rmtree(trash, ignore_errors=True)


def empty_trash(directory: Path) -> None:
    """Finish removals a killed process left as ``.trash-*``: directories are deleted, links
    only unlinked (never what they point to)."""
    if not directory.is_dir():
        return
    for stale in directory.glob(".trash-*"):
        if stale.is_symlink() or not stale.is_dir():
            stale.unlink(missing_ok=True)
        else:
            shutil.rmtree(stale, ignore_errors=True)


def mark_owner(directory: Path, store_root: Path, number: int) -> None:
    """Write the owner mark into a directory envmgr made for generation ``number`` outside the
    generation's folder (a venv under ``realize.venv.path``)."""
    mark = directory / OWNER_FILE
    fd = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"store": str(real(store_root)), "generation": number}, handle)


def owner(directory: Path) -> tuple[str, int] | None:
    """``(store root, generation)`` of a directory's owner mark, or None (absent or unreadable)."""
    try:
        fd = os.open(directory / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = json.loads(handle.read(OWNER_MAX_BYTES).decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    if isinstance(data, dict) and isinstance(data.get("store"), str) and type(data.get("generation")) is int:
        return data["store"], data["generation"]
    return None


def ownership_problem(store_root: Path, number: int, location: str | None) -> str | None:
    """Why ``location`` is not the venv generation ``number`` keeps outside its folder, or None
    when it provably is: named ``generation-N``, a real directory, marked with this store and
    this number."""
    if not location:
        return "no location is recorded"
    path = Path(os.path.abspath(location))
    if path.name != f"generation-{number}":
        return f"it is not named generation-{number}"
    if path.is_symlink():
        return "it is a symbolic link"
    if not path.is_dir():
        return "it is not a directory"
    if owner(path) != (str(real(store_root)), number):
        return f"it does not carry this store's owner mark for generation {number} ({OWNER_FILE})"
    return None


def owned_outside(store_root: Path, number: int, location: str | None) -> Path | None:
    """``location`` as a path when it is generation ``number``'s own venv (``ownership_problem``)."""
    if ownership_problem(store_root, number, location) is not None:
        return None
    return Path(os.path.abspath(str(location)))


def within(path: Path | str, folder: Path | str) -> bool:
    """``path`` is ``folder`` or lies below it, both by their real paths."""
    path, folder = real(path), real(folder)
    return path == folder or folder in path.parents
