"""``docker://REPOSITORY[:TAG][?base=IMAGE&wheelhouse=1]``: an image built from the spec.

``realize`` resolves the lock on the host, renders the Dockerfile (``images/Dockerfile.j2``)
into ``workdir/image/`` (the build context: Dockerfile, lock.txt and, offline, wheelhouse/),
and tags the image ``REPOSITORY:<12 hex of the context's content hash>``. The same spec,
lock, wheels and base image give the same tag, and an image that exists is not rebuilt.

Two ways to install the lock inside the build:

- wheelhouse (``?wheelhouse=1`` or ``realize.docker.wheelhouse: true``): pip downloads the
  locked wheels on the host (hash-checked), the build copies them in and installs with
  ``--no-index``, with the build's network switched off. For sites whose containers cannot
  reach the package index (no route, or a TLS proxy whose CA only the host trusts).
- online (default): pip inside the build installs the lock from the index, hash-checked.

``run`` starts a throwaway container of the image (argv as the command, no shell) and always
removes it; GPUs are requested only when the daemon has the nvidia runtime. Every docker SDK
and requests exception becomes a ``BackendError`` here, chained with ``from exc``. The
``docker`` package is imported only when a backend is used.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import envmgr
from envmgr.backends import inflight
from envmgr.backends.base import Closing, CommandResult, Progress, Realized, checked_argv
from envmgr.backends.dockerfile import IMAGE_REF_RE, REPOSITORY_RE, WHEELHOUSE_DIR, render_dockerfile
from envmgr.backends.process import stream
from envmgr.errors import BackendError, CommandNotFound, CommandTimeout, UsageError
from envmgr.lock import index_args, resolve

if TYPE_CHECKING:
    from docker import APIClient

    from envmgr.facts.model import Facts
    from envmgr.plan import Action
    from envmgr.spec.load import LoadedSpec
    from envmgr.spec.models import Spec

VENV_PYTHON = "/opt/envmgr/venv/bin/python"
LOCK_NAME = "lock.txt"
CONTEXT_DIR = "image"  # under the generation's workdir
TAG_HEX = 12
API_TIMEOUT_S = 120  # one API call (not builds: they stream for as long as they take)
# NCCL keeps its intra-node buffers in /dev/shm; Docker's default 64 MB breaks multi-GPU
# collectives ("Error while creating shared memory segment"). tmpfs: costs only what is used.
GPU_SHM_SIZE = "16g"
RUN_LABEL = "dev.envmgr.run"  # on every throwaway container: `docker ps -a -f label=...` finds strays
BUILD_TAIL_LINES = 20
# The lock is resolved for manylinux_2_28 (envmgr.lock); pip download needs every tag it accepts.
WHEEL_PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)] + ["manylinux2014_x86_64"]
ANSI_ESCAPE_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # the builder colours a step's stderr
DAEMON_HINT = ("start the Docker daemon, check DOCKER_HOST, and that this user may use its socket "
               "(member of the docker group, or root)")


# --- the URL ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DockerTarget:
    """What a ``docker://`` URL names. Empty/None fields fall back to the spec."""

    repository: str
    tag: str | None = None  # an existing image to run in (docker://repo:tag)
    base: str | None = None
    wheelhouse: bool | None = None

    @property
    def image(self) -> str | None:
        return f"{self.repository}:{self.tag}" if self.repository and self.tag else None


def parse_docker_url(url: str) -> DockerTarget:
    """``docker://envmgr/demo?base=envmgr/base:bookworm&wheelhouse=1`` -> DockerTarget."""
    from envmgr.backends.urls import split_url

    scheme, ref, params = split_url(url)
    if scheme != "docker":
        raise UsageError(f"not a docker:// URL: {url!r}")
    unknown = sorted(set(params) - {"base", "wheelhouse"})
    if unknown:
        raise UsageError(f"{url}: unknown parameter(s) {unknown}", hint="docker:// takes base= and wheelhouse=")
    repository, tag = _split_tag(ref)
    if repository and not REPOSITORY_RE.fullmatch(repository):
        raise UsageError(f"{url}: {repository!r} is not a docker repository name",
                         hint="lower-case path components like envmgr/cuda13 (optionally host[:port]/ first)")
    if tag is not None and not _valid_tag(tag):
        raise UsageError(f"{url}: {tag!r} is not a docker tag")
    base = params.get("base") or None
    if base is not None and not IMAGE_REF_RE.fullmatch(base):
        raise UsageError(f"{url}: base={base!r} is not an image reference (like debian:bookworm)")
    return DockerTarget(repository, tag, base, _flag(params, "wheelhouse", url))


def _split_tag(ref: str) -> tuple[str, str | None]:
    # A ':' after the last '/' starts a tag; one before it belongs to host:port.
    head, slash, last = ref.rpartition("/")
    name, colon, tag = last.partition(":")
    return head + slash + name, (tag if colon else None)


def _valid_tag(tag: str) -> bool:
    return IMAGE_REF_RE.fullmatch(f"x:{tag}") is not None


def _flag(params: Mapping[str, str], name: str, url: str) -> bool | None:
    value = params.get(name)
    if value is None:
        return None
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{url}: {name}={value!r} is not a boolean", hint=f"use {name}=1 or {name}=0")


@dataclass(frozen=True)
class BuildSettings:
    repository: str
    base: str
    wheelhouse: bool


# --- the backend --------------------------------------------------------------------------


class DockerBackend(Closing):
    """Builds images from specs and runs commands in throwaway containers of them."""

    python = VENV_PYTHON  # the interpreter of every image envmgr builds

    def __init__(self, url: str = "docker://") -> None:
        self.target = parse_docker_url(url)
        self._image = self.target.image  # set by realize, or named by the URL
        self._api: APIClient | None = None
        self._gpu_runtime: bool | None = None

    @property
    def url(self) -> str:
        return f"docker://{self._image or self.target.repository}"

    # --- running inside ---------------------------------------------------------------

    def run(self, argv: Sequence[str], timeout: float = 60.0,
            env: Mapping[str, str] | None = None) -> CommandResult:
        args = checked_argv(argv)
        image = self._require_image()
        api = self._client()
        started = time.monotonic()
        with _translated(f"running {args[0]} in {image}"):
            container = api.create_container(
                image, command=args[1:], entrypoint=args[:1],  # argv[0] replaces any ENTRYPOINT
                environment=dict(env or {}), labels={RUN_LABEL: "1"},
                # The host's network, as a venv command has: a load client reaches the server
                # that ``start`` runs on a host port.
                host_config=self._host_config(api, network_mode="host"),
            )["Id"]
        try:
            self._start(api, container, args)
            with inflight.running(lambda: api.kill(container)):
                code = self._wait(api, container, args, timeout)
            with _translated(f"reading the output of {args[0]}"):
                stdout = api.logs(container, stdout=True, stderr=False).decode("utf-8", "replace")
                stderr = api.logs(container, stdout=False, stderr=True).decode("utf-8", "replace")
        except BaseException:  # timeout, missing program, Ctrl-C: the container goes all the same
            _remove_container_quietly(api, container)
            raise
        _remove_container(api, container)
        return CommandResult(tuple(args), code, stdout, stderr, time.monotonic() - started)

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> DockerService:
        """A server in a container on the host's network (its port is the host's port), with
        an init process so that stopping the container reaps every process in it."""
        args = checked_argv(argv)
        image = self._require_image()
        api = self._client()
        with _translated(f"creating a container for {args[0]} in {image}"):
            container = api.create_container(
                image, command=args[1:], entrypoint=args[:1], environment=dict(env or {}),
                labels={RUN_LABEL: "1"},
                host_config=self._host_config(api, network_mode="host", init=True),
            )["Id"]
        try:
            self._start(api, container, args)
        except BaseException:
            _remove_container_quietly(api, container)
            raise
        return DockerService(api, container, f"{args[0]} in {image} (container {container[:12]})")

    def facts(self) -> Facts:
        from envmgr.facts.collect import collect_facts  # facts imports backends: avoid a cycle

        return collect_facts(self, python=VENV_PYTHON)

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None



    # --- building ---------------------------------------------------------------------

    def realize(self, loaded: LoadedSpec, actions: Sequence[Action], progress: Progress,
                workdir: Path) -> Realized:
        """Build the spec's image (``actions`` are not needed: an image is built whole)."""
        spec = loaded.spec
        settings = self._settings(spec)  # checked before the daemon or the index is asked
        api = self._client()
        base_id = self._base_image_id(api, settings.base)

        progress(f"resolving {len(spec.python.packages)} package pins for Python {spec.python.version}")
        lock = resolve(spec, workdir, spec.python.version, _prefixed(progress, "uv"))
        context = workdir / CONTEXT_DIR
        write_context(loaded, lock, context, settings, progress)

        tag = f"{settings.repository}:{context_hash(context, base_id)[:TAG_HEX]}"
        image_id = self._existing_image_id(api, tag)
        built = image_id is None
        if image_id is not None:
            progress(f"image {tag} already exists ({_short(image_id)}): not rebuilding")
        else:
            mode = "offline, from the wheelhouse" if settings.wheelhouse else "online"
            progress(f"building {tag} from {settings.base} ({mode})")
            image_id = self._build(api, context, tag, offline=settings.wheelhouse, progress=progress)
            progress(f"built {tag} ({_short(image_id)})")
        self._image = tag
        return Realized(backend=self.url, location=image_id, lock=lock,
                        details={"image": tag, "base": settings.base, "base_id": base_id,
                                 "wheelhouse": settings.wheelhouse, "built": built,
                                 "context": str(context)})

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
        return BuildSettings(repository, base, wheelhouse)

    def _build(self, api: APIClient, context: Path, tag: str, *, offline: bool,
               progress: Progress) -> str:
        tail: deque[str] = deque(maxlen=BUILD_TAIL_LINES)
        with _translated(f"building {tag}"):
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
        from docker.errors import ImageNotFound

        try:
            with _translated(f"looking up image {ref}", passthrough=(ImageNotFound,)):
                return str(api.inspect_image(ref)["Id"])
        except ImageNotFound:
            return None

    # --- containers -------------------------------------------------------------------

    def _start(self, api: APIClient, container: str, args: list[str]) -> None:
        from docker.errors import APIError

        try:
            with _translated(f"starting {args[0]}", passthrough=(APIError,)):
                api.start(container)
        except APIError as exc:
            text = str(exc.explanation or exc)
            if "executable file not found" in text or "no such file or directory" in text:
                raise CommandNotFound(f"{args[0]}: command not found in {self._image}",
                                      hint="install it in the image (add its package to the spec)") from exc
            raise BackendError(f"cannot start {args[0]} in {self._image}: {text}") from exc

    def _wait(self, api: APIClient, container: str, args: list[str], timeout: float) -> int:
        import requests

        try:
            with _translated(f"waiting for {args[0]}", passthrough=(requests.exceptions.RequestException,)):
                status = api.wait(container, timeout=timeout)
        except requests.exceptions.RequestException as exc:
            if not _is_timeout(exc):
                raise BackendError(f"lost the Docker daemon while waiting for {args[0]}: {exc}",
                                   hint=DAEMON_HINT) from exc
            _kill_container(api, container)
            raise CommandTimeout(f"{' '.join(args)} ran past {timeout:g}s in {self._image}; "
                                 f"its container was killed",
                                 hint="raise the timeout, or look at why the command hangs") from exc
        return int(status.get("StatusCode", -1))

    def _host_config(self, api: APIClient, **extra: Any) -> dict[str, Any]:
        """Every GPU (and room in /dev/shm for NCCL) where the daemon has the nvidia runtime."""
        from docker.types import DeviceRequest

        if self._gpu_runtime is None:
            with _translated("asking the Docker daemon for its runtimes"):
                self._gpu_runtime = "nvidia" in (api.info().get("Runtimes") or {})
        if not self._gpu_runtime:
            return api.create_host_config(**extra)
        return api.create_host_config(device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])],
                                      shm_size=GPU_SHM_SIZE, **extra)

    # --- the client -------------------------------------------------------------------

    def _client(self) -> APIClient:
        if self._api is None:
            self._api = connect()
        return self._api

    def _require_image(self) -> str:
        if self._image is None:
            raise BackendError(f"{self.url} names no image to run in",
                               hint="realize the spec first, or name an image: docker://REPOSITORY:TAG")
        return self._image


class DockerService:
    """A server running in a container (see ``DockerBackend.start``)."""

    def __init__(self, api: APIClient, container: str, description: str) -> None:
        self._api = api
        self.container = container
        self.description = description

    def lines(self) -> Iterator[str]:
        # The log stream yields chunks, not lines; a partial line waits for its end.
        pending = ""
        with _translated(f"reading the output of {self.description}"):
            for chunk in self._api.logs(self.container, stream=True, follow=True):
                pending += chunk.decode("utf-8", "replace")
                *complete, pending = pending.split("\n")
                yield from complete
        if pending:
            yield pending

    def poll(self) -> int | None:
        from docker.errors import NotFound

        try:
            with _translated(f"inspecting {self.description}", passthrough=(NotFound,)):
                state = self._api.inspect_container(self.container)["State"]
        except NotFound:
            return -1  # removed under us: it is certainly not running
        return None if state.get("Running") else int(state.get("ExitCode", -1))

    def stop(self, grace_s: float = 10.0) -> int | None:
        code = None
        try:
            with _translated(f"stopping {self.description}"):
                self._api.stop(self.container, timeout=max(1, round(grace_s)))
            code = self.poll()
        except BackendError:
            pass  # already gone; the forced removal below makes sure
        _remove_container(self._api, self.container)
        return code

    def leftovers(self) -> list[str]:
        return [f"container {self.container[:12]}"] if self.poll() is None else []


def connect(timeout: int = API_TIMEOUT_S) -> APIClient:
    """A low-level client of the daemon that DOCKER_HOST (or the default socket) names."""
    try:
        import docker
        from docker.utils import kwargs_from_env
    except ImportError as exc:
        raise BackendError("the docker Python package is not installed", hint="pip install docker") from exc
    import requests
    from docker.errors import DockerException

    try:
        api = docker.APIClient(version="auto", timeout=timeout, **kwargs_from_env())
        api.ping()
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise BackendError(f"cannot reach the Docker daemon: {exc}", hint=DAEMON_HINT) from exc
    return api


# --- the build context --------------------------------------------------------------------


def write_context(loaded: LoadedSpec, lock: str, context: Path, settings: BuildSettings,
                  progress: Progress) -> None:
    """The build context: Dockerfile, the lock and, offline, the wheelhouse; nothing else."""
    spec = loaded.spec
    _fresh_dir(context)
    (context / LOCK_NAME).write_text(image_lock(lock), encoding="utf-8")
    if settings.wheelhouse:
        progress("downloading the locked wheels on this host (offline build)")
        download_wheelhouse(spec, context / LOCK_NAME, context / WHEELHOUSE_DIR, _prefixed(progress, "pip"))
    dockerfile = render_dockerfile(spec, base_image=settings.base, lock_name=LOCK_NAME,
                                   wheelhouse=settings.wheelhouse, envmgr_version=envmgr.__version__,
                                   spec_digest=loaded.digest)
    (context / "Dockerfile").write_text(dockerfile, encoding="utf-8")


def download_wheelhouse(spec: Spec, lock: Path, wheelhouse: Path, on_line: Callable[[str], None]) -> None:
    """pip downloads every locked wheel for the image's Python and Linux x86_64, hash-checked."""
    _fresh_dir(wheelhouse)  # only this lock's wheels: a stale one would change the tag
    abi = "cp" + spec.python.version.replace(".", "")
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-input",
            "--progress-bar", "off", "--require-hashes", "--no-deps", "--only-binary=:all:",
            "--python-version", spec.python.version, "--implementation", "cp", "--abi", abi,
            *[arg for platform in WHEEL_PLATFORMS for arg in ("--platform", platform)],
            *index_args(spec), "--dest", str(wheelhouse), "-r", str(lock)]
    result = stream(argv, on_line)
    if result.returncode != 0:
        tail = " | ".join(result.stdout.strip().splitlines()[-5:])
        raise BackendError(f"downloading the wheels failed (exit {result.returncode}): {tail}",
                           hint="every locked package needs a wheel for Linux x86_64 "
                                f"(manylinux) and Python {spec.python.version}; or build online")


def image_lock(lock: str) -> str:
    """The lock without its comments: uv's ``# via -r /path/of/the/workdir/...`` annotations
    name the generation's directory, which must change neither the image nor its tag."""
    kept = [line for line in lock.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return "\n".join(kept) + "\n"


def context_hash(context: Path, base_id: str) -> str:
    """sha256 over what decides the image: base image id, Dockerfile, lock and each wheel."""
    digest = hashlib.sha256(b"envmgr-image-context/1\0")
    digest.update(base_id.encode() + b"\0")
    for name in ("Dockerfile", LOCK_NAME):
        digest.update(name.encode() + b"\0" + (context / name).read_bytes() + b"\0")
    wheelhouse = context / WHEELHOUSE_DIR
    for wheel in sorted(wheelhouse.iterdir()) if wheelhouse.is_dir() else ():
        digest.update(f"{WHEELHOUSE_DIR}/{wheel.name}\0{_file_sha256(wheel)}\0".encode())
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _fresh_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


# --- errors at the boundary ---------------------------------------------------------------


@contextmanager
def _translated(what: str, passthrough: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """docker SDK and requests exceptions -> BackendError (ours and ``passthrough`` pass)."""
    import requests
    from docker.errors import DockerException

    try:
        yield
    except passthrough:
        raise
    except requests.exceptions.ConnectionError as exc:
        raise BackendError(f"{what}: lost the Docker daemon: {exc}", hint=DAEMON_HINT) from exc
    except (DockerException, requests.exceptions.RequestException) as exc:
        raise BackendError(f"{what}: {_explain(exc)}") from exc


def _explain(exc: BaseException) -> str:
    explanation = getattr(exc, "explanation", None)
    return str(explanation or exc)


def _raise_on_build_error(chunk: Mapping[str, Any], tag: str, tail: deque[str]) -> None:
    if "error" not in chunk and "errorDetail" not in chunk:
        return
    detail = chunk.get("errorDetail") or {}
    message = str(chunk.get("error") or detail.get("message") or "unknown error").strip()
    output = "\n".join(f"    {line}" for line in tail)
    raise BackendError(f"building {tag} failed: {message}\n  last output:\n{output}",
                       hint="the lines above come from the build; fix the spec or the base image")


def _is_timeout(exc: BaseException) -> bool:
    import requests

    seen: BaseException | None = exc
    while seen is not None:  # requests wraps urllib3's ReadTimeoutError in a ConnectionError
        if isinstance(seen, requests.exceptions.Timeout) or "timed out" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _kill_container(api: APIClient, container: str) -> None:
    try:
        with _translated(f"killing container {container[:12]}"):
            api.kill(container)
    except BackendError:
        pass  # it exited between the timeout and the kill; the forced removal follows anyway


def _remove_container(api: APIClient, container: str) -> None:
    from docker.errors import NotFound

    try:
        with _translated(f"removing container {container[:12]}", passthrough=(NotFound,)):
            api.remove_container(container, force=True)
    except NotFound:
        pass  # already gone


def _remove_container_quietly(api: APIClient, container: str) -> None:
    # Another error is on its way up: a failed removal must not replace it.
    try:
        _remove_container(api, container)
    except BackendError:
        pass



def _short(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12]


def _prefixed(progress: Progress, tag: str) -> Callable[[str], None]:
    def emit(line: str) -> None:
        if line.strip():
            progress(f"  [{tag}] {line}")

    return emit
