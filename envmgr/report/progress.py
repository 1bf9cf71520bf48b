"""Progress as people see it on stderr: milestones kept, a tool's detail lines rewritten in
place on a terminal (with the milestone's elapsed time), milestones only elsewhere."""

from __future__ import annotations

import sys
import threading
import time

from envmgr.report.printer import Printer, visible


class TerminalProgress:
    """Progress for people, on stderr. Lines that start with a space are details (a tool's own
    output: uv, docker build steps, a host's task result, a server's log); the others are
    milestones (a builder's ``[n/N]`` step, a probe, a cell, a verdict).

    On a terminal each milestone stays, and the latest detail is one line rewritten in place
    under it with the milestone's elapsed time; elsewhere (CI, a pipe) only milestones are
    written, unless ``verbose``. ``quiet`` writes nothing: results and errors still do.
    Colour follows ``envmgr.report.printer`` (never with NO_COLOR). A line's own control
    characters (a server log's colours, ``\\r``) are shown escaped: only envmgr moves the cursor."""

    def __init__(self, stream=None, *, verbose: bool = False, quiet: bool = False,
                 tty: bool | None = None, clock=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.printer = Printer(self.stream)
        self.tty = (self.printer.width is not None) if tty is None else tty
        self.verbose, self.quiet = verbose, quiet
        self.clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._since = self.clock()
        self._status = False  # a detail line is on screen, to be rewritten

    def __call__(self, line: str) -> None:
        if self.quiet:
            return
        line = visible(line)
        detail = line[:1].isspace()
        with self._lock:
            if self.tty and detail and not self.verbose:
                width = max(20, (self.printer.width or 80) - 12)
                text = " ".join(line.split())
                shown = text if len(text) <= width else text[: width - 1] + "\u2026"
                self._write(f"\r\x1b[K  {self.clock() - self._since:6.1f}s {shown}", newline=False)
                self._status = True
                return
            if detail and not self.verbose:
                return  # not a terminal: milestones only, the log keeps the rest
            if not detail:
                self._since = self.clock()
            self._clear()
            self._write(self.printer.style(line, "bold") if not detail and self.tty else line)

    def close(self) -> None:
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        if self._status:
            self._write("\r\x1b[K", newline=False)
            self._status = False

    def _write(self, text: str, newline: bool = True) -> None:
        self.stream.write(text + ("\n" if newline else ""))
        self.stream.flush()
