"""The knowledge base: rules and tables loaded from ``rules.yaml`` and checked.

The data is envmgr's own, so a malformed entry is a ``KnowledgeBaseError`` (a bug),
found by the test suite before any user sees it.
"""

from __future__ import annotations

import functools
from typing import Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from envmgr.datafiles import load_shipped, parse_yaml
from envmgr.errors import KnowledgeBaseError
from envmgr.severity import Severity

OPS = frozenset({
    "eq", "ne", "in", "not_in", "present", "absent", "not_matches",
    "version_in", "version_not_in", "version_lt", "version_ge", "version_ne",
    "lt", "le", "gt", "ge", "matches",
})
UNARY_OPS = frozenset({"present", "absent"})
# SGLang's kernel package: sglang-kernel from 0.5.10, sgl-kernel before
KERNEL_PACKAGES = ("sglang-kernel", "sgl-kernel")



class Clause(BaseModel):
    """``[fact, op, value]``; a value ``"$name"`` refers to another fact."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    fact: str
    op: str
    value: Any = None

    @property
    def ref(self) -> str | None:
        if isinstance(self.value, str) and self.value.startswith("$"):
            return self.value[1:]
        return None


class AnyOf(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    any: list["Condition"]


Condition = Union[Clause, AnyOf]


def _parse_condition(raw: Any) -> Any:
    if isinstance(raw, list):
        if len(raw) not in (2, 3) or not all(isinstance(x, str) for x in raw[:2]):
            raise ValueError(f"a clause is [fact, op] or [fact, op, value], got {raw!r}")
        op = raw[1]
        if op not in OPS:
            raise ValueError(f"unknown op {op!r} in {raw!r}; known: {sorted(OPS)}")
        if (op in UNARY_OPS) != (len(raw) == 2):
            raise ValueError(f"op {op!r} takes {'no' if op in UNARY_OPS else 'one'} value: {raw!r}")
        return Clause(fact=raw[0], op=op, value=raw[2] if len(raw) == 3 else None)
    if isinstance(raw, dict) and set(raw) == {"any"}:
        return AnyOf(any=[_parse_condition(c) for c in raw["any"]])
    raise ValueError(f"a condition is a [fact, op, value] list or {{any: [...]}}, got {raw!r}")


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]+$")
    severity: Severity
    scope: Literal["stack", "config"] = "stack"
    confirmed: bool = True
    requires: list[str] = Field(default_factory=list)
    when: list[Condition] = Field(min_length=1)
    message: str
    fix: str
    source: str
    at: str = ""
    note: str = ""
    predicts: list[str] = Field(default_factory=list, description="probes this rule says will fail")
    # the server starts, but the feature the config asks for stays off (a flag accepted and ignored)
    feature_off: str = Field("", description="the feature that stays off when this fires")
    # a warning (not sure enough for an error: it depends on the model, the host) whose case is
    # that the server stops: a config it fires for is expected to fail, so it counts as blocked
    stops: bool = Field(False, description="a warning that predicts the server stops")
    # a release boundary inside the range the wheels were read for that is no gate of their code
    # (an observation): why the wheel data cannot give it (tests/unit/test_release_data_is_read.py)
    observed: str = Field("", description="why a literal release boundary is not read from the wheels")
    # the flag change that clears it and keeps what the config asks for (advise tries it):
    # flag -> value template ("{world_size}"), true (bare), false (drop the flag)
    edit: dict[str, Any] = Field(default_factory=dict)

    @field_validator("edit")
    @classmethod
    def _edit_names_flags(cls, value: dict[str, Any]) -> dict[str, Any]:
        bad = [k for k in value if not str(k).startswith("--")]
        if bad:
            raise ValueError(f"edit: keys must be server flags (--name), not {bad}")
        return value

    @field_validator("when", mode="before")
    @classmethod
    def _conditions(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError("when: must be a list of conditions")
        return [_parse_condition(c) for c in value]

    @model_validator(mode="after")
    def _unconfirmed_is_not_error(self) -> "Rule":
        # FACTS.md: an unconfirmed fact is verified or left a warning, never an error.
        if not self.confirmed and self.severity == "error":
            raise ValueError(f"rule {self.id}: an unconfirmed rule cannot be an error")
        return self

    def facts(self) -> set[str]:
        """Every fact name this rule reads (for checking the data against the context)."""
        names = set(self.requires)

        def walk(conds: list[Condition]) -> None:
            for c in conds:
                if isinstance(c, AnyOf):
                    walk(c.any)
                else:
                    names.add(c.fact)
                    if c.ref:
                        names.add(c.ref)

        walk(self.when)
        return names


class KnowledgeBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tables: dict[str, dict[str, Any]]
    sources: dict[str, str]
    rules: list[Rule]

    @model_validator(mode="after")
    def _consistent(self) -> "KnowledgeBase":
        ids = [r.id for r in self.rules]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate rule ids: {dupes}")
        unknown = sorted({r.source for r in self.rules} - set(self.sources))
        if unknown:
            raise ValueError(f"rules cite unknown sources: {unknown}")
        return self

    def rule(self, rule_id: str) -> Rule:
        for r in self.rules:
            if r.id == rule_id:
                return r
        raise KeyError(rule_id)


AnyOf.model_rebuild()


def parse_knowledge_base(text: str, name: str = "rules.yaml") -> KnowledgeBase:
    try:
        data = parse_yaml(text)
        return KnowledgeBase.model_validate(data)
    except (yaml.YAMLError, ValidationError) as exc:
        raise KnowledgeBaseError(f"{name}: malformed knowledge base: {exc}",
                                 hint="this is a bug in envmgr's rule data") from exc


@functools.lru_cache(maxsize=1)
def default_knowledge_base() -> KnowledgeBase:
    """The rules shipped with envmgr (``envmgr/compat/rules.yaml``), parsed once (and cached),
    with the tables read from the wheels added (``sglang_releases.yaml``, ``flashinfer_releases.yaml``,
    ``kernel_releases.yaml``)."""
    kb = load_shipped("envmgr.compat", "rules.yaml", parse_knowledge_base)
    releases = load_shipped("envmgr.compat", "sglang_releases.yaml", parse_releases)
    flashinfer = load_shipped("envmgr.compat", "flashinfer_releases.yaml", parse_releases)
    kernels = load_shipped("envmgr.compat", "kernel_releases.yaml", parse_releases)  # package -> version -> build
    return kb.model_copy(update={"tables": {**kb.tables, "sglang_releases": releases,
                                            "sglang_pins": sglang_pins(releases),
                                            "flashinfer_releases": flashinfer,
                                            "kernel_releases": kernels}})


def parse_releases(text: str, name: str = "*_releases.yaml") -> dict[str, dict[str, Any]]:
    """The per-release gates tools/wheel-facts/extract.py read from the wheels."""
    try:
        data = parse_yaml(text)
        releases = data["releases"]
        if not isinstance(releases, dict) or not all(isinstance(r, dict) for r in releases.values()):
            raise ValueError("releases must map a version to its gates")
        return {str(version): gates for version, gates in releases.items()}
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise KnowledgeBaseError(f"{name}: malformed release data: {exc}",
                                 hint="rerun tools/wheel-facts/extract.py") from exc


def sglang_pins(releases: dict[str, dict[str, Any]]) -> dict[str, dict[str, str]]:
    """sglang release -> its exact pins (torch, flashinfer, the kernel package and version)."""
    table = {}
    for version, gates in releases.items():
        pins = gates.get("pins") or {}
        kernel_package = next((k for k in KERNEL_PACKAGES if k in pins), None)
        if "torch" in pins and "flashinfer-python" in pins and kernel_package:
            table[version] = {"torch": pins["torch"], "flashinfer": pins["flashinfer-python"],
                              "kernel_package": kernel_package, "kernel": pins[kernel_package]}
    return table
