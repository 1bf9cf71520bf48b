"""envmgr's own data files (rules, the SGLang flag table, triage signatures), parsed once.

Parsing and validating them costs 3-30 ms each, on every run of a command that is otherwise
done in a few tens of milliseconds. ``load_shipped`` keeps the validated objects in a cache
named by a hash of everything that decides them: the file's bytes, the source of the module
that parses it, the Python and pydantic versions. An edited file, an upgrade or a code change
is a miss, never a stale hit; a missing, corrupt or foreign cache entry is parsed again.

Where: ``$ENVMGR_CACHE_DIR``, else ``$XDG_CACHE_HOME/envmgr``, else ``~/.cache/envmgr``;
``ENVMGR_NO_CACHE=1`` parses every time. Entries are pickles, so one is loaded only from a
directory and file that this user owns and nobody else can write.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
from importlib import resources
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml

from envmgr.errors import KnowledgeBaseError

T = TypeVar("T")

# The C loader (libyaml) is 5-15x faster; the pure-Python one where PyYAML was built without it.
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str) -> Any:
    """Plain data of a YAML document (safe: no tags that build objects)."""
    return yaml.load(text, Loader=YAML_LOADER)


def cache_dir() -> Path | None:
    if os.environ.get("ENVMGR_NO_CACHE") == "1":
        return None
    if os.environ.get("ENVMGR_CACHE_DIR"):
        return Path(os.environ["ENVMGR_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envmgr"


def load_shipped(package: str, name: str, parse: Callable[[str], T]) -> T:
    """``parse(text)`` of the data file ``name`` shipped in ``package``, through the cache."""
    try:
        data = resources.files(package).joinpath(name).read_bytes()
    except OSError as exc:
        raise KnowledgeBaseError(f"{name}: {exc}", hint="reinstall envmgr") from exc
    entry = _entry(name, data, parse)
    cached = _read(entry)
    if cached is not None:
        return cached
    value = parse(data.decode("utf-8"))
    _write(entry, name, value)
    return value


def _entry(name: str, data: bytes, parse: Callable) -> Path | None:
    where = cache_dir()
    if where is None:
        return None
    from pydantic import VERSION

    digest = hashlib.sha256(data)
    module = sys.modules.get(parse.__module__)
    source = getattr(module, "__file__", None)
    if source:
        try:
            digest.update(Path(source).read_bytes())
        except OSError:
            return None  # cannot tell whether the code changed: do not cache
    digest.update(f"{sys.version}|{VERSION}|{parse.__qualname__}".encode())
    return where / f"{Path(name).stem}-{digest.hexdigest()[:32]}.pickle"


def _read(entry: Path | None):
    if entry is None:
        return None
    try:
        with open(entry, "rb") as f:
            stat = os.fstat(f.fileno())
            if stat.st_uid != os.getuid() or stat.st_mode & 0o022 or not _private(entry.parent):
                return None
            return pickle.load(f)
    # missing, unreadable, truncated or from another build: parse instead
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, IndexError, TypeError,
            ValueError):
        return None


def _private(directory: Path) -> bool:
    stat = directory.stat()
    return stat.st_uid == os.getuid() and not stat.st_mode & 0o022


def _write(entry: Path | None, name: str, value: object) -> None:
    if entry is None:
        return
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    try:
        payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, entry)  # readers see the whole entry or none
        for old in entry.parent.glob(f"{Path(name).stem}-*.pickle"):
            if old != entry:
                old.unlink(missing_ok=True)
    except (OSError, pickle.PicklingError, TypeError):  # a read-only home, a full disk: only an optimisation
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
