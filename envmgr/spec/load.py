"""Load a spec file: YAML -> ``extends:`` chain -> deep merge -> validation.

Merge rules (child over parent): mappings merge key by key, a ``null`` in the child
deletes the parent's key, anything else (scalars, lists) replaces.

Every problem is a ``SpecProblem``: the file and line where the offending value was
written (the parent's file for an inherited value), the dotted field, what was expected
and, where we can tell, what to do ("did you mean 'segment'?", "put it in quotes").
A model validator can point at one of its fields by starting its message with
``field: `` (``select: '13.0' is not one of the toolkits``).
"""

from __future__ import annotations

import datetime
import difflib
import hashlib
import json
import os
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from envmgr.errors import ExtendsError, SpecError, SpecProblem
from envmgr.spec import models
from envmgr.spec.models import API_VERSION, Spec
from envmgr.spec.source import MAX_BYTES, Path_, Source, dotted, read_source

MAX_EXTENDS = 16


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec and where its values came from."""

    spec: Spec
    path: Path
    chain: tuple[Path, ...]  # this file first, then its parents
    source: Source  # merged data and lines (file, line) per field path

    @property
    def digest(self) -> str:
        """Content hash of the merged, validated spec (independent of layout and comments)."""
        canonical = json.dumps(self.spec.model_dump(mode="json", exclude={"extends"}),
                               sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def locate(self, path: Path_) -> str:
        file, line = self.source.locate(path)
        return f"{file}:{line}" if line else file


def load_spec(path: str | Path) -> LoadedSpec:
    """Load, merge and validate a spec file, or raise ``SpecError`` listing every problem."""
    path = Path(path)
    source, chain = _merged_source(path, ())
    spec = _with_absolute_paths(validate(source), source)
    return LoadedSpec(spec, path, tuple(chain), source)


def _with_absolute_paths(spec: Spec, source: Source) -> Spec:
    """A relative wheel directory is relative to the spec file that names it (as ``extends:``
    is), made absolute here so that every step, record and plan reads the same directory."""
    links = spec.python.sources.find_links
    if not links:
        return spec
    absolute = []
    for index, link in enumerate(links):
        file, _ = source.locate(("python", "sources", "find_links", index))
        absolute.append(os.path.abspath(Path(file).parent / Path(link).expanduser()))
    sources = spec.python.sources.model_copy(update={"find_links": absolute})
    return spec.model_copy(update={"python": spec.python.model_copy(update={"sources": sources})})


def validate(source: Source) -> Spec:
    """Validate merged data; translate pydantic's errors to located ``SpecProblem``s."""
    data = source.data
    if data.get("apiVersion") != API_VERSION:
        file, line = source.locate(("apiVersion",))
        got = data.get("apiVersion")
        raise SpecError([SpecProblem(
            file, line, "apiVersion",
            "required field is missing" if got is None else f"unsupported version {_show(got)}",
            expected=repr(API_VERSION), fix=f"start the file with `apiVersion: {API_VERSION}`")])
    try:
        return Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_problems(exc, source)) from None


# --- extends ---------------------------------------------------------------------------

def _merged_source(path: Path, seen: tuple[Path, ...],
                   extended_at: tuple[str, int | None] | None = None) -> tuple[Source, list[Path]]:
    """``path`` merged over its parents; ``extended_at`` is the file:line of the ``extends:``
    that named ``path``, for a parent. A parent must be an envmgr spec before anything of it
    is shown: ``extends: /etc/shadow`` says so there, without quoting one line of the file."""
    try:
        source = read_source(path)
    except SpecError:
        if extended_at is None or _declares_api_version(path):
            raise  # the user's own (broken) spec: its problems help
        raise _not_a_spec(path, extended_at) from None
    if extended_at is not None and source.data.get("apiVersion") != API_VERSION:
        raise _not_a_spec(path, extended_at)
    parent_name = source.data.get("extends")
    if parent_name is None:
        return source, [path]
    file, line = source.locate(("extends",))

    def problem(message: str, **more: str) -> ExtendsError:
        return ExtendsError([SpecProblem(file, line, "extends", message, **more)])

    if not isinstance(parent_name, str) or not parent_name.strip():
        raise problem(f"got {_show(parent_name)}",
                      expected="the path of the parent spec, relative to this one, like cuda128.yaml")
    chain = (*seen, path)
    parent_path = path.parent / parent_name
    try:
        in_chain = parent_path.resolve() in {p.resolve() for p in chain}
        exists = parent_path.is_file()
    except (OSError, ValueError, RuntimeError) as exc:  # a NUL byte, a name too long, a symlink loop
        raise problem(f"cannot use {_show(parent_name)} as a path: {exc}") from None
    if in_chain:
        cycle = " -> ".join(str(p) for p in (*chain, parent_path))
        raise problem(f"extends cycle: {cycle}", fix="remove one `extends:` of the cycle")
    if len(chain) >= MAX_EXTENDS:
        raise problem(f"more than {MAX_EXTENDS} levels of extends")
    if not exists:
        raise problem(f"parent spec {str(parent_path)!r} not found",
                      expected="an existing spec file, relative to this one",
                      fix="fix the path or create the parent")
    parent, parents = _merged_source(parent_path, chain, extended_at=(file, line))
    return _overlay(parent, source), [path, *parents]


_API_LINE = re.compile(rb"^apiVersion:\s*[\"']?envmgr/", re.MULTILINE)


def _declares_api_version(path: Path) -> bool:
    """Whether a file that failed to parse at least says it is an envmgr spec."""
    try:
        with open(path, "rb") as f:
            return bool(_API_LINE.search(f.read(MAX_BYTES)))
    except (OSError, ValueError):
        return False


def _not_a_spec(parent: Path, extended_at: tuple[str, int | None]) -> ExtendsError:
    file, line = extended_at
    return ExtendsError([SpecProblem(
        file, line, "extends", f"{str(parent)!r} is not an envmgr spec (it does not start with "
        f"`apiVersion: {API_VERSION}`), so envmgr shows nothing of it",
        expected="a spec file, relative to this one (../ and absolute paths are allowed)",
        fix="point extends: at the parent spec")])


def _overlay(parent: Source, child: Source) -> Source:
    """``child`` merged over ``parent``; each value keeps the file:line where it was written."""
    data = deep_merge(parent.data, {k: v for k, v in child.data.items() if k != "extends"})
    lines = {}
    for path in _paths(data):
        where = child.lines.get(path) or parent.lines.get(path)
        if where:
            lines[path] = where
    return Source(data, child.file, lines)


def _paths(value: Any, path: Path_ = ()) -> typing.Iterator[Path_]:
    """Every path in plain data, the root first."""
    yield path
    if isinstance(value, (dict, list)):
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            yield from _paths(item, (*path, key))


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Child ``over`` merged onto ``base``: maps merge, ``None`` deletes, the rest replaces."""
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


# --- pydantic errors -> problems ---------------------------------------------------------

# Patterns matched whole first: the Docker and Ansible names share their first characters.
_EXACT_PATTERN_WORDS = {
    models.REPOSITORY_RE: "a docker repository name: lower-case path components like envmgr/cuda13 "
                          "(optionally host[:port]/ first), no tag",
    models.IMAGE_REF_RE: "a docker image reference like nvidia/cuda:13.0.2-devel-ubuntu24.04",
    models.GROUP_RE: "an Ansible group or host name (letters, digits, _ . -)",
}
_PATTERN_WORDS = {
    "^sm_": "a GPU arch like sm_90, sm_120 or sm_120a",
    "^--": "a long flag like --tp-size (lower case, dashes)",
    "^cu[": "a torch CUDA tag like cu128 or cu130",
    "^3\\.": "a Python version like 3.12",
    "^[0-9]+\\.": "a CUDA version like 12.8 or 13.0.2",
    "^[a-z0-9]([a-z0-9._-]{0,62}": "a lower-case name (letters, digits, . _ -)",
    "^[A-Za-z0-9]([A-Za-z0-9._-]*": "a Python package name (PEP 508), optionally with [extras]",
    "^[A-Za-z_][A-Za-z0-9_]*$": "an environment variable name (letters, digits, _)",
    "^https?://": "an http(s) URL without spaces",
    "^[0-9]{1,3}%$": "a percentage like '25%'",
}

# What each pydantic type error expects, in the order a list of them is written.
_TYPE_WORDS = {
    "bool_type": "true/false", "bool_parsing": "true/false",
    "int_type": "a whole number", "int_parsing": "a whole number", "int_from_float": "a whole number",
    "float_type": "a number", "float_parsing": "a number", "string_type": "a string",
    "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
    "model_attributes_type": "a mapping", "none_required": "null",
}
_WORD_ORDER = list(dict.fromkeys(_TYPE_WORDS.values()))

_BOUNDS = {"greater_than_equal": ("ge", ">="), "greater_than": ("gt", ">"),
           "less_than_equal": ("le", "<="), "less_than": ("lt", "<")}

# A model validator points at one of its fields by starting its message with ``field: ``.
_FIELD_PREFIX = re.compile(r"^(\w+): (.*)$", re.DOTALL)


def _problems(exc: ValidationError, source: Source) -> list[SpecProblem]:
    groups: dict[Path_, list[dict]] = {}
    for error in exc.errors(include_url=False):
        real, located = _locate_error(dict(error), source.data)
        groups.setdefault(real, []).append(located)
    problems = []
    for real, errs in groups.items():
        file, line = source.locate(real)
        message, expected, fix = _describe(real, errs)
        problems.append(SpecProblem(file, line, dotted(real), message, expected, fix))
    problems.sort(key=lambda p: (p.file, p.line or 0, p.field))
    return problems


def _locate_error(err: dict, data: Any) -> tuple[Path_, dict]:
    """The path in the data that ``err`` is about, and ``err`` with a field prefix consumed."""
    real = _real_path(err["loc"], data)
    match = _FIELD_PREFIX.match(err["msg"].removeprefix("Value error, "))
    if err["type"] == "value_error" and match:
        node = _value_at(data, real)
        if isinstance(node, dict) and match[1] in node:
            return (*real, match[1]), {**err, "msg": match[2]}
    return real, err


def _value_at(data: Any, path: Path_) -> Any:
    try:
        for part in path:
            data = data[part]
    except (KeyError, IndexError, TypeError):
        return None
    return data


def _real_path(loc: tuple, data: Any) -> Path_:
    """The part of pydantic's ``loc`` that exists in the data (drops union member tags)."""
    out: list = []
    node = data
    for part in loc:
        if part == "[key]" and not (isinstance(node, dict) and part in node):
            break  # pydantic's marker for "a key of this mapping" (unless a key is named so)
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str) and not _is_union_tag(part):
            out.append(part)  # a missing key: still name it
            break
        else:
            break
        out.append(part)
    return tuple(out)


def _is_union_tag(part: str) -> bool:
    """pydantic names union members in ``loc`` ('bool', 'int', 'function-after[...]')."""
    return part in {"bool", "int", "float", "str", "none"} or "[" in part


def _describe(path: Path_, errs: list[dict]) -> tuple[str, str | None, str | None]:
    """(message, expected, fix) for the errors pydantic reported about one field."""
    # Of a union's errors, a validator's own message says most (a string with a NUL is not
    # "not a valid boolean").
    first = next((e for e in errs if e["type"] == "value_error"), errs[0])
    kind, ctx, value = first["type"], first.get("ctx") or {}, first.get("input")
    got = f"got {_show(value)}"
    if kind == "missing":
        parent = f" under `{dotted(path[:-1])}`" if len(path) > 1 else ""
        return "required field is missing", _field_description(path), f"add `{path[-1]}:`{parent}"
    if kind == "extra_forbidden":
        key, known = str(path[-1]), _field_names(path[:-1])
        return (f"unknown key {key!r}", "one of: " + ", ".join(known) if known else None,
                _did_you_mean(key, known))
    if kind == "value_error":
        return first["msg"].removeprefix("Value error, "), None, None
    if any(e["type"] == "finite_number" for e in errs):
        return got, "a finite number", "write a number (YAML reads .inf and .nan as floats)"
    words = [_TYPE_WORDS.get(e["type"]) for e in errs]
    if all(words):
        quote = words == ["a string"] and not isinstance(value, (str, list, dict, type(None)))
        return got, _join([w for w in words if w]), "put it in quotes so that YAML reads it as a string" if quote else None
    if kind in _BOUNDS:
        key, sign = _BOUNDS[kind]
        bound = f"{ctx[key]:g}" if isinstance(ctx[key], float) else ctx[key]
        return got, f"a number {sign} {bound}", None
    if kind == "too_short":
        return got, f"at least {ctx['min_length']} item" + ("s" if ctx["min_length"] > 1 else ""), None
    if kind == "too_long":
        count = len(value) if isinstance(value, (list, dict)) else "more"
        return (f"{count} entries is more than envmgr accepts", f"at most {ctx['max_length']}",
                "no real stack needs that many; split it over specs that extend a common parent")
    if kind == "string_too_long":
        return f"{len(value or ''):,} characters ({_show(value)})", f"at most {ctx['max_length']} characters", None
    if kind == "literal_error":
        options = typing.get_args(_model_at(path))
        return got, ctx.get("expected"), _did_you_mean(value, [str(o) for o in options])
    if kind == "string_pattern_mismatch":
        pattern = ctx.get("pattern", "")
        word = _EXACT_PATTERN_WORDS.get(pattern) or next(
            (w for k, w in _PATTERN_WORDS.items() if pattern.startswith(k)), pattern)
        if first["loc"] and first["loc"][-1] == "[key]":
            return f"invalid name {_show(value)}", word, None
        return got, word, None
    return f"{first['msg']} ({got})", None, None


def _join(words: list[str]) -> str:
    """``['a string', 'true/false', 'a number']`` -> ``true/false, a number or a string``."""
    chosen = set(words)
    if "a number" in chosen:
        chosen.discard("a whole number")
    ordered = [w for w in _WORD_ORDER if w in chosen]
    return ordered[0] if len(ordered) == 1 else ", ".join(ordered[:-1]) + " or " + ordered[-1]


def _did_you_mean(word: Any, options: list[str]) -> str | None:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6) if isinstance(word, str) else []
    return f"did you mean {close[0]!r}?" if close else None


def _show(value: Any) -> str:
    """A value as the YAML author would recognise it."""
    if isinstance(value, (dict, list)):
        kind = "mapping" if isinstance(value, dict) else "list"
        return f"a {kind}" if value else f"an empty {kind}"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return f"the date {value.isoformat()}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _model_at(path: Path_) -> Any:
    """The annotation that ``path`` (in spec data) is validated against."""
    node: Any = Spec
    for part in path:
        node = _unwrap(node)
        if isinstance(node, type) and issubclass(node, BaseModel):
            field = node.model_fields.get(str(part))
            if field is None:
                return None
            node = field.annotation
        elif typing.get_origin(node) is dict:
            node = typing.get_args(node)[1]
        elif typing.get_origin(node) is list:
            node = typing.get_args(node)[0]
        else:
            return None
    return _unwrap(node)


def _unwrap(node: Any) -> Any:
    """Strip Optional[...] and Annotated[...] down to the model or container inside."""
    while True:
        origin = typing.get_origin(node)
        if origin is typing.Annotated:
            node = typing.get_args(node)[0]
            continue
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(node) if a is not type(None)]
            models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
            if models or len(args) == 1:
                node = (models or args)[0]
                continue
        return node


def _field_names(path: Path_) -> list[str]:
    model = _model_at(path)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return list(model.model_fields)
    return []


def _field_description(path: Path_) -> str | None:
    """The field's description, phrased to follow "expected" ("Short name" -> "short name")."""
    parent = _model_at(path[:-1])
    if isinstance(parent, type) and issubclass(parent, BaseModel):
        field = parent.model_fields.get(str(path[-1]))
        text = field.description if field is not None else None
        if text:
            return text[0].lower() + text[1:] if text[1:2].islower() else text
    return None
