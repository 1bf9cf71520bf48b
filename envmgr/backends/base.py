"""The narrow interface every backend offers, and the result of running a command.

Probes, facts and benchmarks only ever call ``run``: they never know whether they
are in a venv, a container or on a remote host.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from envmgr.facts.model import Facts
    from envmgr.plan import Action
    from envmgr.spec.load import LoadedSpec


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


def checked_argv(argv: Sequence[str]) -> list[str]:
    """An argv list of strings; a bare string would be taken as one program name, so refuse it."""
    if isinstance(argv, str | bytes) or not argv:
        raise TypeError(f"argv must be a non-empty list of strings, got {argv!r}")
    args = list(argv)
    if not all(isinstance(arg, str) for arg in args):
        raise TypeError(f"argv items must be strings, got {args!r}")
    return args


class Closing:
    """``with backend:`` closes it on the way out."""

    def close(self) -> None:  # pragma: no cover - backends override
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Progress(Protocol):
    """Receives one line of human-readable progress at a time (build output, steps)."""

    def __call__(self, line: str) -> None: ...


@dataclass(frozen=True)
class Realized:
    """What ``realize`` built: where it lives and its lock (exact versions and hashes)."""

    backend: str  # the backend URL, e.g. venv:///…/generations/3/venv or docker://envmgr/cuda13
    location: str  # venv path, image id, ...
    lock: str  # requirements-format lock: name==version --hash=sha256:...
    details: dict = field(default_factory=dict)  # backend-specific (image tag, python, ...)


class Backend(Runner, Protocol):
    """Where an environment lives. Chosen by URL (see ``envmgr.backends.open_backend``).

    ``realize`` builds inside ``workdir`` (the new generation's directory) and never
    touches what the current generation uses; library errors leave it as
    ``BackendError`` subclasses.
    """

    url: str

    def facts(self) -> Facts: ...

    def realize(
        self,
        loaded: LoadedSpec,
        actions: Sequence[Action],
        progress: Progress,
        workdir: Path,
    ) -> Realized: ...

    def close(self) -> None: ...
