"""Fixtures for every test."""

from __future__ import annotations

import os

import pytest


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
