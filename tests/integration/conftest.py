"""Fixtures for tests against real engines: they skip, with the reason, where an engine is absent.

Images: what a test builds is removed when no build runs any more (tests/docker_images.py: at
the end of the session, or on xdist's controller after every worker), with the parents its build
made and the build stages the builds left (``built_images``), never an image that was in the
daemon before (``envmgr/base:bookworm`` above all: slow to rebuild), nor one another image still
builds on or a container uses.
"""

from __future__ import annotations

import os

import pytest
from docker_images import BUILT_IMAGES, image_ids, remove_built

# The image images/bootstrap-base.sh builds (ENVMGR_BASE_IMAGE names another, as the script reads it).
BASE_IMAGE = os.environ.get("ENVMGR_BASE_IMAGE", "envmgr/base:bookworm")


@pytest.fixture(scope="session")
def docker_client():
    """A docker SDK client of a reachable daemon, or the test is skipped."""
    docker = pytest.importorskip("docker", reason="the docker Python SDK is not installed")
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.skip(f"Docker daemon not reachable: {exc}")
    yield client  # what the whole run left in the daemon is checked once, at its end (tests/conftest.py)
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client) -> str:
    """The local base image's tag; skipped when it was not built on this machine."""
    from docker.errors import ImageNotFound

    try:
        docker_client.images.get(BASE_IMAGE)
    except ImageNotFound:
        pytest.skip(f"base image {BASE_IMAGE} is absent: build it once with images/bootstrap-base.sh")
    return BASE_IMAGE


class BuiltImages:
    """What the tests' builds made: ``add`` a tag or ``add_repository`` to remove afterwards;
    the build stages that appeared meanwhile go too."""

    def __init__(self, api) -> None:
        self.api = api
        self.before = image_ids(api)
        self.refs: list[str] = []
        self.repositories: list[str] = []

    def add(self, ref: str) -> str:
        self.refs.append(ref)
        return ref

    def add_repository(self, name: str) -> str:
        self.repositories.append(name)
        return name

    def remove(self) -> list[str]:
        return remove_built(self.api, self.before, self.refs, self.repositories)


@pytest.fixture(scope="session")
def built_images(docker_client, request):
    """The session's record of the images its tests build; they are removed when the session
    is done, not after each module: the modules' builds share the builder's cache (the same
    base and first steps), which a removal in between would make every module rebuild."""
    record = BuiltImages(docker_client.api)
    yield record
    if hasattr(request.config, "workeroutput"):  # an xdist worker: the controller removes them when all are done
        request.config.workeroutput[BUILT_IMAGES] = {"refs": record.refs, "repositories": record.repositories}
    else:
        record.remove()
