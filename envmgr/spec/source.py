"""Read YAML into plain data plus the line of every value (for file:line errors).

Anything wrong with the text becomes a ``SpecError`` located at a line: bad syntax,
duplicate keys, values YAML cannot construct, unsupported tags, and hostile shapes
(deep nesting, recursive or exploding aliases) that would otherwise crash or hang
the parser. ``<<:`` merge keys work as in YAML 1.1: keys written in the mapping win,
then earlier merged mappings win over later ones.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from envmgr.datafiles import YAML_LOADER
from envmgr.errors import SpecError, SpecProblem

_Loader = YAML_LOADER

Path_ = tuple[str | int, ...]
MAX_DEPTH = 64  # deeper documents are hostile or broken, never a spec
MAX_NODES = 100_000  # a spec has a few hundred values; more means an alias bomb
MAX_BYTES = 2 * 1024 * 1024  # read no further: a big file is not a spec, and would be slow
_MERGE_TAG = "tag:yaml.org,2002:merge"
_COLLECTION_TAGS = {yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                    yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG}
_Pair = tuple[yaml.Node, yaml.Node]
_LINE_BREAK = re.compile(r"\r\n|[\r\n\x85\u2028\u2029]")  # what YAML counts as a new line


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
    """Read a YAML file; a missing, huge, non-UTF-8 file or bad YAML is a ``SpecError``."""
    name = str(path)
    try:
        data = read_at_most(path, MAX_BYTES + 1)  # /dev/zero or a FIFO with no writer must not hang us
    except FileNotFoundError:
        raise SpecError([SpecProblem(name, None, "", "file not found")],
                        hint="check the path") from None
    except (OSError, ValueError) as exc:  # a directory, no permission, a NUL in the name
        raise SpecError([SpecProblem(name, None, "", f"cannot read the file: {exc}")]) from None
    if len(data) > MAX_BYTES:
        raise SpecError([SpecProblem(name, None, "", f"the file is over {MAX_BYTES:,} bytes; envmgr reads "
                                     "specs up to that", fix="a spec is a few kilobytes (1000 benchmark "
                                     "configs are about 100 KB): is this the right file?")])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError([SpecProblem(name, line, "", f"not UTF-8: byte 0x{data[exc.start]:02x} at column "
                                     f"{column}", fix="save the file as UTF-8")]) from None
    return parse_source(text, name)


def read_at_most(path: Path, limit: int) -> bytes:
    """Up to ``limit`` bytes. Opened non-blocking, so that a FIFO nobody writes to opens at once
    (and then reads as empty), then read blocking: a pipe (``<(cat spec)``) still gives all of it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size < limit:
            chunk = os.read(fd, min(1 << 20, limit - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def parse_source(text: str, name: str) -> Source:
    """Parse YAML text; the top level must be a mapping."""
    try:
        _check_nesting(text, name)
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise SpecError([_syntax_problem(exc, text, name)],
                        hint="fix the YAML syntax at that line") from None
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
                                     f"the document is {_kind(data)}",
                                     expected="a mapping starting with `apiVersion: envmgr/v1`")])
    return Source(data, name, lines)


def _check_nesting(text: str, name: str) -> None:
    """Refuse deep nesting before composing: libyaml's composer recurses once per level
    (and kills the interpreter near 100k levels); its event parser does not recurse.

    Some libyaml builds stop at their own nesting limit first, with their own wording
    (PyYAML 6.0.4's does at 1000 flow levels). So when the C parser fails, the pure-Python
    parser, which has no such limit, counts again: envmgr's limit and message win, and the
    common path stays on the fast parser."""
    try:
        _count_depth(text, name, _Loader)
    except yaml.YAMLError as error:
        if _Loader is not yaml.SafeLoader:
            try:
                _count_depth(text, name, yaml.SafeLoader)  # raises envmgr's problem when too deep
            except yaml.YAMLError:
                pass  # the same syntax error, in the Python parser's words: report the C one
        raise error


def _count_depth(text: str, name: str, loader: type) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError([SpecProblem(name, event.start_mark.line + 1, "",
                                             f"nested more than {MAX_DEPTH} levels deep",
                                             fix="a spec is a few levels deep; check the brackets")])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _syntax_problem(exc: yaml.YAMLError, text: str, name: str) -> SpecProblem:
    """A PyYAML error as one located problem, without PyYAML's multi-line excerpt."""
    line, message, fix = None, str(exc), None
    if isinstance(exc, yaml.MarkedYAMLError) and (exc.problem_mark or exc.context_mark):
        line = (exc.problem_mark or exc.context_mark).line + 1
        message = exc.problem or exc.context or ""
        if exc.problem and exc.context and exc.context_mark and exc.context_mark.line + 1 != line:
            message += f" ({exc.context} at line {exc.context_mark.line + 1})"
        lines = _LINE_BREAK.split(text)
        indent = re.match(r"[ \t]*", lines[min(line, len(lines)) - 1])
        if indent is not None and "\t" in indent[0]:
            fix = "indent with spaces: YAML does not allow tabs"
    elif isinstance(exc, yaml.reader.ReaderError):
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        line = len(_LINE_BREAK.split(text[: max(text.find(char), 0)]))
        message = f"{exc.reason} (found U+{ord(char):04X})"
    return SpecProblem(name, line, "", f"not valid YAML: {message}", fix=fix)


class _Builder:
    """Turns a composed YAML node tree into dicts/lists/scalars, noting lines."""

    def __init__(self, name: str, lines: dict[Path_, tuple[str, int]]) -> None:
        self.name = name
        self.lines = lines
        self.problems: list[SpecProblem] = []
        self.constructor = yaml.constructor.SafeConstructor()
        self.nodes = 0
        self.building: set[int] = set()  # ids of the collections being built (alias recursion)

    def build(self, node: yaml.Node, path: Path_, depth: int = 0) -> Any:
        self.lines.setdefault(path, (self.name, node.start_mark.line + 1))
        self._count(node, path, 1)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        if node.tag not in _COLLECTION_TAGS:
            return self._problem(node, path, f"unsupported tag {_tag(node)}", fix="remove the tag")
        if id(node) in self.building:
            return self._problem(node, path, "recursive alias: this value contains itself")
        if depth > MAX_DEPTH:
            return self._problem(node, path, "nested too deeply through aliases")
        self.building.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path, depth)
            return [self.build(item, path + (i,), depth + 1) for i, item in enumerate(node.value)]
        finally:
            self.building.discard(id(node))

    def _scalar(self, node: yaml.ScalarNode, path: Path_) -> Any:
        try:
            return self.constructor.construct_object(node, deep=True)
        # PyYAML's constructors fail in many ways (KeyError for `!!bool x`, ValueError for `!!int x`)
        except (yaml.YAMLError, ValueError, TypeError, LookupError, OverflowError, AttributeError):
            return self._problem(node, path, f"cannot read {node.value!r} as {_tag(node)}",
                                 fix="write it in quotes to make it a string")

    def _mapping(self, node: yaml.MappingNode, path: Path_, depth: int) -> dict:
        own = [pair for pair in node.value if pair[0].tag != _MERGE_TAG]
        pairs = own + self._merged_pairs(node, path, {id(node)})
        out: dict[str, Any] = {}
        for index, (key_node, value_node) in enumerate(pairs):
            if not isinstance(key_node, yaml.ScalarNode):
                self._problem(key_node, path, "a key must be a plain string")
                continue
            key = key_node.value
            if key in out:
                if index < len(own):
                    self._problem(key_node, path + (key,), f"duplicate key {key!r}",
                                  fix="keep one of them")
                continue  # a merged key loses to the mapping's own keys and earlier merges
            self.lines[path + (key,)] = (self.name, key_node.start_mark.line + 1)
            out[key] = self.build(value_node, path + (key,), depth + 1)
        return out

    def _merged_pairs(self, node: yaml.MappingNode, path: Path_, seen: set[int]) -> list[_Pair]:
        """The pairs that ``<<:`` brings into ``node``, in order of precedence."""
        out: list[_Pair] = []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    self._problem(source, path, "`<<:` must name a mapping",
                                  fix="write `<<: *anchor` or `<<: [*a, *b]`")
                elif id(source) in seen or len(seen) > MAX_DEPTH:
                    self._problem(source, path, "recursive `<<:` merge")
                else:
                    self._count(source, path, len(source.value))
                    out += [pair for pair in source.value if pair[0].tag != _MERGE_TAG]
                    out += self._merged_pairs(source, path, seen | {id(source)})
        return out

    def _count(self, node: yaml.Node, path: Path_, nodes: int) -> None:
        """Stop at MAX_NODES values, blaming the top-level key whose aliases expand so far."""
        self.nodes += nodes
        if self.nodes > MAX_NODES:
            top = path[:1]
            line = self.lines.get(top, (self.name, node.start_mark.line + 1))[1]
            raise SpecError([SpecProblem(self.name, line, dotted(top), f"more than {MAX_NODES} values",
                                         fix="aliases expand to too much data; write it out")])

    def _problem(self, node: yaml.Node, path: Path_, message: str, fix: str | None = None) -> None:
        """Note a problem; the value it leaves is ``None``."""
        self.problems.append(SpecProblem(self.name, node.start_mark.line + 1, dotted(path),
                                         message, fix=fix))


def dotted(path: Path_) -> str:
    """``('python', 'packages', 'torch')`` -> ``python.packages.torch``; indices as ``[i]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _tag(node: yaml.Node) -> str:
    return node.tag.replace("tag:yaml.org,2002:", "!!")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {list: "a list", str: "a string", int: "a number", float: "a number",
            bool: "a boolean"}.get(type(value), f"a {type(value).__name__}")
