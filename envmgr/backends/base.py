"""The narrow interface every backend offers, and the result of running a command.

Probes, facts and benchmarks only ever call ``run``: they never know whether they
are in a venv, a container or on a remote host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CommandResult:
    """What a command did: its argv, exit code, output and how long it took."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class Runner(Protocol):
    """Anything that can run an argv list on a target (every backend is one)."""

    def run(
        self,
        argv: Sequence[str],
        timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult: ...
