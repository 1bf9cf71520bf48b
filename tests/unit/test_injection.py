"""Spec values are data, never code (issue 12): every field that reaches a Dockerfile, a
backend URL or an argv list, given hostile text, is either refused at load with its file:line
or arrives at its sink as exactly the value written. (The Ansible sink: test_ansible_extravars.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from envmgr.bench.command import server_command
from envmgr.bench.load import load_argv
from envmgr.builders import open_builder
from envmgr.builders.dockerfile import render_dockerfile
from envmgr.errors import SpecError, UsageError
from envmgr.spec import load_spec
from envmgr.targets.urls import make_url, split_url

HOSTILE = [
    "{{ lookup('pipe', 'touch /tmp/envmgr-pwned') }}", "{% raw %}x", "$(touch /tmp/envmgr-pwned)",
    "`touch /tmp/envmgr-pwned`", "; rm -rf /", "a\nRUN touch /tmp/envmgr-pwned", "a\rb", "nul\x00byte",
    '"quoted"', "it's", "back\\slash", "?base=evil:1&wheelhouse=1", "x#frag", "../../etc/passwd",
    "%0aRUN x", "${PATH}", "line\u2028sep", "--privileged", "-rf", " spaced out ",
]


def base() -> dict:
    return {
        "apiVersion": "envmgr/v1", "metadata": {"name": "inj", "description": "d"},
        "hardware": {"gpu": {"arch": "sm_90"}},
        "python": {"version": "3.11", "packages": {"six": "1.16.0"}},
        "env": {"SAFE": "1"},
        "realize": {"docker": {"tag": "envmgr/inj", "base_image": "envmgr/base:bookworm"}},
        "benchmarks": {"model_path": "/models/m", "server_flags": {"--served-model-name": "m"},
                       "configs": {"a": {}}, "load": {"dataset": "sharegpt", "dataset_path": "/d.json"}},
    }


def with_value(path: tuple, value: str) -> dict:
    data = base()
    node = data
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return data


def load(tmp_path: Path, data: dict):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data, allow_unicode=True))
    return load_spec(spec)


def dockerfile(loaded) -> str:
    return render_dockerfile(loaded.spec, base_image=loaded.spec.realize.docker.base_image or "envmgr/base:bookworm",
                             lock_name="lock.txt", wheelhouse=False, envmgr_version="0", spec_digest="d" * 64)


def skeleton(text: str) -> list[str]:
    """The instruction word of every line: an injected line changes it."""
    return [line.split(" ", 1)[0] for line in text.splitlines()]


def refused_or(tmp_path: Path, path: tuple, value: str):
    """The loaded spec, or None when the load refused the value with a located problem."""
    try:
        return load(tmp_path, with_value(path, value))
    except SpecError as exc:
        assert exc.problems and all(p.line for p in exc.problems), exc
        return None


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("path", [("env", "X"), ("metadata", "description")], ids=".".join)
def test_values_in_the_dockerfile_are_json_strings_on_their_own_instruction(tmp_path, path, value):
    loaded = refused_or(tmp_path, path, value)
    if loaded is None:
        assert any(ord(c) < 32 or c == "\u2028" for c in value)  # only control characters are refused
        return
    text = dockerfile(loaded)
    assert skeleton(text) == skeleton(dockerfile(load(tmp_path, with_value(path, "plain"))))
    quoted = json.dumps(value).replace("$", "\\$")  # a JSON string; $ escaped: no substitution
    assert (f"X={quoted}" if path[0] == "env" else f'"org.opencontainers.image.description"={quoted}') in text
    assert "/tmp/envmgr-pwned" not in re.sub(r'"(?:[^"\\]|\\.)*"', "", text)  # only inside JSON strings


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("path,argv_of", [
    (("benchmarks", "model_path"), lambda b, c, l: c.argv),
    (("benchmarks", "server_flags", "--served-model-name"), lambda b, c, l: c.argv),
    (("benchmarks", "load", "dataset_path"), lambda b, c, l: l),
], ids=["model_path", "flag-value", "dataset_path"])
def test_values_in_argv_are_one_item_each(tmp_path, path, argv_of, value):
    loaded = refused_or(tmp_path, path, value)
    if loaded is None:
        assert any(ord(c) < 32 or c == "\u2028" for c in value)
        return
    bench = loaded.spec.benchmarks
    command = server_command(bench, "a", "/venv/bin/python")
    argv = argv_of(bench, command, load_argv("/venv/bin/python", bench.load, command, "0.5.9"))
    assert value in argv  # one argument, exactly as written: no shell ever splits it


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("path,backend", [
    (("realize", "docker", "tag"), "docker"), (("realize", "ansible", "group"), "ansible"),
    (("realize", "venv", "path"), "venv"), (("realize", "docker", "base_image"), "docker"),
], ids=["docker.tag", "ansible.group", "venv.path", "docker.base_image"])
def test_values_in_backend_urls_cannot_add_or_change_parameters(tmp_path, path, backend, value):
    """The builder takes the spec's value as it is (never through a URL string); the URL of what
    it realizes, built from that value, gives it back with no parameter added."""
    data = with_value(path, value)
    data["realize"]["backend"] = backend
    if backend == "ansible":
        (tmp_path / "hosts.yml").write_text("all: {hosts: {a: {}}}\n")
        data["realize"]["ansible"]["inventory"] = "hosts.yml"
    try:
        loaded = load(tmp_path, data)
        builder = open_builder(loaded)
    except SpecError as exc:
        (problem,) = exc.problems
        assert problem.field == ".".join(path) and problem.line
        return
    except UsageError as exc:  # a value the spec allows but the backend refuses: said, not used
        assert value in str(exc) or repr(value) in str(exc)
        return
    held = {"tag": lambda: builder.settings.repository, "base_image": lambda: builder.settings.base,
            "group": lambda: builder.fleet.group, "path": lambda: builder.where}[path[-1]]()
    assert held == value
    scheme, where, params = split_url(make_url(backend, value))
    assert (scheme, where, params) == (backend, value, {})


def test_the_hostile_values_that_pass_are_the_harmless_ones(tmp_path):
    """At least the shell/template payloads load where free text is allowed: the tests above
    prove them inert rather than only refused."""
    passed = [v for v in HOSTILE if refused_or(tmp_path, ("env", "X"), v) is not None]
    assert "{{ lookup('pipe', 'touch /tmp/envmgr-pwned') }}" in passed and "$(touch /tmp/envmgr-pwned)" in passed


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["venv", "docker", "ansible"]), st.text(max_size=40),
       st.dictionaries(st.sampled_from(["base", "inventory", "installer"]), st.text(max_size=20), max_size=2))
def test_a_url_built_from_parts_gives_back_exactly_those_parts(scheme, path, params):
    assert split_url(make_url(scheme, path, **params)) == (scheme, path, params)
