"""Wheelhouses: the wheels of a lock, downloaded on this host (hash-checked) for an image's
offline build or for hosts that reach no index, and the prepared locks a rollout copies.

Wheels of a rollout are kept per lock digest in the user's cache (``wheel_cache``): a
re-apply of the same lock downloads nothing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envmgr.errors import BackendError
from envmgr.lock import clean_lock, resolve, source_args
from envmgr.progress import Progress, prefixed
from envmgr.spec.models import Spec
from envmgr.targets.process import stream
from envmgr.toolkits import toolkit_release, toolkit_requirements

# The lock is resolved for manylinux_2_28 (envmgr.lock); pip download needs every tag it accepts.
WHEEL_PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)] + ["manylinux2014_x86_64"]
COMPLETE_MARKER = ".envmgr-complete"
DIGEST_HEX = 12


def download_wheelhouse(spec: Spec, lock: Path, wheelhouse: Path, on_line: Callable[[str], None]) -> None:
    """pip downloads every locked wheel for the image's Python and Linux x86_64, hash-checked."""
    fresh_dir(wheelhouse)  # only this lock's wheels: a stale one would change the tag
    abi = "cp" + spec.python.version.replace(".", "")
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-input",
            "--progress-bar", "off", "--require-hashes", "--no-deps", "--only-binary=:all:",
            "--python-version", spec.python.version, "--implementation", "cp", "--abi", abi,
            *[arg for platform in WHEEL_PLATFORMS for arg in ("--platform", platform)],
            *source_args(spec, "pip"), "--dest", str(wheelhouse), "-r", str(lock)]
    result = stream(argv, on_line)
    if result.returncode != 0:
        tail = " | ".join(result.stdout.strip().splitlines()[-5:])
        raise BackendError(f"downloading the wheels failed (exit {result.returncode}): {tail}",
                           hint="every locked package needs a wheel for Linux x86_64 "
                                f"(manylinux) and Python {spec.python.version}; or build online")


def fresh_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


@dataclass(frozen=True)
class PreparedLock:
    """A lock on the controller and the wheels it names, ready to copy to the hosts."""

    id: str  # <name>-<digest>: names the host's wheelhouse, lock and install directory
    digest: str
    lock_file: Path
    wheels_dir: Path


def lock_digest(lock_text: str, python_version: str) -> str:
    return hashlib.sha256(f"envmgr-lock/1\0{python_version}\0{lock_text}".encode()).hexdigest()


def prepare_python_lock(spec: Spec, files: Path, progress: Progress,
                        locked: str | None = None) -> tuple[PreparedLock, str]:
    """Resolve the spec's packages (uv, hashes), or take the committed lock text ``locked``, and
    download their wheels for the hosts."""
    if locked is not None:
        lock = locked
        (files / "python").mkdir(parents=True, exist_ok=True)
    else:
        progress(f"resolving {len(spec.python.packages)} package pins for Python {spec.python.version}")
        lock = resolve(spec, files / "python", spec.python.version, prefixed(progress, "uv"))
    prepared = _prepare_lock(spec, files / "python", spec.metadata.name, clean_lock(lock), progress)
    return prepared, lock


def prepare_toolkit_locks(spec: Spec, files: Path, progress: Progress) -> dict[str, PreparedLock]:
    """A lock and wheels for each toolkit with ``source: pip`` (held to its X.Y series)."""
    prepared = {}
    for toolkit in spec.cuda.toolkits if spec.cuda else ():
        if toolkit.source != "pip":
            continue
        major, minor = toolkit_release(toolkit.version)
        toolkit_spec = spec.model_copy(update={"python": spec.python.model_copy(update={
            "packages": toolkit_requirements(toolkit.version), "torch_cuda": None, "index_url": None})})
        where = files / f"cuda-{major}.{minor}"
        progress(f"resolving the wheels of CUDA {toolkit.version}")
        lock = resolve(toolkit_spec, where, spec.python.version, prefixed(progress, "uv"))
        prepared[toolkit.version] = _prepare_lock(toolkit_spec, where, f"cuda-{major}.{minor}",
                                                  clean_lock(lock), progress)
    return prepared


def _prepare_lock(spec: Spec, where: Path, name: str, lock_text: str, progress: Progress) -> PreparedLock:
    digest = lock_digest(lock_text, spec.python.version)
    lock_id = f"{name}-{digest[:DIGEST_HEX]}"
    lock_file = where / "lock.clean.txt"
    lock_file.write_text(lock_text, encoding="utf-8")
    # Wheels are kept per lock digest outside the generation: a re-apply of the same lock
    # downloads nothing, and pip checked every file against the lock's hashes when it came.
    wheels = wheel_cache() / lock_id
    if (wheels / COMPLETE_MARKER).is_file():
        progress(f"wheels of {name} already downloaded ({wheels})")
    else:
        progress(f"downloading the wheels of {name} on this host")
        download_wheelhouse(spec, lock_file, wheels, prefixed(progress, "pip"))
        (wheels / COMPLETE_MARKER).write_text(digest + "\n", encoding="utf-8")
    return PreparedLock(lock_id, digest, lock_file, wheels)


def wheel_cache() -> Path:
    """``$ENVMGR_CACHE`` or ``$XDG_CACHE_HOME/envmgr`` (``~/.cache/envmgr``), then ``wheels/``."""
    root = os.environ.get("ENVMGR_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "envmgr"
    return Path(root) / "wheels"
