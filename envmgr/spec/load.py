"""Load a spec file: YAML -> ``extends:`` chain -> deep merge -> validation.

Merge rules (child over parent): mappings merge key by key, a ``null`` in the child
deletes the parent's key, anything else (scalars, lists) replaces.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from envmgr.errors import ExtendsError, SpecError, SpecProblem
from envmgr.spec.models import API_VERSION, Spec
from envmgr.spec.source import Path_, Source, dotted, read_source

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
    spec = validate(source)
    return LoadedSpec(spec, path, tuple(chain), source)


def validate(source: Source) -> Spec:
    """Validate merged data; translate pydantic's errors to located ``SpecProblem``s."""
    data = source.data
    if data.get("apiVersion") != API_VERSION:
        file, line = source.locate(("apiVersion",))
        got = data.get("apiVersion")
        raise SpecError([SpecProblem(
            file, line, "apiVersion",
            "missing" if got is None else f"unsupported version {got!r}",
            expected=repr(API_VERSION), fix=f"start the file with `apiVersion: {API_VERSION}`")])
    try:
        return Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_problems(exc, source)) from None


# --- extends ---------------------------------------------------------------------------

def _merged_source(path: Path, seen: tuple[Path, ...]) -> tuple[Source, list[Path]]:
    resolved = path.resolve()
    if resolved in seen:
        cycle = " -> ".join(str(p) for p in (*seen, resolved))
        raise ExtendsError([SpecProblem(str(path), None, "extends", f"extends cycle: {cycle}",
                                        fix="remove one `extends:` of the cycle")])
    if len(seen) >= MAX_EXTENDS:
        raise ExtendsError([SpecProblem(str(path), None, "extends",
                                        f"more than {MAX_EXTENDS} levels of extends")])
    source = read_source(path)
    parent_name = source.data.get("extends")
    if parent_name is None:
        return source, [path]
    file, line = source.locate(("extends",))
    if not isinstance(parent_name, str) or not parent_name.strip():
        raise ExtendsError([SpecProblem(file, line, "extends", "must name a file",
                                        expected="a path relative to this spec, like cuda128.yaml")])
    parent_path = path.parent / parent_name
    if not parent_path.is_file():
        raise ExtendsError([SpecProblem(file, line, "extends",
                                        f"parent spec {str(parent_path)!r} not found",
                                        expected="an existing spec file, relative to this one",
                                        fix="fix the path or create the parent")])
    parent, chain = _merged_source(parent_path, (*seen, resolved))
    child = {k: v for k, v in source.data.items() if k != "extends"}
    lines = dict(parent.lines)
    lines.update(source.lines)
    return Source(deep_merge(parent.data, child), source.file, lines), [path, *chain]


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

_PATTERN_WORDS = {
    "^sm_": "a GPU arch like sm_90, sm_120 or sm_120a",
    "^--": "a long flag like --tp-size (lower case, dashes)",
    "^cu[": "a torch CUDA tag like cu128 or cu130",
    "^3\\.": "a Python version like 3.12",
    "^[0-9]+\\.": "a CUDA version like 12.8 or 13.0.2",
    "^[a-z0-9]([a-z0-9._-]{0,62}": "a lower-case name (letters, digits, . _ -)",
    "^[A-Za-z0-9]([A-Za-z0-9._-]*": "a Python package name (PEP 508), optionally with [extras]",
    "^[A-Za-z_][A-Za-z0-9_]*$": "an environment variable name (letters, digits, _)",
}

_TYPE_WORDS = {
    "string_type": "a string", "int_type": "a whole number", "int_parsing": "a whole number",
    "int_from_float": "a whole number", "float_type": "a number", "float_parsing": "a number",
    "bool_type": "true or false", "bool_parsing": "true or false", "dict_type": "a mapping",
    "list_type": "a list", "model_type": "a mapping", "model_attributes_type": "a mapping",
    "none_required": "null",
}


def _problems(exc: ValidationError, source: Source) -> list[SpecProblem]:
    groups: dict[tuple, list[dict]] = {}
    for err in exc.errors(include_url=False):
        real = _real_path(err["loc"], source.data)
        groups.setdefault(real, []).append(err)
    problems = []
    for real, errs in groups.items():
        file, line = source.locate(real)
        message, expected, fix = _describe(real, errs)
        problems.append(SpecProblem(file, line, dotted(real), message, expected, fix))
    problems.sort(key=lambda p: (p.file, p.line or 0, p.field))
    return problems


def _real_path(loc: tuple, data: Any) -> Path_:
    """The part of pydantic's ``loc`` that exists in the data (drops union member tags)."""
    out: list = []
    node = data
    for part in loc:
        if part == "[key]":
            break
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
    first = errs[0]
    kind = first["type"]
    given = _show(first.get("input"))
    if kind == "missing":
        desc = _field_description(path)
        return "required field is missing", desc or None, f"add `{path[-1]}:`"
    if kind == "extra_forbidden":
        key = str(path[-1])
        known = _field_names(path[:-1])
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        fix = f"did you mean {close[0]!r}?" if close else None
        return f"unknown key {key!r}", "one of: " + ", ".join(known) if known else None, fix
    if len(errs) > 1 and all(e["type"] in _TYPE_WORDS for e in errs):
        words = sorted({_TYPE_WORDS[e["type"]] for e in errs})
        return f"got {given}", " or ".join(words), None
    if kind == "literal_error":
        expected = first.get("ctx", {}).get("expected", "")
        return f"got {given}", f"one of {expected}", None
    if kind == "string_pattern_mismatch":
        pattern = first.get("ctx", {}).get("pattern", "")
        word = next((w for k, w in _PATTERN_WORDS.items() if pattern.startswith(k)), pattern)
        if first["loc"] and first["loc"][-1] == "[key]":
            return f"invalid name {given}", word, None
        return f"got {given}", word, None
    if kind == "value_error":
        msg = first["msg"].removeprefix("Value error, ")
        return msg, None, None
    if kind in _TYPE_WORDS:
        return f"got {given}", _TYPE_WORDS[kind], None
    return f"{first['msg']} (got {given})", None, None


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
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


def _field_description(path: Path_) -> str:
    parent = _model_at(path[:-1])
    if isinstance(parent, type) and issubclass(parent, BaseModel):
        field = parent.model_fields.get(str(path[-1]))
        if field is not None and field.description:
            return field.description
    return ""
