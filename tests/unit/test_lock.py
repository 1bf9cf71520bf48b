"""Spec values reach uv only as validated requirement lines; lock parsing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from envmgr.errors import SpecError
from envmgr.lock import (
    inherited_line,
    inherited_python,
    inherited_versions,
    lock_sources,
    locked_versions,
    requirement_lines,
    source_args,
)
from envmgr.spec import Spec

BASE = {"apiVersion": "envmgr/v1", "metadata": {"name": "x"}, "hardware": {"gpu": {"arch": "sm_90"}}}


def spec(packages: dict, **python) -> Spec:
    return Spec.model_validate({**BASE, "python": {"packages": packages, **python}})


def test_requirement_lines_are_normalised_pep508():
    assert requirement_lines(spec({"Six": "1.16.0", "torch": ">=2.9,<2.12"})) == [
        "Six==1.16.0", "torch<2.12,>=2.9"]


@pytest.mark.parametrize("name, specifier", [
    ("six; rm -rf /", "1.0"),
    ("six\n--index-url http://evil", "1.0"),
    ("six", "==1.0; python_version<'3'"),
    ("six", "==1.0\n--extra-index-url http://evil"),
    ("six @ http://evil/x.whl", "1.0"),
    ("$(id)", "1.0"),
    ("six", "`id`"),
])
def test_shell_and_requirement_injection_is_refused(name, specifier):
    with pytest.raises(Exception) as info:
        requirement_lines(spec({name: specifier}))
    # refused by the spec model (pydantic) before any line is written
    assert "validation error" in str(info.value) or isinstance(info.value, SpecError)


def test_index_url_must_be_a_plain_url():
    with pytest.raises(ValidationError):
        spec({"torch": "2.11.0"}, index_url="https://x\n--trusted-host evil")
    good = spec({"torch": "2.11.0"}, torch_cuda="cu130")
    assert source_args(good) == ["--extra-index-url", "https://download.pytorch.org/whl/cu130"]
    assert source_args(spec({"six": "1.16.0"}, torch_cuda="cu130")) == []  # no torch, no torch index


@pytest.mark.parametrize("url, why", [
    ("https://user:secret@pypi.example/simple", "credentials"),
    ("https://token@pypi.example/simple", "credentials"),
    ("https://pypi.example/simple/$HOME", "not allowed"),
    ("https://pypi.example/simple/`id`", "not allowed"),
    ("ftp://pypi.example/simple", "http(s)"),
    ("https:///simple", "http(s)"),
])
def test_index_urls_carry_no_credentials_and_nothing_a_shell_or_dockerfile_reads(url, why):
    for python in ({"sources": {"index_url": url}}, {"sources": {"extra_index_urls": [url]}}, {"index_url": url}):
        with pytest.raises(Exception) as info:
            spec({"six": "1.16.0"}, **python)
        assert why in str(info.value)


def test_sources_become_uv_and_pip_options_in_order():
    s = spec({"torch": "2.11.0", "six": "1.16.0"}, torch_cuda="cu130",
             sources={"find_links": ["/srv/wheels", "/srv/more"], "index_url": "https://mirror.example/simple",
                      "extra_index_urls": ["https://extra.example/simple"]})
    assert source_args(s) == ["--find-links", "/srv/wheels", "--find-links", "/srv/more",
                              "--index-url", "https://mirror.example/simple",
                              "--extra-index-url", "https://extra.example/simple",
                              "--extra-index-url", "https://download.pytorch.org/whl/cu130"]
    # inside an image the host's directories do not exist: their wheels travel in the wheelhouse
    assert source_args(s, "pip", local=False)[:2] == ["--index-url", "https://mirror.example/simple"]


def test_offline_reaches_no_index_and_downloads_no_torch():
    s = spec({"torch": "2.11.0"}, torch_cuda="cu130", sources={"find_links": ["/w"], "offline": True})
    assert source_args(s, "uv") == ["--find-links", "/w", "--no-index", "--offline"]
    assert source_args(s, "pip") == ["--find-links", "/w", "--no-index"]  # pip has no --offline


@pytest.mark.parametrize("sources, why", [
    ({"offline": True}, "needs find_links"),
    ({"offline": True, "find_links": ["/w"], "index_url": "https://x.example/simple"}, "reaches no index"),
    ({"find_links": [""]}, "at least 1"),
    ({"find_links": ["/w\n--index-url"]}, "control characters"),
])
def test_bad_sources_are_spec_errors(sources, why):
    with pytest.raises(Exception) as info:
        spec({"six": "1.16.0"}, sources=sources)
    assert why in str(info.value)


def test_inherited_packages_are_not_resolved_and_need_an_exact_pin():
    s = spec({"torch": "2.11.0", "six": "1.16.0"}, torch_cuda="cu130", inherit={"packages": ["Torch"]})
    assert s.python.inherited == {"torch": "2.11.0"}
    assert requirement_lines(s) == ["six==1.16.0"]
    assert source_args(s) == []  # torch is not downloaded: no torch index either
    for packages, why in (({"six": "1.16.0"}, "not in python.packages"), ({"torch": ">=2.9"}, "exact pin")):
        with pytest.raises(Exception) as info:
            spec(packages, inherit={"packages": ["torch"]})
        assert why in str(info.value)


def test_the_lock_records_where_each_package_came_from():
    lock = "\n".join([
        inherited_line("torch", "2.11.0", "/opt/torch/.venv/bin/python3"),
        inherited_line("nvidia-nccl-cu13", "2.28.9", "/opt/torch/.venv/bin/python3"),
        "six==1.16.0 \\", "    --hash=sha256:8abb", "    # from file:///srv/wheels",
        "idna==3.20 \\", "    --hash=sha256:a7db", "    # from https://pypi.org/simple", ""])
    assert lock_sources(lock) == {"torch": "inherited from /opt/torch/.venv/bin/python3",
                                  "nvidia-nccl-cu13": "inherited from /opt/torch/.venv/bin/python3",
                                  "six": "file:///srv/wheels", "idna": "https://pypi.org/simple"}
    assert inherited_versions(lock) == {"torch": "2.11.0", "nvidia-nccl-cu13": "2.28.9"}
    assert inherited_python(lock) == "/opt/torch/.venv/bin/python3"
    assert locked_versions(lock) == {"six": "1.16.0", "idna": "3.20"}  # installers skip the comments


def test_an_inherited_line_never_carries_a_newline_into_the_lock():
    from envmgr.errors import BackendError

    with pytest.raises(BackendError):
        inherited_line("torch", "2.11.0", "/opt/x\n--index-url http://evil/bin/python")


def test_locked_versions_reads_uv_compile_output():
    lock = ("nvidia-cuda-nvcc==13.0.88 \\\n    --hash=sha256:56fe \\\n    --hash=sha256:7c3a\n"
            "    # via -r req.in\nPyYAML==6.0.3 ; python_version >= '3.8' \\\n    --hash=sha256:aa\n"
            "torch[opt]==2.11.0+cu130\n")
    assert locked_versions(lock) == {"nvidia-cuda-nvcc": "13.0.88", "pyyaml": "6.0.3", "torch": "2.11.0+cu130"}
