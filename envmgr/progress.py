"""Progress: long work reports one human-readable line at a time (build output, steps)."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Receives one line of progress at a time."""

    def __call__(self, line: str) -> None: ...


def prefixed(progress: Progress, tag: str) -> Progress:
    """A tool's output lines indented under ``[tag]``; blank lines dropped."""
    def emit(line: str) -> None:
        if line.strip():
            progress(f"  [{tag}] {line}")

    return emit

