"""Plain terminal output: styled on a terminal, bare text everywhere else.

The reports people read most (validate, plan, apply's confirmation, triage, probe,
bench --dry-run) are lines of text with a colour or two. They are written here without
rich, which costs 30-40 ms to import on a cold start and about 2 ms per rendered finding;
tables (``envmgr report``, ``envmgr verify``) still use rich. Colour follows the common
conventions: on a terminal only, never with ``NO_COLOR``, always with ``FORCE_COLOR``.
Piped output is never wrapped, so one item stays on one line for grep.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from typing import TextIO, Union

# SGR codes of the style words envmgr uses ("bold red", "dim", "bold red reverse").
_SGR = {"bold": "1", "dim": "2", "reverse": "7", "red": "31", "green": "32", "yellow": "33",
        "magenta": "35", "cyan": "36"}

Part = Union[str, tuple[str, str]]  # text, or (text, style)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream
        return False


class Printer:
    """Writes lines to one stream; ``(text, style)`` parts are coloured where colour is on."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        tty = _isatty(self.stream)
        self.color = bool(os.environ.get("FORCE_COLOR")) or (
            tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb")
        self.width = shutil.get_terminal_size().columns if tty else None

    def style(self, text: str, style: str = "") -> str:
        if not style or not self.color:
            return text
        codes = ";".join(_SGR[word] for word in style.split())
        return f"\x1b[{codes}m{text}\x1b[0m"

    def line(self, *parts: Part) -> None:
        """One line made of parts: plain strings and ``(text, style)`` pairs."""
        self.stream.write("".join(self.style(*p) if isinstance(p, tuple) else p for p in parts) + "\n")

    def indented(self, text: str, indent: int, style: str = "") -> None:
        """``text`` indented; on a terminal, wrapped to its width under the same indent."""
        pad = " " * indent
        lines = [text]
        if self.width and len(text) + indent > self.width:
            lines = textwrap.wrap(text, max(self.width - indent, 20), break_long_words=False,
                                  break_on_hyphens=False) or [text]
        for line in lines:
            self.stream.write(pad + self.style(line, style) + "\n")


def stdout_printer() -> Printer:
    return Printer(sys.stdout)


def stderr_printer() -> Printer:
    return Printer(sys.stderr)
