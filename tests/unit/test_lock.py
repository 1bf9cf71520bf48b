"""Spec values reach uv only as validated requirement lines; lock parsing."""

from __future__ import annotations

import pytest

from envmgr.errors import SpecError
from envmgr.lock import index_args, locked_versions, requirement_lines
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
    with pytest.raises(Exception):
        spec({"torch": "2.11.0"}, index_url="https://x\n--trusted-host evil")
    good = spec({"torch": "2.11.0"}, torch_cuda="cu130")
    assert index_args(good) == ["--extra-index-url", "https://download.pytorch.org/whl/cu130"]
    assert index_args(spec({"six": "1.16.0"}, torch_cuda="cu130")) == []  # no torch, no torch index


def test_locked_versions_reads_uv_compile_output():
    lock = ("nvidia-cuda-nvcc==13.0.88 \\\n    --hash=sha256:56fe \\\n    --hash=sha256:7c3a\n"
            "    # via -r req.in\nPyYAML==6.0.3 ; python_version >= '3.8' \\\n    --hash=sha256:aa\n"
            "torch[opt]==2.11.0+cu130\n")
    assert locked_versions(lock) == {"nvidia-cuda-nvcc": "13.0.88", "pyyaml": "6.0.3", "torch": "2.11.0+cu130"}
