"""``docker://REPOSITORY[:TAG][?base=IMAGE&wheelhouse=1]``: an image built from the spec.

The image builder renders the Dockerfile (``images/Dockerfile.j2``) from the spec and the
lock it resolved on this host into ``workdir/image/`` (the build context: Dockerfile, lock.txt and, offline, wheelhouse/),
and tags the image ``REPOSITORY:<12 hex of the context's content hash>``. The same spec,
lock, wheels and base image give the same tag, and an image that exists is not rebuilt.

Two ways to install the lock inside the build:

- wheelhouse (``?wheelhouse=1`` or ``realize.docker.wheelhouse: true``): pip downloads the
  locked wheels on the host (hash-checked), the build copies them in and installs with
  ``--no-index``, with the build's network switched off. For sites whose containers cannot
  reach the package index (no route, or a TLS proxy whose CA only the host trusts).
- online (default): pip inside the build installs the lock from the index, hash-checked.

Steps: find the base image in the local engine (builds never pull); resolve the lock;
write the context (and, offline, download the wheelhouse); build the image, or reuse it
when one with the context's tag exists. The image's Python is the container target's.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import envmgr
from envmgr import confine
from envmgr.builders.base import Build, Builder, Realized, Step, package_changes, resolve_step
from envmgr.builders.dockerfile import INHERIT_PTH, WHEELHOUSE_DIR, base_python, render_dockerfile
from envmgr.errors import BackendError, UsageError
from envmgr.inherit import Interpreter, pin_problems, pth_text, read_interpreter
from envmgr.lock import clean_lock, file_sha256
from envmgr.progress import Progress, prefixed
from envmgr.targets.container import ContainerTarget
from envmgr.targets.docker_engine import LazyClient, inspect_image, short_id, translated
from envmgr.targets.urls import IMAGE_REF_RE, REPOSITORY_RE, make_url, parse_docker_url
from envmgr.wheelhouse import download_wheelhouse, fresh_dir

if TYPE_CHECKING:
    from docker import APIClient

    from envmgr.plan import Action
    from envmgr.spec.load import LoadedSpec
    from envmgr.spec.models import Spec

LOCK_NAME = "lock.txt"
CONTEXT_DIR = "image"  # under the generation's workdir
TAG_HEX = 12
BUILD_TAIL_LINES = 20
ANSI_ESCAPE_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # the builder colours a step's stderr


@dataclass(frozen=True)
class BuildSettings:
    repository: str
    base: str
    wheelhouse: bool


class ImageBuilder(Builder):
    """Builds the spec's image in the local Docker engine."""

    kind = "docker"

    def __init__(self, url: str = "docker://") -> None:
        self.target = parse_docker_url(url)
        self._engine = LazyClient()
        self._base: tuple[str, Interpreter] | None = None
        self.settings: BuildSettings | None = None

    def _resolve(self, loaded: LoadedSpec) -> None:
        self.settings = self._settings(loaded.spec)  # checked before the daemon or the index is asked

    def steps(self, loaded: LoadedSpec, actions: Sequence[Action]) -> list[Step]:
        spec = loaded.spec
        self.bind(loaded)
        settings = self.settings
        assert settings is not None
        mode = "offline, from a wheelhouse downloaded here" if settings.wheelhouse else "online"
        state: dict[str, str] = {}
        inherit = spec.python.inherit is not None
        return [
            Step("base", f"find the base image {settings.base} in the local Docker engine (never pulled)",
                 lambda build: state.update(base_id=self._base_image_id(self._client(), settings.base))),
            resolve_step(loaded, base=(lambda: self._base_interpreter(spec, settings.base)) if inherit else None,
                         lock=self.lock),
            Step("context", "write the build context: Dockerfile, lock"
                            + (", wheelhouse" if settings.wheelhouse else "")
                            + (", inherit.pth (the base image's site-packages, after the venv's own)" if inherit else ""),
                 lambda build: write_context(build.loaded, build.lock, build.workdir / CONTEXT_DIR, settings,
                                             build.progress, build.workdir.parent.parent,
                                             self._base_interpreter(spec, settings.base).sites if inherit else None)),
            Step("image", f"build {settings.repository}:<context hash> from {settings.base} ({mode}; "
                          f"reused when it exists): {package_changes(actions)}",
                 lambda build: self._image(build, settings, state["base_id"])),
        ]

    def preflight(self, loaded: LoadedSpec) -> None:
        spec = loaded.spec
        self.bind(loaded)
        assert self.settings is not None
        base = self.settings.base
        self._base_image_id(self._client(), base)
        if spec.python.inherit is not None:
            problems = pin_problems(self._base_interpreter(spec, base), spec)
            if problems:
                raise BackendError(f"python.inherit: the base image {base} cannot give what the spec pins: "
                                   + "; ".join(problems),
                                   hint="pin the versions the base image has, or choose a base image that has them")

    def _base_interpreter(self, spec: Spec, base: str) -> Interpreter:
        """The base image's interpreter and its packages, read once in a throwaway container."""
        if self._base is None or self._base[0] != base:
            with ContainerTarget(make_url("docker", base)) as box:
                self._base = (base, read_interpreter(base_python(spec), box))
        return self._base[1]

    def close(self) -> None:
        self._engine.close()

    def _image(self, build: Build, settings: BuildSettings, base_id: str) -> None:
        api = self._client()
        context = build.workdir / CONTEXT_DIR
        tag = f"{settings.repository}:{context_hash(context, base_id)[:TAG_HEX]}"
        image_id = self._existing_image_id(api, tag)
        built = image_id is None
        if image_id is not None:
            build.progress(f"image {tag} already exists ({short_id(image_id)}): not rebuilding")
        else:
            build.progress(f"building {tag} from {settings.base}")
            image_id = self._build(api, context, tag, offline=settings.wheelhouse, progress=build.progress)
            build.progress(f"built {tag} ({short_id(image_id)})")
        build.realized = Realized(make_url("docker", tag), image_id, build.lock,
                                  {"image": tag, "base": settings.base, "base_id": base_id,
                                   "wheelhouse": settings.wheelhouse, "built": built, "context": str(context)})

    def _settings(self, spec: Spec) -> BuildSettings:
        """Repository, base and install mode: the URL's, else the spec's ``realize.docker``."""
        options = spec.realize.docker
        repository = self.target.repository or options.tag or f"envmgr/{spec.metadata.name}"
        if not REPOSITORY_RE.fullmatch(repository):
            raise UsageError(f"{repository!r} is not a docker repository name",
                             hint="set realize.docker.tag to lower-case path components like envmgr/cuda13")
        base = self.target.base or options.base_image
        if not base:
            raise UsageError("no base image for the docker backend",
                             hint="set realize.docker.base_image, or add ?base=IMAGE to the docker:// URL")
        if not IMAGE_REF_RE.fullmatch(base):
            raise UsageError(f"realize.docker.base_image: {base!r} is not an image reference",
                             hint="name an image like debian:bookworm or nvidia/cuda:13.0.2-devel-ubuntu24.04")
        wheelhouse = options.wheelhouse if self.target.wheelhouse is None else self.target.wheelhouse
        if spec.python.sources.find_links:  # the wheels are on this host: they travel in the context
            if self.target.wheelhouse is False:
                raise UsageError("python.sources.find_links names directories on this host: an image build "
                                 "takes their wheels in its wheelhouse, and ?wheelhouse=0 refuses one",
                                 hint="drop ?wheelhouse=0 from the docker:// URL")
            wheelhouse = True
        return BuildSettings(repository, base, wheelhouse)
    def _build(self, api: APIClient, context: Path, tag: str, *, offline: bool,
               progress: Progress) -> str:
        tail: deque[str] = deque(maxlen=BUILD_TAIL_LINES)
        with translated(f"building {tag}"):
            chunks = api.build(path=str(context), tag=tag, decode=True, rm=True, forcerm=True,
                               pull=False, network_mode="none" if offline else None)
            for chunk in chunks:
                _raise_on_build_error(chunk, tag, tail)
                text = ANSI_ESCAPE_RE.sub("", str(chunk.get("stream") or chunk.get("status") or ""))
                for line in text.splitlines():
                    if line.strip():
                        tail.append(line)
                        progress(f"  [docker] {line}")
            built = self._existing_image_id(api, tag)
        if built is None:
            raise BackendError(f"the build of {tag} ended without an image: {' | '.join(tail)}")
        return built
    def _base_image_id(self, api: APIClient, base: str) -> str:
        image_id = self._existing_image_id(api, base)
        if image_id is None:  # builds never pull (registry-less sites): say how to get it
            raise BackendError(
                f"base image {base} is not in the local Docker daemon",
                hint="pull it (docker pull) where a registry is reachable, or build "
                     "envmgr/base:bookworm with images/bootstrap-base.sh")
        return image_id
    def _existing_image_id(self, api: APIClient, ref: str) -> str | None:
        info = inspect_image(api, ref)
        return str(info["Id"]) if info is not None else None

    def _client(self) -> APIClient:
        return self._engine.get()


def write_context(loaded: LoadedSpec, lock: str, context: Path, settings: BuildSettings,
                  progress: Progress, store_root: Path | None = None,
                  inherit_sites: Sequence[str] | None = None) -> None:
    """The build context: Dockerfile, the lock, offline the wheelhouse and, for python.inherit,
    the .pth that shows the base image's site-packages after the venv's own; nothing else."""
    spec = loaded.spec
    fresh_dir(context)
    (context / LOCK_NAME).write_text(clean_lock(lock), encoding="utf-8")
    if inherit_sites is not None:
        (context / INHERIT_PTH).write_text(pth_text(inherit_sites), encoding="utf-8")
    if settings.wheelhouse:
        progress("downloading the locked wheels on this host (offline build)")
        download_wheelhouse(spec, context / LOCK_NAME, context / WHEELHOUSE_DIR, prefixed(progress, "pip"))
    dockerfile = render_dockerfile(spec, base_image=settings.base, lock_name=LOCK_NAME,
                                   wheelhouse=settings.wheelhouse, envmgr_version=envmgr.__version__,
                                   spec_digest=loaded.digest,
                                   store=confine.store_id(store_root) if store_root is not None else "")
    (context / "Dockerfile").write_text(dockerfile, encoding="utf-8")


def context_hash(context: Path, base_id: str) -> str:
    """sha256 over what decides the image: base image id, Dockerfile, lock and each wheel."""
    digest = hashlib.sha256(b"envmgr-image-context/1\0")
    digest.update(base_id.encode() + b"\0")
    for name in ("Dockerfile", LOCK_NAME, INHERIT_PTH):
        if (context / name).is_file():
            digest.update(name.encode() + b"\0" + (context / name).read_bytes() + b"\0")
    wheelhouse = context / WHEELHOUSE_DIR
    for wheel in sorted(wheelhouse.iterdir()) if wheelhouse.is_dir() else ():
        digest.update(f"{WHEELHOUSE_DIR}/{wheel.name}\0{file_sha256(wheel)}\0".encode())
    return digest.hexdigest()


def _raise_on_build_error(chunk: Mapping[str, Any], tag: str, tail: deque[str]) -> None:
    if "error" not in chunk and "errorDetail" not in chunk:
        return
    detail = chunk.get("errorDetail") or {}
    message = str(chunk.get("error") or detail.get("message") or "unknown error").strip()
    output = "\n".join(f"    {line}" for line in tail)
    raise BackendError(f"building {tag} failed: {message}\n  last output:\n{output}",
                       hint="the lines above come from the build; fix the spec or the base image")
