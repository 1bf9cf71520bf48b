"""Fixtures for tests against real engines: they skip, with the reason, where an engine is absent."""

from __future__ import annotations

import os

import pytest

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
    yield client
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
