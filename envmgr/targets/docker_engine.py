"""The Docker engine, for the container target and the image builder: one client, and the one
boundary where docker SDK and requests exceptions become ``BackendError`` (chained ``from exc``).
The ``docker`` package is imported only when a container is run or an image built.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from envmgr.errors import BackendError

if TYPE_CHECKING:
    from docker import APIClient

API_TIMEOUT_S = 120  # one API call (not builds: they stream for as long as they take)
DAEMON_HINT = ("start the Docker daemon, check DOCKER_HOST, and that this user may use its socket "
               "(member of the docker group, or root)")


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


class LazyClient:
    """One client for its owner (a container target, the image builder): connected on first
    use, so that opening a target or listing steps never needs the daemon; closed with it."""

    def __init__(self) -> None:
        self._api: APIClient | None = None

    def get(self) -> APIClient:
        if self._api is None:
            self._api = connect()
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None


def inspect_image(api: APIClient, ref: str) -> dict[str, Any] | None:
    """The engine's record of an image; None when it has no such image."""
    from docker.errors import ImageNotFound

    try:
        with translated(f"looking up image {ref}", passthrough=(ImageNotFound,)):
            return dict(api.inspect_image(ref))
    except ImageNotFound:
        return None


@contextmanager
def engine_if_reachable(timeout: int = 10) -> Iterator[APIClient | None]:
    """A client for a quick question, or None when no engine (or no SDK) answers: for callers
    that then cannot tell, rather than fail (gc, rollback's check of an image)."""
    try:
        api = connect(timeout=timeout)
    except BackendError:
        yield None
        return
    try:
        yield api
    finally:
        api.close()


def image_size(ref: str) -> int | None:
    """The image's size in bytes; None when it is not there or the engine cannot be asked."""
    found = _lookup(ref)
    return int(found.get("Size") or 0) if isinstance(found, dict) else None


def image_exists(ref: str) -> bool | None:
    """Whether the engine has the image; None when that cannot be told (no daemon, no SDK)."""
    found = _lookup(ref)
    return None if found is _UNKNOWN else found is not None


_UNKNOWN = object()


def _lookup(ref: str) -> dict[str, Any] | None | object:
    """The image's record, None when missing, _UNKNOWN when the engine could not be asked."""
    with engine_if_reachable() as api:
        if api is None:
            return _UNKNOWN
        try:
            return inspect_image(api, ref)
        except BackendError:
            return _UNKNOWN


def dangling_images(labels: list[str]) -> list[tuple[str, int]]:
    """``(id, size)`` of the untagged images with every one of ``labels`` (``key=value``); none
    without an engine."""
    with engine_if_reachable() as api:
        if api is None:
            return []
        try:
            with translated("listing dangling images"):
                images = api.images(filters={"dangling": True, "label": labels})
        except BackendError:
            return []
        return [(str(i["Id"]), int(i.get("Size") or 0)) for i in images]


def remove_image(ref: str) -> bool:
    """Remove an image (never forced); False when a container of it still exists."""
    from docker.errors import APIError, ImageNotFound

    api = connect()
    try:
        with translated(f"removing image {ref}", passthrough=(APIError,)):
            api.remove_image(ref, noprune=False)
        return True
    except ImageNotFound:
        return True  # already gone
    except APIError as exc:
        if exc.status_code == 409:  # conflict: used by a container, or by a tagged child
            return False
        raise BackendError(f"removing image {ref}: {explain(exc)}") from exc
    finally:
        api.close()


@contextmanager
def translated(what: str, passthrough: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
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
        raise BackendError(f"{what}: {explain(exc)}") from exc


def explain(exc: BaseException) -> str:
    explanation = getattr(exc, "explanation", None)
    return str(explanation or exc)


def is_timeout(exc: BaseException) -> bool:
    import requests

    seen: BaseException | None = exc
    while seen is not None:  # requests wraps urllib3's ReadTimeoutError in a ConnectionError
        if isinstance(seen, requests.exceptions.Timeout) or "timed out" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def kill_container(api: APIClient, container: str) -> None:
    try:
        with translated(f"killing container {container[:12]}"):
            api.kill(container)
    except BackendError:
        pass  # it exited between the timeout and the kill; the forced removal follows anyway


def remove_container(api: APIClient, container: str) -> None:
    from docker.errors import NotFound

    try:
        with translated(f"removing container {container[:12]}", passthrough=(NotFound,)):
            api.remove_container(container, force=True)
    except NotFound:
        pass  # already gone


def remove_container_quietly(api: APIClient, container: str) -> None:
    # Another error is on its way up: a failed removal must not replace it.
    try:
        remove_container(api, container)
    except BackendError:
        pass



def short_id(image_id: str) -> str:
    return image_id.removeprefix("sha256:")[:12]
