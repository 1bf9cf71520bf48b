"""Property tests: whatever the text, loading a spec ends in a spec or a located ``SpecError``.

(a) random text, random bytes, YAML-looking noise and damaged copies of a real spec go
    through ``parse_source`` + ``validate`` and raise nothing but ``EnvmgrError``s;
(b) the data of specs/cuda128.yaml, randomly mutated (keys deleted, renamed, inserted,
    values replaced by random JSON-like data), dumped to YAML and loaded from a file,
    either loads or raises a ``SpecError`` whose problems all carry a message and the
    line where the offending key is written;
(c) whatever text is put into any text field of the spec model (each hostile character in
    each field, and random text in one or two at once), the spec is refused by validation or
    its Dockerfile renders: the renderer never refuses what validation accepted (issue 24).
"""

from __future__ import annotations

import copy
import re
import types
import typing
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from test_dockerfile import instructions  # the shape of a rendered Dockerfile (tests/unit)

from envmgr.errors import EnvmgrError, SpecError, UsageError
from envmgr.spec import load_spec
from envmgr.spec.load import validate
from envmgr.spec.models import Spec
from envmgr.spec.source import dotted, parse_source

SPECS = Path(__file__).resolve().parents[2] / "specs"
SPEC_TEXT = (SPECS / "cuda128.yaml").read_text()
SPEC_DATA = yaml.safe_load(SPEC_TEXT)

YAML_LINE_BREAK = re.compile(r"\r\n|[\r\n\x85\u2028\u2029]")
FAST = settings(max_examples=250, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def parse_and_validate(text: str) -> None:
    """The property of (a): a spec, or an ``EnvmgrError`` that says something."""
    try:
        validate(parse_source(text, "t.yaml"))
    except SpecError as exc:
        assert exc.problems
        for problem in exc.problems:
            assert problem.file == "t.yaml" and problem.message
            assert problem.line is None or 1 <= problem.line <= len(YAML_LINE_BREAK.split(text)) + 1
    except EnvmgrError as exc:
        assert str(exc)


# --- (a) text ----------------------------------------------------------------------------------

YAML_TOKENS = st.sampled_from([
    ":", ": ", "-", "- ", "?", "[", "]", "{", "}", ",", "&a", "*a", "&b", "*b", "!", "!!",
    "!!str", "!!int", "!!bool", "!!map", "!!python/name:os.system", "|", ">", "'", '"', "%YAML",
    "#", "\n", "\n  ", "\n    ", "\t", " ", "<<", "<< : *a", "---", "...", "~", "null", "true",
    "1e3", "0x1f", "12.8", "2024-01-01", "apiVersion", "envmgr/v1", "metadata", "name", "x",
    "hardware", "gpu", "arch", "sm_90", "cuda", "toolkits", "\\", "\x00", "\x85", "\ufeff",
])
yamlish = st.lists(YAML_TOKENS | st.text(max_size=3), max_size=40).map("".join)


@FAST
@given(st.text())
def test_random_text(text: str) -> None:
    parse_and_validate(text)


@FAST
@given(st.binary())
def test_random_bytes(data: bytes) -> None:
    parse_and_validate(data.decode("utf-8", errors="replace"))


@FAST
@given(yamlish)
def test_yaml_looking_noise(text: str) -> None:
    parse_and_validate(text)


@FAST
@given(st.data())
def test_damaged_real_spec(data: st.DataObject) -> None:
    text = SPEC_TEXT
    for _ in range(data.draw(st.integers(1, 3))):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 20)))
        text = text[:start] + data.draw(yamlish) + text[end:]
    parse_and_validate(text)


def test_invalid_utf8_file(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_bytes(b"apiVersion: envmgr/v1\nmetadata: {name: \xff\xfe}\n")
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "s.yaml")
    (problem,) = info.value.problems
    assert (problem.line, problem.message) == (2, "not UTF-8: byte 0xff at column 18")
    assert problem.fix == "save the file as UTF-8"


# --- (b) mutated valid specs ------------------------------------------------------------------

def _field_names(model: type = Spec) -> set[str]:
    """Every field name of the spec models, to insert keys that are sometimes right."""
    names = set(model.model_fields)
    for info in model.model_fields.values():
        for inner in _model_types(info.annotation):
            names |= _field_names(inner)
    return names


def _model_types(annotation: Any) -> list[type]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _model_types(arg)]


KNOWN_KEYS = sorted(_field_names())
# ... and the hostile text of test_injection (templates, shell, Dockerfile lines, URL parts)
awkward = st.sampled_from(["sm_90", "12.8", "cu128", "--tp-size", "3.12", ".", "x\x00", "a" * 300,
                           "{{ lookup('pipe', 'id') }}", "$(id)", "a\nRUN id", "?base=x&y=1", "#f", "..",
                           "/etc/shadow", ".inf", "1e400", "9" * 5000])
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12) | awkward
json_like = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
new_keys = st.sampled_from(KNOWN_KEYS) | st.text(max_size=12)


def paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Every path below the root of plain data."""
    if not isinstance(value, (dict, list)):
        return []
    out = []
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        out.append((*path, key))
        out += paths(item, (*path, key))
    return out


def parent_of(data: Any, path: tuple) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


def typo(key: str) -> st.SearchStrategy[str]:
    """A near miss of ``key``: one character dropped, doubled or swapped."""
    if len(key) < 2:
        return st.just(key + "x")
    return st.integers(0, len(key) - 2).flatmap(lambda i: st.sampled_from([
        key[:i] + key[i + 1:], key[:i] + key[i] + key[i:], key[:i] + key[i + 1] + key[i] + key[i + 2:],
    ]))


def mutate(data: st.DataObject, spec: dict) -> None:
    """One random change, in place."""
    path = data.draw(st.sampled_from(paths(spec)))
    parent, last = parent_of(spec, path), path[-1]
    action = data.draw(st.sampled_from(["delete", "replace", "rename", "insert"]))
    if action == "delete":
        del parent[last]
    elif action == "replace":
        parent[last] = data.draw(json_like)
    elif action == "rename" and isinstance(parent, dict):
        name = data.draw(typo(last) | new_keys)
        parent[name] = parent.pop(last)
    elif action == "insert":
        target = parent if isinstance(parent, dict) else spec
        target[data.draw(new_keys)] = data.draw(json_like)


SIMPLE_KEY = re.compile(r"^[A-Za-z_-][\w.-]*\Z", re.ASCII)  # \Z: "$" lets a key end in a newline


@pytest.mark.slow
@FAST
@given(st.data())
def test_mutated_spec_loads_or_explains(tmp_path_factory: pytest.TempPathFactory,
                                        data: st.DataObject) -> None:
    spec = copy.deepcopy(SPEC_DATA)
    for _ in range(data.draw(st.integers(1, 3))):
        mutate(data, spec)
    text = yaml.safe_dump(spec, sort_keys=False, allow_unicode=data.draw(st.booleans()))
    file = tmp_path_factory.mktemp("mutated") / "spec.yaml"
    file.write_text(text, encoding="utf-8")
    try:
        loaded = load_spec(file)
    except SpecError as exc:
        event(f"SpecError, {len(exc.problems)} problem(s)" if len(exc.problems) < 3 else "SpecError, 3+")
        check_problems(exc, file, spec, text)
    else:
        event("loads")
        assert len(loaded.digest) == 64
        use(loaded.spec)


def use(spec) -> None:
    """What a loaded spec feeds (a Dockerfile, a backend URL, server argv, the redactor, the
    compat rules, a plan) takes it without an exception: validation let nothing through
    that a later stage cannot handle."""
    from envmgr.bench.command import server_command
    from envmgr.builders.dockerfile import render_dockerfile
    from envmgr.compat import evaluate
    from envmgr.plan import plan, state_from_spec
    from envmgr.secrets import Redactor
    from envmgr.targets.urls import make_url, split_url

    render_dockerfile(spec, base_image="envmgr/base:bookworm", lock_name="lock.txt", wheelhouse=False,
                      envmgr_version="0", spec_digest="0" * 64)
    split_url(make_url(spec.realize.backend, spec.realize.docker.tag or spec.realize.venv.path or spec.realize.ansible.group))
    Redactor.for_spec(spec).data(spec.model_dump(mode="json"))
    evaluate(spec)
    plan(state_from_spec(spec), spec)
    for config in spec.benchmarks.configs if spec.benchmarks else ():
        try:
            server_command(spec.benchmarks, config, "/venv/bin/python")
        except UsageError:  # e.g. --model-path among the flags: a message, not a crash
            pass


def check_problems(exc: SpecError, file: Path, spec: dict, text: str) -> None:
    lines = text.splitlines()
    by_field: dict[str, list[tuple]] = {}
    for path in paths(spec):
        by_field.setdefault(dotted(path), []).append(path)
    for problem in exc.problems:
        assert problem.message.strip(), exc
        if problem.file != str(file):  # an `extends:` the mutation wrote, naming another file
            assert Path(problem.file).exists(), exc
            continue
        assert problem.line is not None and 1 <= problem.line <= len(lines), exc
        written = by_field.get(problem.field, [])
        if len(written) == 1 and isinstance(written[0][-1], str) and SIMPLE_KEY.match(written[0][-1]):
            # the field is in the file: the problem must point at the line where its key is
            event("line of a written key checked")
            assert written[0][-1] in lines[problem.line - 1], (problem, lines[problem.line - 1])


# --- (c) what validation accepts, the Dockerfile renderer takes -------------------------------

def text_fields(model: type[BaseModel] = Spec, path: tuple = ()) -> list[tuple]:
    """The path of every text the spec model takes: its str fields, the keys and values of its
    mappings (ANY: the mapping's first entry), the first item of its lists, in every sub-model."""
    return [p for name, info in model.model_fields.items() for p in _text_paths(info.annotation, (*path, name))]


def _text_paths(annotation: Any, path: tuple) -> list[tuple]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return text_fields(annotation, path)
    if annotation is str:
        return [path]
    if origin is typing.Annotated:
        return _text_paths(args[0], path)
    if origin in (typing.Union, types.UnionType):
        return list(dict.fromkeys(p for arg in args for p in _text_paths(arg, path)))
    if origin is dict:
        return _text_paths(args[0], (*path, KEY)) + _text_paths(args[1], (*path, ANY))
    if origin is list:
        return _text_paths(args[0], (*path, 0))
    return []


KEY = "<key>"  # in a path: the mapping's first key itself
ANY = "<any>"  # in a path: the value of the mapping's first entry

# A spec with every part the image renders from: index URLs, find-links, an inheriting base
# interpreter, a docker backend, env, flags and a pip toolkit.
RENDERED = {
    "apiVersion": "envmgr/v1",
    "metadata": {"name": "render", "description": "d", "version": "1"},
    "hardware": {"gpu": {"arch": "sm_90", "model": "H200"}},
    "driver": {"version": ">=580"},
    "cuda": {"toolkits": [{"version": "13.0", "source": "pip", "prefix": "/usr/local/cuda-13.0"}]},
    "python": {
        "version": "3.12", "torch_cuda": "cu130", "index_url": "https://download.example/whl/cu130",
        "packages": {"torch": "2.11.0", "six": "1.16.0"},
        "sources": {"find_links": ["/opt/wheels"], "index_url": "https://pypi.example/simple",
                    "extra_index_urls": ["https://extra.example/simple"]},
        "inherit": {"python": "/opt/torch/.venv/bin/python3", "packages": ["torch"]},
    },
    "env": {"ENVMGR_X": "1"},
    "secrets": {"ENVMGR_X": False},
    "realize": {"backend": "docker",
                "docker": {"base_image": "nvidia/cuda:13.0.2-devel-ubuntu24.04", "tag": "envmgr/render"},
                "venv": {"path": "/opt/envmgr/render"},
                "ansible": {"inventory": "hosts.yml", "group": "gpus", "serial": "25%"}},
    "probes": {"required": ["gpu"]},
    "benchmarks": {"model_path": "/models/m", "server_flags": {"--tp-size": 1},
                   "configs": {"baseline": {"flags": {"--port": 30000}, "env": {"ENVMGR_X": "1"}}},
                   "load": {"dataset_path": "/data/d.json"}},
}
TEXT_FIELDS = text_fields()

# What a shell, a Dockerfile, a URL or a YAML reader may read as syntax, and characters that end
# or hide a line.
SYNTAX = list("$`\\\"'{}()[]<>|&;*?#%!~=:, \t\n\r\x00\x0b\x0c\x1b\x7f\x85\x9b\u2028\u2029\ufeff\u202e")
hostile_text = st.one_of(
    st.sampled_from(SYNTAX),
    st.sampled_from(["$HOME", "${PATH}", "$(id)", "`id`", "a\nRUN id", '"]', "{{ x }}", "%24HOME", "..", "-rf",
                     "--x", ""]),
    st.lists(st.sampled_from(SYNTAX) | st.characters(), max_size=12).map("".join),
    st.text(max_size=20),
)
# ... put into what the field held (so that it often still passes for one), or behind what such
# a field wants in front (an absolute path, a URL, a name)
PREFIXES = ["", "/", "/opt/", "https://pypi.example/", "https://pypi.example/simple?", "envmgr/", "sm_90",
            "ENVMGR_", "--", "cu1", "3.1", "1.", "x"]


def field_text(original: Any) -> st.SearchStrategy[str]:
    text = original if isinstance(original, str) else ""
    inserted = st.tuples(st.integers(0, len(text)), hostile_text).map(lambda p: text[:p[0]] + p[1] + text[p[0]:])
    return inserted | st.tuples(st.sampled_from(PREFIXES), hostile_text).map("".join)


def _put(data: dict, path: tuple, new: Callable[[Any], str]) -> None:
    """Replace the text at ``path`` (KEY last: the mapping's first key) by ``new(it)``, making
    the parents that are missing."""
    node: Any = data
    for part, after in zip(path, path[1:], strict=False):
        if after == KEY:
            break
        part = _existing(node, part)
        if not isinstance(node[part], (dict, list)):
            node[part] = [None] if after == 0 else {}
        node = node[part]
    if path[-1] == KEY:
        key = _existing(node, ANY)
        value = node.pop(key)
        node[new(key)] = value
    else:
        key = _existing(node, path[-1])
        node[key] = new(node[key])


def _existing(node: Any, part: Any) -> Any:
    """``part`` of ``node``, ANY being its first key (one is made when it has none)."""
    if isinstance(node, list):
        if not node:
            node.append(None)
        return part
    if part == ANY:
        if not node:
            node["x"] = None
        return next(iter(node))
    node.setdefault(part, None)
    return part


def renders_or_is_refused(spec_data: dict, wheelhouse_modes: tuple[bool, ...] = (False, True)) -> bool:
    """Issue 24: what the renderer refuses (a '$' in an exec-form argument, a value it cannot
    write), validation refuses first, at the field. Whether the spec was accepted."""
    from envmgr.builders.dockerfile import render_dockerfile

    try:
        spec = Spec.model_validate(spec_data)
    except ValidationError:
        return False
    for wheelhouse in wheelhouse_modes:
        text = render_dockerfile(spec, base_image=spec.realize.docker.base_image or "debian:bookworm",
                                 lock_name="lock.txt", wheelhouse=wheelhouse, envmgr_version="x",
                                 spec_digest="0" * 64)
        instructions(text)
    return True


def test_the_spec_every_field_is_changed_from_renders() -> None:
    assert renders_or_is_refused(copy.deepcopy(RENDERED))


# Each put into the middle of each text field: what a shell, the Dockerfile builder, JSON, YAML or
# a URL reads as syntax, and characters that break, hide or escape a line.
SNIPPETS = ["$", "${X}", "`", "\\", '"', "'", "\n", "\x00", "\x85", "\u2028", "\u202e", "\U000e0001", "é",
            " ", "#", "?", "{{ x }}", '"]\nRUN id']


@pytest.mark.parametrize("path", TEXT_FIELDS, ids=dotted)
def test_each_hostile_character_in_a_text_field_renders_or_is_refused(path: tuple) -> None:
    for snippet in SNIPPETS:
        spec_data = copy.deepcopy(RENDERED)

        def insert(original: Any, snippet: str = snippet) -> str:
            text = original if isinstance(original, str) else ""
            return text[:len(text) // 2] + snippet + text[len(text) // 2:]

        _put(spec_data, path, insert)
        renders_or_is_refused(spec_data, (False,))  # the mode with the index URLs in RUN


@settings(FAST, max_examples=200)
@given(st.data())
def test_a_spec_validation_accepts_renders_its_dockerfile(data: st.DataObject) -> None:
    """Random text in one or two text fields at once, with or without python.inherit."""
    spec_data = copy.deepcopy(RENDERED)
    if data.draw(st.booleans()):
        del spec_data["python"]["inherit"]
    for _ in range(data.draw(st.integers(1, 2))):
        path = data.draw(st.sampled_from(TEXT_FIELDS))
        _put(spec_data, path, lambda original, path=path: data.draw(field_text(original), label=dotted(path)))
    event("accepted" if renders_or_is_refused(spec_data) else "refused")


def test_every_text_field_of_the_model_is_mutated() -> None:
    """The property above reaches every text the spec takes, the renderer's inputs among them."""
    shown = {dotted(path) for path in TEXT_FIELDS}
    for field in ("python.sources.find_links[0]", "python.inherit.python", "realize.docker.base_image",
                  "realize.docker.tag", "env.<any>", "env.<key>", "metadata.description", "metadata.name",
                  "python.index_url", "python.sources.extra_index_urls[0]", "cuda.toolkits[0].prefix",
                  "benchmarks.configs.<any>.env.<any>", "python.packages.<key>", "python.packages.<any>"):
        assert field in shown, sorted(shown)
