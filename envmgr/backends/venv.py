"""``venv://PATH``: a Python virtual environment on this host.

``realize`` builds a new venv inside the new generation's directory: resolve the lock
(uv, with hashes), create the venv from an interpreter of the spec's Python version,
install exactly the lock (``uv pip sync --require-hashes``; pip when uv is unusable),
and write ``envmgr-env.json`` beside it: the spec's env plus ``CUDA_HOME``/``PATH`` of a
pip-wheel toolkit, which ``run`` applies to every command.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envmgr import failpoints
from envmgr.backends.base import Closing, CommandResult, Progress, Realized
from envmgr.backends.local import LocalBackend
from envmgr.backends.process import stream
from envmgr.backends.service import Service
from envmgr.errors import BackendError
from envmgr.lock import resolve, uv_binary
from envmgr.state import write_atomic
from envmgr.toolkits import pip_cuda_prefix

if TYPE_CHECKING:
    from envmgr.facts.model import Facts
    from envmgr.plan import Action
    from envmgr.spec.load import LoadedSpec
    from envmgr.spec.models import Spec

ENV_FILE = "envmgr-env.json"
INSTALLERS = ("uv", "pip")


class VenvBackend(Closing):
    """A venv: given by path (``venv:///opt/envs/x``), or made per generation (``venv://``)."""

    def __init__(self, path: str = "", installer: str = "uv") -> None:
        if installer not in INSTALLERS:
            raise BackendError(f"unknown installer {installer!r}; use one of {INSTALLERS}")
        self.path = Path(path) if path else None
        self.installer = installer
        self._local = LocalBackend()

    @property
    def python(self) -> str:
        return str(self._require_path() / "bin" / "python")

    @property
    def url(self) -> str:
        return f"venv://{self.path}" if self.path else "venv://"

    # --- running inside ---------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        """The variables every command in this venv gets."""
        venv = self._require_path()
        recorded = venv / ENV_FILE
        extra = json.loads(recorded.read_text(encoding="utf-8")) if recorded.is_file() else {}
        path_dirs = [str(venv / "bin"), *extra.pop("PATH_PREPEND", []), os.environ.get("PATH", "")]
        return {**extra, "VIRTUAL_ENV": str(venv), "PATH": os.pathsep.join(p for p in path_dirs if p)}

    def run(self, argv: Sequence[str], timeout: float = 60.0,
            env: Mapping[str, str] | None = None) -> CommandResult:
        return self._local.run(argv, timeout=timeout, env={**self.environment(), **(env or {})})

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> Service:
        return self._local.start(argv, env={**self.environment(), **(env or {})})

    def facts(self) -> Facts:
        from envmgr.facts import collect_facts

        return collect_facts(self, python=self.python)

    def close(self) -> None:
        self._local.close()



    # --- building ---------------------------------------------------------------------

    def realize(self, loaded: LoadedSpec, actions: Sequence[Action], progress: Progress,
                workdir: Path) -> Realized:
        spec = loaded.spec
        venv = workdir / "venv"
        python = find_interpreter(spec.python.version)
        progress(f"resolving {len(spec.python.packages)} package pins for Python {spec.python.version}")
        failpoints.reach("resolve")
        lock = resolve(spec, workdir, spec.python.version, _prefixed(progress, "uv"))
        failpoints.reach("resolved")
        progress(f"creating the venv at {venv} from {python}")
        self._create(python, venv, progress)
        failpoints.reach("venv-created")
        progress(f"installing the lock with {self.installer}")
        self._install(venv, workdir / "lock.txt", progress)
        failpoints.reach("installed")
        extra = toolkit_environment(spec, venv)
        # 0600: it is where the environment's secrets live (envmgr.secrets), for run and start
        write_atomic(venv / ENV_FILE, json.dumps(extra, indent=2, sort_keys=True), mode=0o600)
        self.path = venv
        return Realized(backend=self.url, location=str(venv), lock=lock,
                        details={"python": str(python), "installer": self.installer})

    def _create(self, python: str, venv: Path, progress: Progress) -> None:
        if self.installer == "uv":
            argv = [uv_binary(), "venv", "--quiet", "--python", python, str(venv)]
        else:
            argv = [python, "-m", "venv", str(venv)]
        _check(stream(argv, _prefixed(progress, self.installer)), "creating the venv")

    def _install(self, venv: Path, lock: Path, progress: Progress) -> None:
        python = str(venv / "bin" / "python")
        if self.installer == "uv":
            argv = [uv_binary(), "pip", "sync", "--require-hashes", "--python", python, str(lock)]
        else:
            argv = [python, "-m", "pip", "install", "--no-input", "--require-hashes", "--no-deps",
                    "-r", str(lock)]
        log = _prefixed(progress, self.installer)

        def on_line(line: str) -> None:
            failpoints.reach("installing")  # a crash test kills us mid-install here
            log(line)

        _check(stream(argv, on_line), "installing the lock")

    def _require_path(self) -> Path:
        if self.path is None:
            raise BackendError("this venv backend has no venv yet",
                               hint="apply a spec first, or name one: venv:///path/to/venv")
        return self.path


def find_interpreter(version: str) -> str:
    """An interpreter of ``version`` (major.minor) on this host; no downloads."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    found = shutil.which(f"python{version}")
    if found:
        return found
    raise BackendError(f"no Python {version} interpreter on this host (looked for python{version})",
                       hint=f"install Python {version}, or set python.version to "
                            f"{sys.version_info.major}.{sys.version_info.minor}")


def toolkit_environment(spec: Spec, venv: Path) -> dict:
    """The spec's env, plus CUDA_HOME and PATH of a toolkit that comes from pip wheels."""
    env: dict = {k: str(v) for k, v in spec.env.items()}
    prefix = pip_cuda_prefix(spec, venv)
    if prefix is not None:
        env.setdefault("CUDA_HOME", str(prefix))
        env["PATH_PREPEND"] = [str(prefix / "bin")]
    return env


def _check(result: CommandResult, what: str) -> None:
    if result.returncode != 0:
        tail = " | ".join(result.stdout.strip().splitlines()[-5:])
        raise BackendError(f"{what} failed (exit {result.returncode}): {tail}")


def _prefixed(progress: Progress, tag: str) -> Progress:
    return lambda line: progress(f"  [{tag}] {line}") if line.strip() else None

