"""``docker://REPOSITORY:TAG``: commands in throwaway containers of an image.

``run`` starts a container of the image (argv as the command, argv[0] as the entrypoint,
no shell) on the host's network and always removes it; ``start`` runs a server the same
way, with an init process so that stopping the container reaps everything in it. GPUs
(and room in /dev/shm for NCCL) are requested only when the daemon has the nvidia runtime.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from envmgr.errors import BackendError, CommandNotFound, CommandTimeout, UsageError
from envmgr.targets import inflight
from envmgr.targets.base import LEAVES_IMAGE, CommandResult, Target, checked_argv
from envmgr.targets.docker_engine import (
    DAEMON_HINT,
    LazyClient,
    is_timeout,
    kill_container,
    remove_container,
    remove_container_quietly,
    translated,
)
from envmgr.targets.urls import parse_docker_url

if TYPE_CHECKING:
    from docker import APIClient

VENV_PYTHON = "/opt/envmgr/venv/bin/python"  # the interpreter of every image envmgr builds
# NCCL keeps its intra-node buffers in /dev/shm; Docker's default 64 MB breaks multi-GPU
# collectives ("Error while creating shared memory segment"). tmpfs: costs only what is used.
GPU_SHM_SIZE = "16g"
RUN_LABEL = "dev.envmgr.run"  # on every throwaway container: `docker ps -a -f label=...` finds strays


class ContainerTarget(Target):
    """Throwaway containers of one image (``docker://REPOSITORY:TAG``, or an image id)."""

    scheme = "docker"
    interpreter = VENV_PYTHON
    can_start = True
    leaves = LEAVES_IMAGE

    def __init__(self, url: str) -> None:
        self._image = parse_docker_url(url).image
        self._engine = LazyClient()
        self._gpu_runtime: bool | None = None

    @property
    def url(self) -> str:
        return f"docker://{self._image}"

    @classmethod
    def gone(cls, location: str) -> str | None:
        from envmgr.targets.docker_engine import image_exists

        return f"image {location[:19]} is no longer in the Docker engine" if image_exists(location) is False else None

    def shell_argv(self) -> list[str]:
        """``docker run -it`` of the image (the docker CLI needed)."""
        docker = shutil.which("docker")
        if docker is None:
            raise UsageError("an interactive shell in a container needs the docker CLI",
                             hint="install docker's CLI, or run commands with `envmgr run --env ... -- CMD`")
        image = self.url.removeprefix("docker://")
        tty = ["-t"] if sys.stdin.isatty() else []  # commands piped in need no terminal
        return [docker, "run", "--rm", "-i", *tty, "--network", "host", "--entrypoint", "/bin/sh", image]

    def run(self, argv: Sequence[str], timeout: float = 60.0,
            env: Mapping[str, str] | None = None) -> CommandResult:
        args = checked_argv(argv)
        image = self._require_image()
        api = self._client()
        started = time.monotonic()
        with translated(f"running {args[0]} in {image}"):
            container = api.create_container(
                image, command=args[1:], entrypoint=args[:1],  # argv[0] replaces any ENTRYPOINT
                environment=dict(env or {}), labels={RUN_LABEL: "1"},
                # The host's network, as a venv command has: a load client reaches the server
                # that ``start`` runs on a host port.
                host_config=self._host_config(api, network_mode="host"),
            )["Id"]
        try:
            self._start(api, container, args)
            with inflight.running(lambda: kill_container(api, container)):
                code = self._wait(api, container, args, timeout)
            with translated(f"reading the output of {args[0]}"):
                stdout = api.logs(container, stdout=True, stderr=False).decode("utf-8", "replace")
                stderr = api.logs(container, stdout=False, stderr=True).decode("utf-8", "replace")
        except BaseException:  # timeout, missing program, Ctrl-C: the container goes all the same
            remove_container_quietly(api, container)
            raise
        remove_container(api, container)
        return CommandResult(tuple(args), code, stdout, stderr, time.monotonic() - started)

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> DockerService:
        """A server in a container on the host's network (its port is the host's port), with
        an init process so that stopping the container reaps every process in it."""
        args = checked_argv(argv)
        image = self._require_image()
        api = self._client()
        with translated(f"creating a container for {args[0]} in {image}"):
            container = api.create_container(
                image, command=args[1:], entrypoint=args[:1], environment=dict(env or {}),
                labels={RUN_LABEL: "1"},
                host_config=self._host_config(api, network_mode="host", init=True),
            )["Id"]
        try:
            self._start(api, container, args)
        except BaseException:
            remove_container_quietly(api, container)
            raise
        return DockerService(api, container, f"{args[0]} in {image} (container {container[:12]})")

    @contextmanager
    def testinfra_url(self) -> Iterator[str]:
        """A throwaway container of the image, idle until the checks are done, then removed:
        ``docker://ID`` for testinfra (whose commands get the image's ENV, as ``run``'s do)."""
        idle = self.start(["sleep", "infinity"])
        try:
            yield f"docker://{idle.container}"
        finally:
            idle.stop(grace_s=1)  # tini (init) passes SIGTERM on: sleep ends at once

    def close(self) -> None:
        self._engine.close()

    def environment(self) -> dict[str, str]:
        """The image's own ENV (the spec's env, CUDA_HOME and PATH, as the Dockerfile set them)."""
        image = self._require_image()
        with translated(f"inspecting {image}"):
            config = self._client().inspect_image(image).get("Config") or {}
        pairs = (item.partition("=") for item in config.get("Env") or ())
        return {name: value for name, _, value in pairs}

    # --- containers -------------------------------------------------------------------

    def _start(self, api: APIClient, container: str, args: list[str]) -> None:
        from docker.errors import APIError

        try:
            with translated(f"starting {args[0]}", passthrough=(APIError,)):
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
            with translated(f"waiting for {args[0]}", passthrough=(requests.exceptions.RequestException,)):
                status = api.wait(container, timeout=timeout)
        except requests.exceptions.RequestException as exc:
            if not is_timeout(exc):
                raise BackendError(f"lost the Docker daemon while waiting for {args[0]}: {exc}",
                                   hint=DAEMON_HINT) from exc
            kill_container(api, container)
            raise CommandTimeout(f"{' '.join(args)} ran past {timeout:g}s in {self._image}; "
                                 f"its container was killed",
                                 hint="raise the timeout, or look at why the command hangs") from exc
        return int(status.get("StatusCode", -1))

    def _host_config(self, api: APIClient, **extra: Any) -> dict[str, Any]:
        """Every GPU (and room in /dev/shm for NCCL) where the daemon has the nvidia runtime."""
        from docker.types import DeviceRequest

        if self._gpu_runtime is None:
            with translated("asking the Docker daemon for its runtimes"):
                self._gpu_runtime = "nvidia" in (api.info().get("Runtimes") or {})
        if not self._gpu_runtime:
            return api.create_host_config(**extra)
        return api.create_host_config(device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])],
                                      shm_size=GPU_SHM_SIZE, **extra)

    # --- the client -------------------------------------------------------------------

    def _client(self) -> APIClient:
        return self._engine.get()

    def _require_image(self) -> str:
        if self._image is None:
            raise BackendError("docker:// names no image to run in",
                               hint="apply the spec first, or name an image: docker://REPOSITORY:TAG")
        return self._image



class DockerService:
    """A server running in a container (see ``ContainerTarget.start``)."""

    def __init__(self, api: APIClient, container: str, description: str) -> None:
        self._api = api
        self.container = container
        self.description = description

    def lines(self) -> Iterator[str]:
        # The log stream yields chunks, not lines; a partial line waits for its end.
        pending = ""
        with translated(f"reading the output of {self.description}"):
            for chunk in self._api.logs(self.container, stream=True, follow=True):
                pending += chunk.decode("utf-8", "replace")
                *complete, pending = pending.split("\n")
                yield from complete
        if pending:
            yield pending

    def poll(self) -> int | None:
        from docker.errors import NotFound

        try:
            with translated(f"inspecting {self.description}", passthrough=(NotFound,)):
                state = self._api.inspect_container(self.container)["State"]
        except NotFound:
            return -1  # removed under us: it is certainly not running
        return None if state.get("Running") else int(state.get("ExitCode", -1))

    def stop(self, grace_s: float = 10.0) -> int | None:
        code = None
        try:
            with translated(f"stopping {self.description}"):
                self._api.stop(self.container, timeout=max(1, round(grace_s)))
            code = self.poll()
        except BackendError:
            pass  # already gone; the forced removal below makes sure
        remove_container(self._api, self.container)
        return code

    def leftovers(self) -> list[str]:
        return [f"container {self.container[:12]}"] if self.poll() is None else []
