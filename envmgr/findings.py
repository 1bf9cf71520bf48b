"""One ``Finding`` for everything envmgr reports as wrong or off: a compat rule that fired,
a benchmark config's flag check, a log signature triage saw, a bench cell's problem. One
severity order for all of them (``envmgr.severity``); ``to_dict``/``from_dict`` are the JSON
shape every ``--json`` output and ``result.json`` use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from envmgr.severity import Severity


@dataclass(frozen=True)
class Finding:
    id: str  # the rule, flag check or log signature that found it
    severity: Severity  # error: it will fail; warning: it runs, with something off; info
    message: str  # what is wrong and why
    fix: str  # what to do
    sources: tuple[str, ...] = ()  # public sources of the knowledge (docs, issues, release code)
    field: str = ""  # the spec field it is about (rules and flag checks)
    where: str | None = None  # file:line in the spec, when its source is known
    configs: tuple[str, ...] = ()  # the benchmark configs it concerns (config-scoped rules, flags)
    flag: str = ""  # the server flag a flag check is about
    # flag changes that clear it and keep the config's intent (false drops a flag); advise tries them
    edit: tuple[tuple[str, Any], ...] = ()
    # seen in a server log (triage): where, what the line said, the values read from it
    title: str = ""
    line: int = 0  # 1-based line of its first sighting; 0: not from a log
    text: str = ""
    values: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # (`field` is a field here)
    rank: str | None = None  # the rank of that line ("TP3"), when the log says
    ranks: tuple[str, ...] = ()  # every rank that printed it
    count: int = 1  # how many lines matched
    priority: int = 0
    feature: str | None = None  # the feature the server turned off (a feature-off warning)
    stops: bool = False  # a warning that predicts the server stops (a compat rule marked so)

    @property
    def fatal(self) -> bool:
        return self.severity == "error"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["edit"] = dict(self.edit)
        out["values"] = dict(self.values)
        for name in ("sources", "configs", "ranks"):
            out[name] = list(out[name])
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        """A recorded finding (``result.json``, ``--json``); unknown keys are ignored, so a record
        from an older envmgr still reads."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "source" in data and "sources" not in data:  # before one Finding: compat's single source
            values["sources"] = (data["source"],) if data["source"] else ()
        values.setdefault("id", str(data.get("rule", "")))
        values.setdefault("severity", "error")
        values.setdefault("message", "")
        values.setdefault("fix", "")
        for name in ("sources", "configs", "ranks"):
            if name in values:
                values[name] = tuple(values[name] or ())
        if "edit" in values:
            values["edit"] = tuple(dict(values["edit"] or {}).items())
        return cls(**values)


def root_cause(findings: tuple[Finding, ...] | list[Finding]) -> Finding | None:
    """The first failure (findings come root cause first); a feature-off warning never is one."""
    return next((f for f in findings if f.fatal), None)
