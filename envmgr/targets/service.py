"""Long-running commands on a target (a server): ``target.start(argv, env)``.

``run`` is for commands that finish; a benchmark server does not, so targets that can host
one (``can_start``) also offer ``start``, which returns a ``Service``: its output line by line, whether it
has exited, and ``stop``, which takes the whole process tree down (an SGLang server is a
launcher plus one scheduler process per GPU; any survivor keeps its GPU memory).

``LocalService`` runs the command in its own session, so its process group is exactly the
server's tree: TERM the group, wait, KILL the group, then check that no process is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from envmgr.targets.base import checked_argv
from envmgr.targets.process import start_in_group


class LocalService:
    """A command on this host in its own process group."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> None:
        args = checked_argv(argv)
        self._proc = start_in_group(args, stderr=subprocess.STDOUT, env=env, line_buffered=True)
        self.pgid = self._proc.pid  # start_new_session: the group id is the leader's pid
        self.description = f"{args[0]} (pid {self.pgid})"

    def lines(self) -> Iterator[str]:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            yield line.rstrip("\n")

    def poll(self) -> int | None:
        return self._proc.poll()

    def stop(self, grace_s: float = 10.0) -> int | None:
        self._signal_group(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while group_members(self.pgid) and time.monotonic() < deadline:
            self._proc.poll()  # reap the leader so it does not count as alive
            time.sleep(0.05)
        if group_members(self.pgid):
            self._signal_group(signal.SIGKILL)
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        deadline = time.monotonic() + 5
        while group_members(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.05)  # killed children are reaped by init a moment later
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        return self._proc.returncode

    def leftovers(self) -> list[str]:
        return [str(pid) for pid in group_members(self.pgid)]

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # Fields after the command name (which may hold spaces and parentheses).
        fields = stat[stat.rfind(")") + 2:].split()
        state, group = fields[0], int(fields[2])
        if group == pgid and state != "Z":
            members.append(int(entry.name))
    return members
