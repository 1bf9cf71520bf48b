"""Read YAML into plain data plus the line of every value (for file:line errors)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envmgr.errors import SpecError, SpecProblem

try:  # the C loader is several times faster; fall back where libyaml is absent
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Loader = yaml.SafeLoader

Path_ = tuple[str | int, ...]
MAX_DEPTH = 64  # deeper documents are hostile or broken, never a spec


@dataclass
class Source:
    """A YAML document as plain data, with where each value came from."""

    data: dict[str, Any]
    file: str
    lines: dict[Path_, tuple[str, int]] = field(default_factory=dict)

    def locate(self, path: Path_) -> tuple[str, int | None]:
        """File and line of ``path``, or of its nearest located ancestor."""
        for cut in range(len(path), -1, -1):
            hit = self.lines.get(tuple(path[:cut]))
            if hit:
                return hit
        return self.file, None


def read_source(path: Path) -> Source:
    """Read a YAML file; a missing file or bad YAML is a ``SpecError``."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([SpecProblem(name, None, "", "file not found")],
                        hint="check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([SpecProblem(name, None, "", f"cannot read the file: {exc}")]) from exc
    return parse_source(text, name)


def parse_source(text: str, name: str) -> Source:
    """Parse YAML text; the top level must be a mapping."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or str(exc)
        raise SpecError([SpecProblem(name, line, "", f"not valid YAML: {problem}")],
                        hint="fix the YAML syntax at that line") from None
    except yaml.YAMLError as exc:
        raise SpecError([SpecProblem(name, None, "", f"not valid YAML: {exc}")]) from None
    except RecursionError:
        raise SpecError([SpecProblem(name, None, "", "YAML nested too deeply")]) from None
    if node is None:
        raise SpecError([SpecProblem(name, 1, "", "the file is empty",
                                     expected="a mapping starting with `apiVersion: envmgr/v1`")])
    lines: dict[Path_, tuple[str, int]] = {}
    builder = _Builder(name, lines)
    data = builder.build(node, ())
    if builder.problems:
        raise SpecError(builder.problems)
    if not isinstance(data, dict):
        raise SpecError([SpecProblem(name, node.start_mark.line + 1, "",
                                     f"the document is a {_kind(data)}",
                                     expected="a mapping starting with `apiVersion: envmgr/v1`")])
    return Source(data, name, lines)


class _Builder:
    """Turns a composed YAML node tree into dicts/lists/scalars, noting lines."""

    def __init__(self, name: str, lines: dict[Path_, tuple[str, int]]) -> None:
        self.name = name
        self.lines = lines
        self.problems: list[SpecProblem] = []
        self.constructor = yaml.constructor.SafeConstructor()

    def build(self, node: yaml.Node, path: Path_, depth: int = 0) -> Any:
        self.lines.setdefault(path, (self.name, node.start_mark.line + 1))
        if depth > MAX_DEPTH:
            self._problem(node, path, "nested too deeply (or a recursive alias)")
            return None
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, path + (i,), depth + 1) for i, item in enumerate(node.value)]
        try:
            return self.constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            self._problem(node, path, f"cannot read this value: {exc}")
            return None

    def _mapping(self, node: yaml.MappingNode, path: Path_, depth: int) -> dict:
        try:
            self.constructor.flatten_mapping(node)  # resolves `<<:` merge keys
        except yaml.YAMLError as exc:
            self._problem(node, path, f"bad merge key: {exc}")
            return {}
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self._problem(key_node, path, "a key must be a plain string")
                continue
            key = key_node.value
            if key in out:
                self._problem(key_node, path + (key,), f"duplicate key {key!r}",
                              fix="keep one of them")
                continue
            self.lines[path + (key,)] = (self.name, key_node.start_mark.line + 1)
            out[key] = self.build(value_node, path + (key,), depth + 1)
        return out

    def _problem(self, node: yaml.Node, path: Path_, message: str, fix: str | None = None) -> None:
        self.problems.append(SpecProblem(self.name, node.start_mark.line + 1,
                                         dotted(path), message, fix=fix))


def dotted(path: Path_) -> str:
    """``('python', 'packages', 'torch')`` -> ``python.packages.torch``; indices as ``[i]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _kind(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(value), type(value).__name__)
