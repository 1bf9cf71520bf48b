"""``venv://PATH``: commands in a Python virtual environment on this host.

Every command gets the venv's recorded environment (``envmgr-env.json``, written 0600 by the
venv builder): the spec's env plus ``CUDA_HOME``/``PATH`` of a pip-wheel toolkit, then the
venv's ``bin`` first on PATH, as an activated venv has it. The same file records which of its
variables are secrets (``SECRET_NAMES``): it is as hard to rewrite as the secrets themselves,
unlike the generation's ``spec.yaml``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from envmgr.errors import BackendError, UsageError
from envmgr.records import read_env_file
from envmgr.targets.base import LEAVES_FOLDER, CommandResult, Recorded, Service, Target
from envmgr.targets.local import LocalTarget
from envmgr.targets.urls import make_url, split_url

ENV_FILE = "envmgr-env.json"
PATH_PREPEND = "PATH_PREPEND"  # the recorded directories that go before the host's PATH
# The recorded secret names: a key no variable can have (not a shell name), so never one of them.
SECRET_NAMES = "__envmgr.secret_names"


def env_file_text(env: Mapping[str, Any], secrets: Iterable[str]) -> str:
    """What the venv builder writes to ``ENV_FILE``: the variables, and which are secrets."""
    return json.dumps({**env, SECRET_NAMES: sorted(set(secrets))}, indent=2, sort_keys=True)


class VenvTarget(Target):
    """A venv named by its path (``venv:///opt/envs/x``)."""

    scheme = "venv"
    can_start = True
    runs_here = True
    leaves = LEAVES_FOLDER  # a venv made outside its generation's folder (realize.venv.path)

    @contextmanager
    def testinfra_url(self) -> Iterator[str]:
        """testinfra's ``local://`` runs its commands with this process's env: the venv's, meanwhile."""
        saved = dict(os.environ)
        os.environ.update(self.environment())
        try:
            yield "local://"
        finally:
            os.environ.clear()
            os.environ.update(saved)

    @classmethod
    def from_url(cls, url: str) -> VenvTarget:
        return cls(split_url(url)[1])

    @classmethod
    def check_url(cls, url: str) -> None:
        unknown = sorted(set(split_url(url)[2]) - {"installer"})
        if unknown:
            raise UsageError(f"{url}: a venv takes no parameter {', '.join(map(repr, unknown))}",
                             hint="a '?', '#' or '%' that is part of the venv's path is written %3F, %23 and %25 "
                                  "(as envmgr prints URLs)")

    @classmethod
    def same_place(cls, built: str, location: str, named: str) -> bool:
        """The same folder, by whatever path it is named."""
        return any(p and os.path.realpath(p) == os.path.realpath(named) for p in (built, location))

    @classmethod
    def gone(cls, location: str) -> str | None:
        return None if (Path(location) / "bin" / "python").exists() else f"venv {location} is gone"

    def __init__(self, path: str) -> None:
        if not path:
            raise BackendError("venv:// names no venv to run in",
                               hint="apply a spec first (its generation has one), or name one: venv:///path/to/venv")
        self.path = Path(os.path.abspath(path))  # what is printed for later use must not depend on the cwd
        self._local = LocalTarget()

    @property
    def url(self) -> str:
        return make_url("venv", str(self.path))

    @property
    def interpreter(self) -> str:
        return str(self.path / "bin" / "python")

    def missing(self) -> str | None:
        """What this venv lacks to run anything, or None: commands must never fall back to the host's."""
        if not self.path.is_dir():
            return f"there is no venv at {self.path}"
        if not os.access(self.interpreter, os.X_OK):
            return f"{self.path} is not a venv: it has no bin/python"
        return None

    def absent(self, from_generation: bool) -> tuple[str, str] | None:
        missing = self.missing()
        if missing is None and from_generation and self.recorded_env_file() is None:
            missing = f"its recorded environment {ENV_FILE} is gone (commands would lack the spec's env)"
        if missing is None:
            return None
        return missing, ("name a venv by its folder, venv:///path/to/venv (it has bin/python); in the URL a "
                         "'?', '#' or '%' of the path is written %3F, %23 and %25")

    def recorded(self) -> Recorded:
        """The recorded environment (empty when the venv has no ``ENV_FILE``)."""
        data = read_env_file(self.path / ENV_FILE)
        if data is None:
            return Recorded({})
        secrets = data.get(SECRET_NAMES)
        return Recorded({k: v for k, v in data.items() if isinstance(v, str)}, tuple(data.get(PATH_PREPEND) or ()),
                        None if secrets is None else frozenset(secrets))

    def environment(self) -> dict[str, str]:
        recorded = self.recorded()
        path_dirs = [str(self.path / "bin"), *recorded.path_prepend, os.environ.get("PATH", "")]
        return {**recorded.variables, "VIRTUAL_ENV": str(self.path), "PATH": os.pathsep.join(p for p in path_dirs if p)}

    def recorded_env_file(self) -> str | None:
        recorded = self.path / ENV_FILE
        return str(recorded) if recorded.is_file() else None

    def run(self, argv: Sequence[str], timeout: float = 60.0,
            env: Mapping[str, str] | None = None) -> CommandResult:
        return self._local.run(argv, timeout=timeout, env={**self.environment(), **(env or {})})

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Service:
        return self._local.start(argv, env={**self.environment(), **(env or {})})
