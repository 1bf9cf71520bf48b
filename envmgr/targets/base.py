"""What every target offers: ``run(argv, timeout, env) -> CommandResult``, its URL, its
interpreter, and its capabilities as class flags (declared, never probed with ``hasattr``).

Probes, facts, verify and benchmarks only ever call ``run`` (and ``start`` where
``can_start``): they never know whether they are in a venv, a container or on a host.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar, Protocol

from envmgr.errors import UsageError


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
    """Anything that can run an argv list (every target is one; so are test doubles)."""

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


class Service(Protocol):
    """A started command: read its output, watch it, stop it and all it started."""

    description: str

    def lines(self) -> Iterator[str]:
        """Output lines (stdout and stderr together) until the command's output ends."""
        ...

    def poll(self) -> int | None:
        """The exit code once it has exited, else None."""
        ...

    def stop(self, grace_s: float = 10.0) -> int | None:
        """TERM, then KILL after ``grace_s``: afterwards nothing it started is running."""
        ...

    def leftovers(self) -> list[str]:
        """What is still running after ``stop`` (pids, a container): empty when clean."""
        ...


class Closing:
    """``with x:`` closes it on the way out (targets and builders hold clients)."""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Target.leaves: what of a built environment outlives its generation's folder, for gc
LEAVES_FOLDER = "folder"  # a folder made elsewhere (a venv at realize.venv.path)
LEAVES_IMAGE = "image"  # an image in the Docker engine


@dataclass(frozen=True)
class Recorded:
    """What a build recorded for its commands (a venv's ``envmgr-env.json``)."""

    variables: dict[str, str]
    path_prepend: tuple[str, ...] = ()
    secrets: frozenset[str] | None = None  # None: a file that records no secret names (older, or not envmgr's)


class Target(Closing):
    """Where commands run. Subclasses set the flags and implement ``run`` (and ``start``)."""

    scheme: ClassVar[str] = ""  # its URLs' scheme, for messages
    can_start: ClassVar[bool] = False  # long-running services (a server) via start()
    runs_here: ClassVar[bool] = False  # its processes are this machine's (process groups, ports)

    leaves: ClassVar[str] = ""  # LEAVES_FOLDER, LEAVES_IMAGE, or "" (nothing, or the hosts' own)

    @contextmanager
    def testinfra_url(self) -> Iterator[str]:
        """A testinfra host URL that reaches this environment while the context lasts, for
        ``envmgr verify`` of a generation (a venv: ``local://`` with its env; an image: a
        throwaway container of it). Refused where verify needs ``--hosts``."""
        raise UsageError(f"{self.scheme}:// environments are verified with --hosts",
                         hint="envmgr verify SPEC --hosts ansible://GROUP?inventory=FILE (or ssh://HOST)")
        yield ""  # pragma: no cover - a generator, for the contextmanager

    @classmethod
    def from_url(cls, url: str) -> Target:
        return cls(url)  # type: ignore[call-arg]  # subclasses take their URL (or say otherwise)

    @classmethod
    def at(cls, location: str) -> Target:
        """The environment a generation recorded at ``location`` (a venv's path)."""
        from envmgr.targets.urls import make_url

        return cls.from_url(make_url(cls.scheme, location))

    @classmethod
    def check_url(cls, url: str) -> None:
        """A clear error for a URL this target cannot run in (before anything runs)."""

    @classmethod
    def same_place(cls, built: str, location: str, named: str) -> bool:
        """Whether the URL path ``named`` is the environment a generation built (URL path
        ``built``, recorded ``location``)."""
        return built == named

    @classmethod
    def gone(cls, location: str) -> str | None:
        """What is gone of a generation's built environment (a deleted venv, a removed image), or
        None when it is there or cannot be told from here."""
        return None

    @property
    def url(self) -> str:  # a subclass gives a class attribute or a property
        return ""

    def absent(self, from_generation: bool) -> tuple[str, str] | None:
        """(what it lacks to run a command as the spec means it, how to name one that has it), or
        None: a command must never run in the host's Python instead, nor without the spec's env.
        ``from_generation``: a generation built it (its recorded env must be there too)."""
        return None

    def recorded(self) -> Recorded | None:
        """The environment a build recorded for its commands (a venv's ``envmgr-env.json``)."""
        return None

    def shell_argv(self) -> list[str]:
        """The interactive shell of ``envmgr shell``: the user's $SHELL where the target runs here."""
        if self.runs_here:
            return [os.environ.get("SHELL") or "/bin/sh"]
        raise UsageError(f"{self.scheme}:// has no interactive shell from here",
                         hint="run commands with `envmgr run --env URL -- CMD` (every host, with the recorded env), "
                              "or ssh to a host and `. /opt/envmgr/current-env/bin/activate`")

    @property
    def interpreter(self) -> str:
        """The environment's own Python, as commands there name it."""
        return "python3"

    def run(self, argv: Sequence[str], timeout: float = 60.0,
            env: Mapping[str, str] | None = None) -> CommandResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def run_all(self, argv: Sequence[str], timeout: float = 60.0,
                env: Mapping[str, str] | None = None) -> dict[str, CommandResult]:
        """``{where: result}`` for every machine the target is (one, unless it is a fleet)."""
        return {self.url: self.run(argv, timeout=timeout, env=env)}

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Service:
        from envmgr.errors import UsageError

        raise UsageError(f"{self.scheme}:// targets cannot start a server",
                         hint="use local://, venv:// or docker://IMAGE for a benchmark server")

    def environment(self) -> dict[str, str]:
        """The variables every command here gets before the caller's (``envmgr env`` prints them)."""
        return {}

    def recorded_env_file(self) -> str | None:
        """A file on this machine holding the environment's recorded variables (0600), where
        there is one: ``envmgr env --sh`` reads a secret from it when the exports are evaluated,
        so the value is never printed."""
        return None
