"""Files a user names on the command line (``advise --write CHILD.yaml``, ``report --out DIR``):
besides its store, the only places envmgr writes. envmgr runs as root, so:

- **a regular file or nothing**: a device, FIFO, socket, folder or symbolic link at the path is
  refused (``--write /dev/null`` would otherwise replace the system's /dev/null);
- **never a protected file**: the spec a command read and every file it extends, compared by
  real path and by inode (a hard link to the spec is the spec);
- **no overwrite without ``--force``**: an existing file is named in the error;
- **atomic**: the text goes to a temporary file in the same folder (created with ``O_EXCL``),
  fsynced and renamed over the target; on any failure the temporary file is removed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from envmgr.errors import UsageError


def write_user_file(path: Path, content: str | bytes, *, force: bool = False,
                    protected: Iterable[Path] = (), what: str = "file") -> Path:
    """Write ``content`` to ``path`` by the rules above; the path written."""
    path = Path(os.path.abspath(path))
    check_writable(path, force=force, protected=protected, what=what)
    data = content.encode("utf-8") if isinstance(content, str) else content
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise UsageError(f"cannot write {what} {path}: {exc.strerror or exc}",
                         hint="give a path in an existing folder you can write to") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        check_writable(path, force=force, protected=protected, what=what)  # nothing appeared meanwhile
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def check_writable(path: Path, *, force: bool, protected: Iterable[Path] = (), what: str = "file") -> None:
    """Refuse ``path`` unless it is absent or (with ``force``) a regular file that is not protected."""
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {what} {path}: {parent} is not an existing folder",
                         hint="create the folder first, or give another path")
    for guarded in protected:
        if _same_file(path, Path(guarded)):
            raise UsageError(f"refusing to write {what} {path}: it is {guarded}, a spec this command reads",
                             hint="write to a new file beside it")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(f"refusing to write {what} {path}: it is a symbolic link",
                         hint="give the path of a regular file (links are never written through)")
    if not stat.S_ISREG(st.st_mode):
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file (a device, FIFO or socket)"
        raise UsageError(f"refusing to write {what} {path}: it is {kind}", hint="give the path of a regular file")
    if not force:
        raise UsageError(f"refusing to overwrite {what} {path}: it exists", hint="add --force to replace it")


def output_dir(path: Path) -> Path:
    """A folder for a command's outputs (``report --out``): made when missing; a link or a
    non-folder there is refused."""
    path = Path(os.path.abspath(path))
    if path.is_symlink():
        raise UsageError(f"refusing to write into {path}: it is a symbolic link", hint="give a real folder")
    if path.exists() and not path.is_dir():
        raise UsageError(f"refusing to write into {path}: it is not a folder", hint="give a folder (or a new path)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot make the folder {path}: {exc.strerror or exc}") from None
    return path


def _same_file(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
