"""``venv://PATH``: commands in a Python virtual environment on this host.

Every command gets the venv's recorded environment (``envmgr-env.json``, written 0600 by the
venv builder): the spec's env plus ``CUDA_HOME``/``PATH`` of a pip-wheel toolkit, then the
venv's ``bin`` first on PATH, as an activated venv has it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from envmgr.errors import BackendError
from envmgr.targets.base import CommandResult, Service, Target
from envmgr.targets.local import LocalTarget

ENV_FILE = "envmgr-env.json"
PATH_PREPEND = "PATH_PREPEND"  # the recorded directories that go before the host's PATH


class VenvTarget(Target):
    """A venv named by its path (``venv:///opt/envs/x``)."""

    scheme = "venv"
    can_start = True
    runs_here = True

    def __init__(self, path: str) -> None:
        if not path:
            raise BackendError("venv:// names no venv to run in",
                               hint="apply a spec first (its generation has one), or name one: venv:///path/to/venv")
        self.path = Path(path)
        self._local = LocalTarget()

    @property
    def url(self) -> str:
        return f"venv://{self.path}"

    @property
    def interpreter(self) -> str:
        return str(self.path / "bin" / "python")

    def environment(self) -> dict[str, str]:
        recorded = self.path / ENV_FILE
        extra = json.loads(recorded.read_text(encoding="utf-8")) if recorded.is_file() else {}
        path_dirs = [str(self.path / "bin"), *extra.pop(PATH_PREPEND, []), os.environ.get("PATH", "")]
        return {**extra, "VIRTUAL_ENV": str(self.path), "PATH": os.pathsep.join(p for p in path_dirs if p)}

    def recorded_env_file(self) -> str | None:
        recorded = self.path / ENV_FILE
        return str(recorded) if recorded.is_file() else None

    def run(self, argv: Sequence[str], timeout: float = 60.0,
            env: Mapping[str, str] | None = None) -> CommandResult:
        return self._local.run(argv, timeout=timeout, env={**self.environment(), **(env or {})})

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Service:
        return self._local.start(argv, env={**self.environment(), **(env or {})})
