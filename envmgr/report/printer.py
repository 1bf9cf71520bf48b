"""Plain terminal output: styled on a terminal, bare text everywhere else.

The reports people read most (validate, plan, apply's confirmation, triage, probe,
bench --dry-run) are lines of text with a colour or two. They are written here without
rich, which costs 30-40 ms to import on a cold start and about 2 ms per rendered finding;
tables (``envmgr report``, ``envmgr verify``) still use rich. Colour follows the common
conventions: on a terminal only, never with ``NO_COLOR``, always with ``FORCE_COLOR``.
Piped output is never wrapped, so one item stays on one line for grep.

Text reaches the terminal through ``visible``: a server log line, a URL or a recorded result
cannot move the cursor, rewrite the line, open a hyperlink or reverse what follows.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
from typing import TextIO, Union

# SGR codes of the style words envmgr uses ("bold red", "dim", "bold red reverse").
_SGR = {"bold": "1", "dim": "2", "reverse": "7", "red": "31", "green": "32", "yellow": "33",
        "magenta": "35", "cyan": "36"}

Part = Union[str, tuple[str, str]]  # text, or (text, style)

# C0 controls but tab and newline (layout, not commands), DEL, C1 controls (0x9b is CSI on
# some terminals), and the Unicode controls that reorder or break what follows.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` as a terminal may show it: each control character written as its escape
    (ESC as ``\\x1b``, U+202E as ``\\u202e``), so it is seen and never obeyed."""
    return _UNSAFE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


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
        """``text`` made visible (its own controls escaped), then coloured: only envmgr's codes remain."""
        text = visible(text)
        if not style or not self.color:
            return text
        codes = ";".join(_SGR[word] for word in style.split())
        return f"\x1b[{codes}m{text}\x1b[0m"

    def line(self, *parts: Part) -> None:
        """One line made of parts: plain strings and ``(text, style)`` pairs."""
        self.stream.write("".join(self.style(*p) if isinstance(p, tuple) else self.style(p) for p in parts) + "\n")

    def indented(self, text: str, indent: int, style: str = "") -> None:
        """``text`` indented; on a terminal, wrapped to its width under the same indent."""
        pad = " " * indent
        text = visible(text)  # before wrapping: an escape's length is what is shown
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
