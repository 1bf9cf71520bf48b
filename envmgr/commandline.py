"""The command line as envmgr takes it: argparse, except that a rejected command line is an
exception the CLI reports (``BadArguments``, exit ``USAGE``) with a did-you-mean among the command's
own options; -q/-v before or after the command; and a reader of stdout that has gone away ends
envmgr quietly, as a Unix tool killed by SIGPIPE."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, NoReturn

USAGE = 64  # EX_USAGE of sysexits.h: never 2, which plan says "changes" with and status "drift"


class BadArguments(Exception):
    """argparse rejected the command line (it has printed the usage and the message)."""

    def __init__(self, message: str, command: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.command = command


class Parser(argparse.ArgumentParser):
    """argparse, except that a rejected command line is an exception main() reports (plain
    text, and a JSON object under --json), not an exit from inside the parser."""

    commands: dict[str, Parser]  # the top-level parser's: each command's own

    def parse_args(self, args=None, namespace=None):
        """As argparse, but a word a command does not take is that command's error (its usage,
        a did-you-mean among its options), and -q with -v is refused wherever each was given."""
        parsed, extras = self.parse_known_args(args, namespace)
        command = getattr(self, "commands", {}).get(getattr(parsed, "command", None) or "")
        if extras:
            (command or self).error(f"unrecognized arguments: {' '.join(extras)}")
        if getattr(parsed, "quiet", False) and getattr(parsed, "verbose", False):
            (command or self).error("argument -v/--verbose: not allowed with argument -q/--quiet")
        return parsed

    def error(self, message: str) -> NoReturn:
        message += self._did_you_mean(message)
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        command = self.prog.split(" ", 1)[1] if " " in self.prog else None
        raise BadArguments(message, command)

    def _did_you_mean(self, message: str) -> str:
        """``unrecognized arguments: --form x`` -> ``; did you mean --from?`` (an option of this command)."""
        import difflib

        if not message.startswith("unrecognized arguments:"):
            return ""
        options = [s for action in self._actions for s in action.option_strings if s.startswith("--")]
        guesses = []
        for word in message.split(":", 1)[1].split():
            if word.startswith("--"):
                close = difflib.get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.6)
                guesses += [f"{close[0]} for {word}"] if close else []
        return f"; did you mean {', '.join(guesses)}?" if guesses else ""


def loudness(parser: argparse.ArgumentParser, default: Any) -> None:
    loudness = parser.add_mutually_exclusive_group()
    loudness.add_argument("-q", "--quiet", action="store_true", default=default,
                          help="No progress on stderr (results and errors still)")
    loudness.add_argument("-v", "--verbose", action="store_true", default=default,
                          help="Every progress line, tools' output included (default on a terminal: one live line)")


def stdout_closed() -> bool:
    """Whether what reads envmgr's stdout has gone (``envmgr validate ... | head -1``): a pipe
    with no reader polls as an error."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no real stdout (a test's capture): not that
        return False


def reader_gone() -> int:
    """Stop quietly, as a Unix tool killed by SIGPIPE does (exit 128 + 13): what is left of the
    output goes nowhere, so the interpreter's last flush does not complain either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + signal.SIGPIPE


@dataclass(frozen=True)
class Opt:
    """One ``add_argument`` call, kept as data so commands can share options."""

    names: tuple[str, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


def opt(*names: str, **kwargs: Any) -> Opt:
    return Opt(names, kwargs)


def positive(text: str) -> float:
    """An argparse type: a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: stopped the way Ctrl-C stops a command (servers and probes stopped,
    nothing half-recorded), because every cleanup path already handles KeyboardInterrupt."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def stop_on_signals():
    """SIGTERM and SIGHUP raise ``Terminated`` while a command runs (then the old handlers)."""
    if threading.current_thread() is not threading.main_thread():  # only it may set handlers
        yield
        return
    old = {signum: signal.signal(signum, terminate) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
