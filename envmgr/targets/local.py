"""``local://``: run commands on this machine with subprocess.

Each command gets its own session (process group), so that a timeout or Ctrl-C
kills everything it started, grandchildren included, not only the direct child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence

from envmgr.errors import CommandTimeout
from envmgr.targets import inflight
from envmgr.targets.base import CommandResult, Target, checked_argv
from envmgr.targets.process import start_in_group
from envmgr.targets.service import LocalService

# After the group is killed, how long to wait for the pipes to close. A process that
# left the group (setsid) may still hold them; we do not wait for it forever.
_DRAIN_AFTER_KILL_S = 5.0


class LocalTarget(Target):
    """Runs argv lists on the local host. Stateless; ``close()`` is there for the protocol."""

    scheme = "local"
    url = "local://"
    can_start = True
    runs_here = True

    @classmethod
    def from_url(cls, url: str) -> LocalTarget:
        return cls()

    def run(
        self,
        argv: Sequence[str],
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        args = checked_argv(argv)
        started = time.monotonic()
        process = start_in_group(args, stderr=subprocess.PIPE, env=env)

        try:
            with inflight.running(lambda: _signal_group(process)):
                stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            _kill_group(process)
            raise CommandTimeout(
                f"{' '.join(args)} ran past {timeout:g}s; its process group was killed",
                hint="raise the timeout, or look at why the command hangs",
            ) from exc
        except BaseException:  # Ctrl-C while waiting: leave nothing running behind us
            _kill_group(process)
            raise
        return CommandResult(
            argv=tuple(args),
            returncode=process.returncode,
            stdout=stdout,
            stderr=stderr,
            duration_s=time.monotonic() - started,
        )

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> LocalService:
        """A long-running command (a server) in its own process group."""
        return LocalService(argv, env)



def _signal_group(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)  # pgid == pid: start_new_session=True
    except ProcessLookupError:
        pass  # the whole group already exited


def _kill_group(process: subprocess.Popen[str]) -> None:
    _signal_group(process)
    try:
        process.communicate(timeout=_DRAIN_AFTER_KILL_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
