"""Fixtures for every test."""

from __future__ import annotations

import os
import warnings

import pytest
from docker_images import BUILT_IMAGES, image_ids, remove_built

# The images a run made and left behind (a leak), checked once for the whole run: by the only
# session, or by xdist's controller, whose workers build at the same time and see each other's.
_IMAGES_BEFORE = pytest.StashKey[set[str] | None]()
# What xdist's workers' builds made, handed over as each worker finishes; removed when all have.
_BUILT = pytest.StashKey[list[dict]]()


def _docker_api(use):
    """``use(api)`` with a client of the daemon; None without an SDK or a daemon (nothing to do)."""
    try:
        import docker

        client = docker.from_env(timeout=120)
    except Exception:
        return None
    try:
        return use(client.api)
    except Exception as exc:
        warnings.warn(f"Docker daemon: {exc}", stacklevel=1)
        return None
    finally:
        client.close()


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):
        session.config.stash[_IMAGES_BEFORE] = _docker_api(image_ids)
        session.config.stash[_BUILT] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """An xdist worker is done: keep what its builds made for the removal after the last one."""
    built = getattr(node, "workeroutput", {}).get(BUILT_IMAGES)
    if built:
        node.config.stash[_BUILT].append(built)


def pytest_sessionfinish(session, exitstatus):
    before = session.config.stash.get(_IMAGES_BEFORE, None)
    built = session.config.stash.get(_BUILT, [])
    if before is not None and built:  # no worker builds any more
        _docker_api(lambda api: remove_built(api, before, [r for b in built for r in b["refs"]],
                                             [r for b in built for r in b["repositories"]]))
    left = sorted((_docker_api(image_ids) or before) - before) if before is not None else []
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
