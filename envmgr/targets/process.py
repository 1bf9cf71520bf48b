"""Run a long command with its output streamed line by line (builds, installs).

Like ``LocalTarget.run`` it gives the command its own process group and kills the
whole group on timeout or interrupt; unlike it, each output line reaches ``on_line``
as it is printed (for progress) and the combined output is kept for the result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from envmgr.errors import BackendError, CommandNotFound, CommandTimeout
from envmgr.targets.base import CommandResult


def start_in_group(args: list[str], *, stderr: int, env: Mapping[str, str] | None = None,
                   cwd: Path | None = None, line_buffered: bool = False) -> subprocess.Popen:
    """Popen ``args`` in a new session (its own process group, so the whole tree can be killed),
    stdin closed, stdout piped as text; a missing or unrunnable program is an envmgr error."""
    try:
        return subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
            text=True, encoding="utf-8", errors="replace", cwd=cwd, bufsize=1 if line_buffered else -1,
            env={**os.environ, **env} if env is not None else None, start_new_session=True,
        )
    except FileNotFoundError as exc:
        raise CommandNotFound(f"{args[0]}: command not found",
                              hint=f"install {os.path.basename(args[0])} or put it on PATH") from exc
    except OSError as exc:  # permission denied, exec format error, ...
        raise BackendError(f"cannot run {args[0]}: {exc.strerror or exc}") from exc


def stream(
    argv: Sequence[str],
    on_line: Callable[[str], None],
    *,
    timeout: float = 3600.0,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> CommandResult:
    args = [str(a) for a in argv]
    started = time.monotonic()
    proc = start_in_group(args, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    lines: list[str] = []
    timer = threading.Timer(timeout, _kill_group, (proc,))
    timer.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            on_line(line)
        proc.wait()
    except BaseException:  # interrupted: leave nothing running behind us
        _kill_group(proc)
        raise
    finally:
        timer.cancel()
    elapsed = time.monotonic() - started
    if elapsed >= timeout and proc.returncode < 0:
        raise CommandTimeout(f"{' '.join(args)} ran past {timeout:g}s; its process group was killed")
    return CommandResult(tuple(args), proc.returncode, "\n".join(lines), "", elapsed)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
