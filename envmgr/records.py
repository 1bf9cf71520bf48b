"""Reading what envmgr recorded (``meta.json``, ``gate.json``, ``plan.json``, an environment's
``envmgr-env.json``): one validated reader, because a recorded file is input, not an instruction.

A file may be truncated by a crash, tampered with by whoever can write it, or replaced by a
FIFO, a device or a symlink out of the store. Each read is bounded (size, nesting depth), only
a regular file is opened, and the decoded value must have the shape its kind declares; anything
else is a ``DamagedRecord`` that names the file and says what to do, never a traceback.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from envmgr.errors import StateError

MAX_BYTES = 4 << 20  # a meta.json is a few kB; a plan of 600 actions well under a MiB
MAX_DEPTH = 32


class DamagedRecord(StateError):
    """A recorded file that cannot be trusted: missing parts, wrong types, not a file."""

    def __init__(self, path: Path | str, why: str, hint: str | None = None) -> None:
        self.path = str(path)
        self.why = why
        super().__init__(f"{path} is damaged: {why}",
                         hint=hint or "`envmgr status` and `envmgr generations` show what is affected; "
                                      "roll back to a good generation (`envmgr rollback --to N`) or apply again")


# A field's check: True when the value is acceptable.
Check = Callable[[Any], bool]


def is_str(v: Any) -> bool:
    return isinstance(v, str)


def is_opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and v == v and abs(v) != float("inf")


def is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def is_dict(v: Any) -> bool:
    return isinstance(v, dict)


def is_list(v: Any) -> bool:
    return isinstance(v, list)


def is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


# What each kind of record must look like: field -> (check, what it should be). Fields not
# named here are kept as they are (older and newer envmgr versions add some).
META: dict[str, tuple[Check, str]] = {
    "number": (is_int, "an integer"),
    "spec_name": (is_str, "a string"),
    "spec_digest": (is_str, "a string"),
    "spec_file": (is_str, "a string"),
    "backend": (is_str, "a URL string"),
    "backend_kind": (is_str, "a string"),
    "location": (is_opt_str, "a string"),
    "details": (is_dict, "an object"),
    "envmgr_version": (is_str, "a string"),
    "actions": (is_int, "an integer"),
    "completed": (is_number, "a number"),
    "gate_recorded": (is_bool, "true or false"),
}
GATE: dict[str, tuple[Check, str]] = {
    "required": (is_str_list, "a list of probe names"),
    "failed": (is_str_list, "a list of probe names"),
    "at": (is_number, "a number"),
}
PLAN: dict[str, tuple[Check, str]] = {
    "actions": (is_list, "a list"),
    "steps": (is_list, "a list"),
}


def read_bytes(path: Path, limit: int = MAX_BYTES) -> bytes | None:
    """A regular file's bytes (``None`` when there is none); never a FIFO, a device or a
    symlink (``O_NOFOLLOW``), never more than ``limit``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP: a symlink; EACCES ...
        raise DamagedRecord(path, f"cannot be opened as a file ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DamagedRecord(path, "is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise DamagedRecord(path, f"is larger than {limit} bytes")
    return data


def read_json(path: Path, limit: int = MAX_BYTES) -> Any:
    """The JSON value of a regular file, or ``None`` when the file does not exist."""
    data = read_bytes(path, limit)
    if data is None:
        return None
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise DamagedRecord(path, "is not UTF-8 text") from None
    except RecursionError:
        raise DamagedRecord(path, "is nested too deeply") from None
    except ValueError as exc:
        raise DamagedRecord(path, f"is not valid JSON ({exc})") from None
    if _depth(value) > MAX_DEPTH:
        raise DamagedRecord(path, f"is nested deeper than {MAX_DEPTH} levels")
    return value


def read_record(path: Path, shape: Mapping[str, tuple[Check, str]]) -> dict[str, Any] | None:
    """A JSON object whose named fields have their declared types; ``None`` when absent."""
    value = read_json(path)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DamagedRecord(path, f"holds {type(value).__name__}, not an object")
    for key, (check, what) in shape.items():
        if key in value and not check(value[key]):
            raise DamagedRecord(path, f"field {key!r} is {_show(value[key])}, expected {what}")
    return value


def read_env_file(path: Path) -> dict[str, Any] | None:
    """An environment's recorded variables (``envmgr-env.json``): names to strings;
    ``PATH_PREPEND`` (directories) and keys no variable can have (``__envmgr.secret_names``,
    envmgr's own) to lists of strings."""
    value = read_json(path)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DamagedRecord(path, f"holds {type(value).__name__}, not an object")
    for key, item in value.items():
        if key == "PATH_PREPEND" or key.startswith("__envmgr."):
            if not is_str_list(item):
                raise DamagedRecord(path, f"{key!r} is {_show(item)}, expected a list of strings")
        elif not isinstance(item, str):
            raise DamagedRecord(path, f"variable {key!r} is {_show(item)}, expected a string")
        if "\0" in key or any("\0" in x for x in ([item] if isinstance(item, str) else item)):
            raise DamagedRecord(path, f"{key!r} holds a NUL character")
    return value


def _depth(value: Any) -> int:
    depth, level = 0, [value]
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return depth
        level = [v for x in level if isinstance(x, dict | list) for v in (x.values() if isinstance(x, dict) else x)]
    return depth


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return f"{type(value).__name__} {text[:40]}{'...' if len(text) > 40 else ''}"
