"""Fixtures for tests against real engines: they skip, with the reason, where an engine is absent.

Images: what a test builds is removed at the end of the session with the parents its build
made (``remove_image_tree``) and the build stages the builds left (``built_images``), never an
image that was in the daemon before (``envmgr/base:bookworm`` above all: slow to rebuild),
nor one another image still builds on or a container uses (a concurrent build's).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import pytest
from docker_images import image_ids

from envmgr.builders.dockerfile import BUILD_STAGE_LABEL

# The image images/bootstrap-base.sh builds (ENVMGR_BASE_IMAGE names another, as the script reads it).
BASE_IMAGE = os.environ.get("ENVMGR_BASE_IMAGE", "envmgr/base:bookworm")
# The build stage of envmgr's images: left dangling by every build (a failed one leaves its
# steps so far), found by its label.
BUILD_STAGE_FILTER = {"dangling": True, "label": "=".join(BUILD_STAGE_LABEL)}


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




def remove_image_tree(api, image: str, keep: Iterable[str]) -> list[str]:
    """Remove ``image`` (an id or a tag; all its tags), then its parents one by one, leaf first:
    the classic builder leaves an image per build step. Stops at an image in ``keep`` (there
    before), a parent with a tag, one that another image still builds on, or one that a
    container uses (Docker refuses the last two). Docker's own pruning is off (``noprune``): it would also take untagged
    parents that were there before. Returns the ids removed."""
    from docker.errors import APIError, NotFound

    keep = set(keep)
    removed: list[str] = []
    try:
        current = api.inspect_image(image)["Id"]
    except NotFound:
        return removed
    while current and current not in keep:
        info = api.inspect_image(current)
        if removed and info.get("RepoTags"):  # a parent with a name is somebody's image
            break
        parent = info.get("Parent") or None
        try:
            # force only for the image named (several tags of one image); never for a parent
            api.remove_image(current, force=not removed, noprune=True)
        except NotFound:
            pass
        except APIError:  # dependent child images, or a container: what is left stays
            break
        removed.append(current)
        current = parent
    return removed


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
        from docker.errors import NotFound

        removed: list[str] = []
        named = list(self.refs)
        for repository in self.repositories:
            named += [tag for image in self.api.images(name=repository) for tag in image["RepoTags"] or ()
                      if tag.rpartition(":")[0] == repository]
        for ref in named:
            try:
                info = self.api.inspect_image(ref)
            except NotFound:
                continue
            if info["Id"] in self.before:  # a build that was all cache: only the name is new
                if len(info.get("RepoTags") or ()) > 1:
                    self.api.remove_image(ref, noprune=True)  # untags; the image stays
                continue
            removed += remove_image_tree(self.api, info["Id"], self.before)
        for leaf in set(self.api.images(quiet=True, filters=BUILD_STAGE_FILTER)) - self.before:
            removed += remove_image_tree(self.api, leaf, self.before)
        return removed


@pytest.fixture(scope="session")
def built_images(docker_client):
    """The session's record of the images its tests build; they are removed when the session
    is done, not after each module: the modules' builds share the builder's cache (the same
    base and first steps), which a removal in between would make every module rebuild."""
    record = BuiltImages(docker_client.api)
    yield record
    record.remove()
