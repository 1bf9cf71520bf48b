"""A venv's path and its venv:// URL map onto each other exactly, whatever the path holds
('?', '#', '%', spaces, newlines, bytes that are not UTF-8), also for a generation whose
backend is recorded relative to its folder and a store moved to such a path (issue 24)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stores import venv_generation

from envmgr.cli import main
from envmgr.state import Store
from envmgr.targets import open_target
from envmgr.targets.urls import make_url, split_url
from envmgr.targets.venv import VenvTarget

PATHS = ["/v/a?b", "/v/a#b", "/v/100%", "/v/%41", "/v/a%2Fb", "/v/with space", "/v/new\nline", "/v/é",
         "/v/?installer=pip", "/v/a b?c#d%e\nf", os.fsdecode(b"/v/not-utf8-\xff\xfe")]


@pytest.mark.parametrize("path", PATHS)
def test_a_venv_path_survives_its_url(path):
    url = make_url("venv", path)
    assert split_url(url) == ("venv", path, {})
    assert "?" not in url and "#" not in url and "\n" not in url
    target = open_target(url)
    assert str(target.path) == path and target.url == url
    assert target.environment()["VIRTUAL_ENV"] == path and target.interpreter == f"{path}/bin/python"
    assert VenvTarget(path).url == url  # the URL a target reports opens the same venv


@given(st.binary(min_size=1).filter(lambda b: b"\0" not in b))
def test_any_path_survives_its_url(name):
    path = "/v/" + os.fsdecode(name)  # any bytes a file name can hold, UTF-8 or not
    assert split_url(make_url("venv", path))[1] == path
    assert split_url(make_url("venv", path, installer="pip")) == ("venv", path, {"installer": "pip"})


@pytest.mark.parametrize("old,new", [("plain", "m?x#y"), ("a ?#%", "b %?#\nz")])
def test_a_moved_store_names_its_own_venv_whatever_its_path(tmp_path, capsys, old, new):
    venv_generation(tmp_path / old, "u")
    shutil.move(tmp_path / old, tmp_path / new)
    venv = str(tmp_path / new / "generations" / "1" / "venv")
    gen = Store(tmp_path / new).current()
    assert gen.backend == make_url("venv", venv) and gen.location == venv
    assert main(["env", "--home", str(tmp_path / new), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["env"]["VIRTUAL_ENV"] == venv and doc["interpreter"] == f"{venv}/bin/python"
