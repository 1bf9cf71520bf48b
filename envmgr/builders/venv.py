"""The venv builder: a new venv per generation on this host.

Steps: resolve the lock (uv, with hashes); create the venv from an interpreter of the spec's
Python version; install exactly the lock (``uv pip sync --require-hashes``, or pip); record
the environment (``envmgr-env.json``, 0600: the spec's env and a pip toolkit's CUDA_HOME/PATH)
that the venv target gives every command. The venv is ``<generation>/venv``, or
``<realize.venv.path or the URL's path>/generation-N`` where generations of it live elsewhere.
The driver and system toolkits are the host's own: checked before, never built here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from envmgr import confine, failpoints
from envmgr.builders.base import Build, Builder, Realized, Step, package_changes, resolve_step
from envmgr.errors import BackendError, UsageError
from envmgr.inherit import PTH_NAME, Interpreter, closure, pin_problems, pth_text, read_interpreter, unmet_by_inherited
from envmgr.lock import source_args, uv_binary
from envmgr.progress import prefixed
from envmgr.secrets import secret_names
from envmgr.state import write_atomic
from envmgr.targets.base import CommandResult
from envmgr.targets.process import stream
from envmgr.targets.urls import make_url, split_url, venv_installer
from envmgr.targets.venv import ENV_FILE, PATH_PREPEND, env_file_text
from envmgr.toolkits import pip_cuda_prefix

if TYPE_CHECKING:
    from envmgr.plan import Action
    from envmgr.spec.load import LoadedSpec
    from envmgr.spec.models import Spec


PYTHON_DIR = "python"  # in the generation: the interpreter uv installed for it, when the host had none


class VenvBuilder(Builder):
    kind = "venv"
    builds_here = True

    def __init__(self, url: str = "venv://") -> None:
        self.root = split_url(url)[1]  # where generations of the venv live; "" = in the generation
        self.installer = venv_installer(url)
        # asked once per apply: each answer costs the interpreter a start (or several, on PATH)
        self._pythons: dict[tuple[str, str], str] = {}
        self._bases: dict[str, Interpreter] = {}
        self._missing: set[str] = set()  # versions this host has no interpreter of (uv installs them)
        self.where = self.root

    def _resolve(self, loaded: LoadedSpec) -> None:
        self.where = self.root or loaded.spec.realize.venv.path  # the URL's path, else the spec's

    def steps(self, loaded: LoadedSpec, actions: Sequence[Action]) -> list[Step]:
        spec = loaded.spec
        self.bind(loaded)
        root = self.where
        where = f"{root}/generation-N" if root else "the generation's venv/"
        env_changes = [a for a in actions if a.kind.startswith("env.") or a.kind.startswith("toolkit.")]
        inherit = spec.python.inherit
        provision = self._needs_python(spec)
        return [
            *([Step("python", f"install Python {spec.python.version} with uv (none on this host) into the generation: "
                              f"`uv python install {spec.python.version}`, from python-build-standalone, "
                              "UV_PYTHON_INSTALL_MIRROR or UV_PYTHON_DOWNLOADS_JSON_URL",
                    lambda build: self._provision(build, spec.python.version))] if provision else []),
            resolve_step(loaded, base=lambda: self._base(spec), python=lambda: self._base_python(spec),
                         lock=self.lock),
            Step("venv", f"create a Python {spec.python.version} venv at {where} ({self.installer})"
                         + (f" from {inherit.python}" if inherit and inherit.python else ""),
                 lambda build: self._create(build, root)),
            Step("install", f"install the lock with {self.installer}, hashes required"
                            + (", offline" if spec.python.sources.offline else "")
                            + f": {package_changes(actions)}", self._install),
            Step("env", f"record the environment: {len(spec.env)} variable(s) from the spec"
                        + (", CUDA_HOME/PATH of the pip toolkit" if _has_pip_toolkit(spec) else "")
                        + (f" ({len(env_changes)} change(s))" if env_changes else "")
                        + ("; the base's packages visible after the venv's own, inherited ones checked"
                           if inherit else ""), self._record),
        ]

    def preflight(self, loaded: LoadedSpec) -> None:
        spec = loaded.spec
        if not self._needs_python(spec):
            self._base_python(spec)  # an interpreter of the spec's version that runs, or a clear error
        if spec.python.inherit is not None:
            problems = pin_problems(self._base(spec), spec)
            if problems:
                raise BackendError("python.inherit: the base interpreter cannot give what the spec pins: "
                                   + "; ".join(problems),
                                   hint="pin the versions the base has (envmgr facts --python BASE lists "
                                        "them), or install them there, or stop inheriting them")

    def _base_python(self, spec: Spec) -> str:
        """The interpreter the venv is made from: ``python.inherit.python`` when named (it must be
        the spec's Python), else one of the spec's version on this host."""
        inherit = spec.python.inherit
        named = inherit.python if inherit is not None else ""
        key = (named, spec.python.version)
        if key not in self._pythons:
            if named and not _reports_version(named, spec.python.version):
                raise BackendError(f"python.inherit.python: {named} does not run as Python {spec.python.version}",
                                   hint="name the base interpreter by its path, of the spec's python.version")
            self._pythons[key] = named or require_interpreter(spec.python.version)
        return self._pythons[key]

    def _needs_python(self, spec: Spec) -> bool:
        """No interpreter of the spec's version here, and none named: uv installs one first."""
        inherit = spec.python.inherit
        if (inherit is not None and inherit.python) or (("", spec.python.version) in self._pythons):
            return False
        if spec.python.version not in self._missing:  # asked once: preflight and steps both ask
            found = find_interpreter(spec.python.version)
            if found is None:
                self._missing.add(spec.python.version)
            else:
                self._pythons[("", spec.python.version)] = found
        return spec.python.version in self._missing

    def _provision(self, build: Build, version: str) -> None:
        """Into the generation's own folder (``python/``): it lives and goes with the generation,
        and nothing is written outside the store (``--no-bin``: no link in ~/.local/bin)."""
        into = build.workdir / PYTHON_DIR
        done = stream([uv_binary(), "python", "install", "--no-bin", "--install-dir", str(into), version],
                      prefixed(build.progress, "uv"), timeout=1800)
        found = _uv_finds(version, into) if done.returncode == 0 else None
        if found is None or not _reports_version(found, version):
            raise BackendError(f"uv could not install Python {version}: {(done.stdout or '').strip()[-300:]}",
                               hint=f"install Python {version} on this host (python{version} on PATH), or give uv "
                                    "a reachable mirror of python-build-standalone: UV_PYTHON_INSTALL_MIRROR")
        self._pythons[("", version)] = found

    def _base(self, spec: Spec) -> Interpreter:
        """The base interpreter's packages, read once for the preflight and the resolve."""
        python = self._base_python(spec)
        if python not in self._bases:
            self._bases[python] = read_interpreter(python)
        return self._bases[python]

    # --- the steps ------------------------------------------------------------------------

    def _create(self, build: Build, root: str) -> None:
        venv = Path(root) / f"generation-{build.workdir.name}" if root else build.workdir / "venv"
        if root:
            self._claim(build, Path(root), venv)
        python = self._base_python(build.loaded.spec)
        build.progress(f"creating the venv at {venv} from {python}")
        if self.installer == "uv":
            argv = [uv_binary(), "venv", "--quiet", "--allow-existing", "--python", python, str(venv)]
        elif build.loaded.spec.python.inherit is not None:  # ensurepip's pip and setuptools would shadow the base's
            argv = [python, "-m", "venv", "--without-pip", str(venv)]
        else:
            argv = [python, "-m", "venv", str(venv)]
        _check(stream(argv, prefixed(build.progress, self.installer)), "creating the venv")
        failpoints.reach("venv-created")
        build.realized = Realized(make_url("venv", str(venv)), str(venv), build.lock,
                                  {"python": str(python), "installer": self.installer})

    def _claim(self, build: Build, root: Path, venv: Path) -> None:
        """Make ``ROOT/generation-N`` this store's, with its owner mark (what gc and the next
        apply trust, never a recorded path); a venv an interrupted apply of this very number
        left there is removed first, anything else refused."""
        store_root = build.workdir.parent.parent  # HOME/generations/N
        number = int(build.workdir.name)
        if confine.within(root, store_root):
            raise UsageError(f"realize.venv.path {root} lies inside the store {store_root}",
                             hint="give venvs a folder of their own outside the store (or leave "
                                  "realize.venv.path empty: the venv is then the generation's own)")
        if venv.exists() or venv.is_symlink():
            if confine.owned_outside(store_root, number, str(venv)) is None:
                raise BackendError(f"{venv} already exists and is not an unfinished venv of this store's "
                                   f"generation {number}", hint="remove it, or give realize.venv.path another folder")
            build.progress(f"removing {venv}: left by an apply of generation {number} that was interrupted")
            confine.remove_tree(root, venv, f"the unfinished venv of generation {number}")
        venv.mkdir(parents=True)
        confine.mark_owner(venv, store_root, number)  # before anything else: a kill after it leaves it claimable

    def _install(self, build: Build) -> None:
        venv = Path(_realized(build).location)
        python = str(venv / "bin" / "python")
        lock = build.workdir / "lock.txt"  # written by uv when the lock was resolved
        spec = build.loaded.spec
        if self.installer == "uv":
            argv = [uv_binary(), "pip", "sync", "--require-hashes", "--python", python,
                    *source_args(spec, "uv"), str(lock)]
        else:  # an inheriting venv has no pip: the base's installs into it (pip >= 22.3)
            pip = [self._base_python(spec), "-m", "pip", "--python", python] if spec.python.inherit else [
                python, "-m", "pip"]
            argv = [*pip, "install", "--no-input", "--require-hashes", "--no-deps",
                    *source_args(spec, "pip"), "-r", str(lock)]
        log = prefixed(build.progress, self.installer)

        def on_line(line: str) -> None:
            failpoints.reach("installing")  # a crash test kills us mid-install here
            log(line)

        _check(stream(argv, on_line), "installing the lock")
        failpoints.reach("installed")

    def _record(self, build: Build) -> None:
        venv = Path(_realized(build).location)
        spec = build.loaded.spec
        if spec.python.inherit is not None:
            # Only after the install: the installer never sees (so never removes) the base's packages.
            self._inherit(build, venv)
        extra = toolkit_environment(spec, venv)
        # 0600: it is where the environment's secrets live (envmgr.secrets), for run and start, and their names
        write_atomic(venv / ENV_FILE, env_file_text(extra, secret_names(spec)), mode=0o600)

    def _inherit(self, build: Build, venv: Path) -> None:
        spec = build.loaded.spec
        base = read_interpreter(self._base_python(spec))
        problems = pin_problems(base, spec)  # the base may have changed since the preflight
        own = read_interpreter(str(venv / "bin" / "python"))
        site = next((s for s in own.sites if Path(s).is_relative_to(venv)), None)
        if site is None:
            raise BackendError(f"the venv {venv} reports no site-packages of its own")
        write_atomic(Path(site) / PTH_NAME, pth_text(base.sites))
        kept = closure(base, spec.python.inherited)
        problems += unmet_by_inherited(read_interpreter(str(venv / "bin" / "python")), kept)
        if problems:
            raise BackendError("the inherited packages do not fit the environment: " + "; ".join(problems),
                               hint="pin the versions the base interpreter has, or stop inheriting them")
        build.progress(f"inherited from {base.executable}: "
                       + (", ".join(f"{n} {d.version}" for n, d in sorted(kept.items()) if n in spec.python.inherited)
                          or "its packages") + f" (sites: {', '.join(base.sites)})")


def _realized(build: Build) -> Realized:
    assert build.realized is not None, "the venv step runs before install and env"
    return build.realized


def _has_pip_toolkit(spec: Spec) -> bool:
    return spec.cuda is not None and spec.cuda.selected.source == "pip"


def find_interpreter(version: str) -> str | None:
    """An interpreter of ``version`` (major.minor) on this host that runs and says so: envmgr's
    own, ``python{version}`` on PATH, else one uv finds; no downloads.
    (A pyenv shim is on PATH for versions it cannot run: asked, it fails.)"""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    for found in (shutil.which(f"python{version}"), _uv_finds(version)):
        if found and _reports_version(found, version):
            return found
    return None


def require_interpreter(version: str) -> str:
    found = find_interpreter(version)
    if found is None:
        raise BackendError(f"no Python {version} interpreter on this host (looked for python{version} and uv's)",
                           hint=f"install Python {version}, or set python.version to "
                                f"{sys.version_info.major}.{sys.version_info.minor}")
    return found


def _uv_finds(version: str, install_dir: Path | None = None) -> str | None:
    """The interpreter uv finds (on PATH, or among the Pythons installed in ``install_dir``)."""
    env = {**os.environ, **({"UV_PYTHON_INSTALL_DIR": str(install_dir)} if install_dir is not None else {})}
    try:
        done = subprocess.run([uv_binary(), "python", "find", "--no-python-downloads", version],
                              capture_output=True, text=True, timeout=60, check=False, env=env)
    except (OSError, subprocess.TimeoutExpired, BackendError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _reports_version(python: str, version: str) -> bool:
    try:
        done = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def toolkit_environment(spec: Spec, venv: Path) -> dict:
    """The spec's env, plus CUDA_HOME and PATH of a toolkit that comes from pip wheels."""
    env: dict = {k: str(v) for k, v in spec.env.items()}
    prefix = pip_cuda_prefix(spec, venv)
    if prefix is not None:
        env.setdefault("CUDA_HOME", str(prefix))
        env[PATH_PREPEND] = [str(prefix / "bin")]
    return env


def _check(result: CommandResult, what: str) -> None:
    if result.returncode != 0:
        tail = " | ".join(result.stdout.strip().splitlines()[-5:])
        raise BackendError(f"{what} failed (exit {result.returncode}): {tail}")
