"""A backend from one module, for tests/unit/test_new_backend.py (issue 28): ``dir://PATH``, an
environment that is a folder holding the spec's env as JSON; its commands run on this host with
that env and ``DIR_ENV`` (the folder) set. A target and a builder, and the registry line the
test adds; nothing in envmgr names it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from envmgr.builders.base import Build, Builder, Realized, Step
from envmgr.targets.base import CommandResult, Target
from envmgr.targets.local import LocalTarget
from envmgr.targets.urls import make_url, split_url

ENV_JSON = "env.json"


class DirTarget(Target):
    scheme = "dir"

    def __init__(self, url: str) -> None:
        self.path = Path(split_url(url)[1])

    @property
    def url(self) -> str:
        return make_url(self.scheme, str(self.path))

    @property
    def interpreter(self) -> str:
        import sys

        return sys.executable

    @classmethod
    def gone(cls, location: str) -> str | None:
        return None if (Path(location) / ENV_JSON).is_file() else f"folder {location} is gone"

    def environment(self) -> dict[str, str]:
        return {**json.loads((self.path / ENV_JSON).read_text()), "DIR_ENV": str(self.path)}

    def run(self, argv: Sequence[str], timeout: float = 60.0, env: Mapping[str, str] | None = None) -> CommandResult:
        return LocalTarget().run(argv, timeout=timeout, env={**os.environ, **self.environment(), **(env or {})})


class DirBuilder(Builder):
    kind = "dir"

    def __init__(self, url: str = "dir://") -> None:
        self.root = split_url(url)[1]  # "": the folder lives in the generation

    def steps(self, loaded, actions) -> list[Step]:
        return [Step("folder", "make the environment's folder", self._folder),
                Step("env", f"write the spec's {len(loaded.spec.env)} variable(s) into it", self._env)]

    def _where(self, build: Build) -> Path:
        return Path(self.root) / build.workdir.name if self.root else build.workdir / "env"

    def _folder(self, build: Build) -> None:
        self._where(build).mkdir(parents=True)

    def _env(self, build: Build) -> None:
        folder = self._where(build)
        (folder / ENV_JSON).write_text(json.dumps({k: str(v) for k, v in build.loaded.spec.env.items()}))
        build.realized = Realized(make_url(self.kind, str(folder)), str(folder), lock="")
