"""Fixtures for every test."""

from __future__ import annotations

import os
import warnings

import pytest
from docker_images import image_ids

# The images a run made and left behind (a leak), checked once for the whole run: by the only
# session, or by xdist's controller, whose workers build at the same time and see each other's.
_IMAGES_BEFORE = pytest.StashKey[set[str] | None]()


def _image_ids() -> set[str] | None:
    """The daemon's images; None without an SDK or a daemon (nothing to check)."""
    try:
        import docker

        client = docker.from_env(timeout=30)
        try:
            return image_ids(client.api)
        finally:
            client.close()
    except Exception:
        return None


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):
        session.config.stash[_IMAGES_BEFORE] = _image_ids()


def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_IMAGES_BEFORE, None)
    left = sorted((_image_ids() or before) - before) if before is not None else []
    if left:
        warnings.warn(f"{len(left)} image(s) made during this test run are still in the Docker daemon: "
                      f"{', '.join(i.removeprefix('sha256:')[:12] for i in left)} (docker images -a)", stacklevel=1)


@pytest.fixture(scope="session", autouse=True)
def private_data_cache(tmp_path_factory):
    """envmgr's parsed-data cache (``envmgr.datafiles``) lives in the session's temporary
    directory, never the user's ~/.cache; subprocesses inherit it through the environment."""
    old = os.environ.get("ENVMGR_CACHE_DIR")
    os.environ["ENVMGR_CACHE_DIR"] = str(tmp_path_factory.mktemp("envmgr-cache"))
    yield
    if old is None:
        os.environ.pop("ENVMGR_CACHE_DIR", None)
    else:
        os.environ["ENVMGR_CACHE_DIR"] = old
