"""The cache of envmgr's parsed data files: a hit equals a parse, any change is a miss,
and a broken or foreign cache entry is parsed again instead of trusted."""

from __future__ import annotations

import os

import pytest

from envmgr import datafiles
from envmgr.bench.triage import parse_signatures
from envmgr.compat.flags import parse_flag_data
from envmgr.compat.kb import parse_knowledge_base

SHIPPED = [("envmgr.compat", "sglang_flags.yaml", parse_flag_data),
           ("envmgr.compat", "rules.yaml", parse_knowledge_base),
           ("envmgr.bench", "signatures.yaml", parse_signatures)]

calls: list[str] = []


def counting_parse(text: str) -> dict:
    calls.append(text)
    return {"text": text}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ENVMGR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ENVMGR_NO_CACHE", raising=False)
    calls.clear()
    return tmp_path / "cache"


@pytest.mark.parametrize("package,name,parse", SHIPPED, ids=[s[1] for s in SHIPPED])
def test_a_cached_load_equals_a_fresh_parse(cache, package, name, parse):
    first = datafiles.load_shipped(package, name, parse)
    assert len(list(cache.glob("*.pickle"))) == 1
    second = datafiles.load_shipped(package, name, parse)  # from the cache
    assert second is not first
    fresh = parse(datafiles.resources.files(package).joinpath(name).read_text(encoding="utf-8"))
    assert second == fresh


def test_second_load_is_a_hit_and_a_changed_file_a_miss(cache, tmp_path, monkeypatch):
    files = tmp_path / "pkg"
    files.mkdir()
    (files / "data.yaml").write_text("a: 1\n")
    monkeypatch.setattr(datafiles.resources, "files", lambda package: files)
    assert datafiles.load_shipped("x", "data.yaml", counting_parse) == {"text": "a: 1\n"}
    assert datafiles.load_shipped("x", "data.yaml", counting_parse) == {"text": "a: 1\n"}
    assert len(calls) == 1
    (files / "data.yaml").write_text("a: 2\n")
    assert datafiles.load_shipped("x", "data.yaml", counting_parse) == {"text": "a: 2\n"}
    assert len(calls) == 2
    assert len(list(cache.glob("data-*.pickle"))) == 1  # the stale entry is gone


def test_corrupt_or_foreign_entries_are_parsed_again(cache, tmp_path, monkeypatch):
    files = tmp_path / "pkg"
    files.mkdir()
    (files / "data.yaml").write_text("a: 1\n")
    monkeypatch.setattr(datafiles.resources, "files", lambda package: files)
    datafiles.load_shipped("x", "data.yaml", counting_parse)
    (entry,) = cache.glob("data-*.pickle")
    entry.write_bytes(b"not a pickle")
    assert datafiles.load_shipped("x", "data.yaml", counting_parse) == {"text": "a: 1\n"}
    assert len(calls) == 2
    os.chmod(entry, 0o666)  # writable by others: never unpickled
    entry.write_bytes(__import__("pickle").dumps({"text": "planted"}))
    assert datafiles.load_shipped("x", "data.yaml", counting_parse) == {"text": "a: 1\n"}
    assert len(calls) == 3


def test_an_unusable_cache_directory_only_costs_the_parse(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("ENVMGR_CACHE_DIR", str(blocker / "cache"))  # under a file: cannot exist
    calls.clear()
    files = tmp_path / "pkg"
    files.mkdir()
    (files / "data.yaml").write_text("a: 1\n")
    monkeypatch.setattr(datafiles.resources, "files", lambda package: files)
    for _ in range(2):
        assert datafiles.load_shipped("x", "data.yaml", counting_parse) == {"text": "a: 1\n"}
    assert len(calls) == 2
    monkeypatch.setenv("ENVMGR_NO_CACHE", "1")
    assert datafiles.cache_dir() is None
