"""Values read from a server log: numbers become numbers, and how a value reads in a message."""

from __future__ import annotations

import re
from collections.abc import Iterable

Value = int | float | str


def to_value(raw: str, name: str = "", keep_text: Iterable[str] = ()) -> Value:
    """Numbers from the log become numbers; versions ("550.140"), compute capabilities ("7.0",
    which as a number would read "7") and ``keep_text`` stay text."""
    raw = raw.strip()
    if name.endswith(("_version", "_capability")) or name in keep_text:
        return raw
    if re.fullmatch(r"-?\d+", raw):
        return int(raw)
    if re.fullmatch(r"-?\d*\.\d+|-?\d+\.\d*", raw):
        return float(raw)
    return raw


def display(value: Value) -> str:
    """How a value reads in a message: 0.778734296875 -> 0.7787, 16.30 -> 16.3."""
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if value == value else "nan"
    return str(value)


def number(value: Value | None) -> float | None:
    """A value as a float when it is a number, else None."""
    return float(value) if isinstance(value, (int, float)) else None
