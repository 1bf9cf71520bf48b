"""One judgement of a benchmark config, shared by validate, advise, bench and report.

Three outcomes, in the words every command prints:

    runs                   nothing the knowledge base knows stops it or turns it off
    runs without FEATURE   the server starts, but the feature the config asks for stays off
                           (the flag is accepted and ignored, or the server turns it off)
    blocked                the server is expected to stop: an error finding, or a warning whose
                           case is that the server stops (a rule marked ``stops``)

``expected`` reads the findings of ``evaluate`` (before anything runs); ``measured`` reads a
bench cell's record (what happened). Both give an ``Outcome``, so a report can put the two
side by side and say where the prediction was wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from envmgr.findings import Finding

State = Literal["runs", "runs without", "blocked"]
STATES: tuple[str, ...] = get_args(State)


@dataclass(frozen=True)
class Outcome:
    state: State
    features: tuple[str, ...] = ()  # what stays off ("runs without")
    why: tuple[str, ...] = ()  # the finding ids (rules, flag checks, log signatures) that say so

    @property
    def label(self) -> str:
        return f"runs without {', '.join(self.features)}" if self.state == "runs without" else self.state

    @property
    def because(self) -> str:
        """The label with its reasons: "blocked (allreduce-fusion-sglang-gate)"."""
        return f"{self.label} ({', '.join(self.why)})" if self.why else self.label

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.label, "state": self.state, "features": list(self.features), "why": list(self.why)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outcome:
        return cls(state=data["state"], features=tuple(data.get("features") or ()), why=tuple(data.get("why") or ()))


RUNS = Outcome("runs")


def stops(finding: Finding) -> bool:
    """Whether a finding predicts that the server stops: an error, or a warning marked so."""
    return finding.severity == "error" or finding.stops


def concerns(finding: Finding, config: str) -> bool:
    """A finding that names the config, or a stack error (every config stands on the stack)."""
    return config in finding.configs or (not finding.configs and finding.severity == "error")


def expected(findings: Iterable[Finding], config: str) -> Outcome:
    """Validate's judgement of one config from the findings on its stack."""
    mine = [f for f in findings if concerns(f, config)]
    blocking = tuple(dict.fromkeys(f.id for f in mine if stops(f)))
    if blocking:
        return Outcome("blocked", why=blocking)
    off = [f for f in mine if f.feature]
    if off:
        return Outcome("runs without", features=tuple(dict.fromkeys(f.feature or "" for f in off)),
                       why=tuple(dict.fromkeys(f.id for f in off)))
    return RUNS


def expected_all(findings: Sequence[Finding], configs: Iterable[str]) -> dict[str, Outcome]:
    return {name: expected(findings, name) for name in configs}


def measured(ok: bool, ran_without: Sequence[str], why: Sequence[str] = ()) -> Outcome:
    """What a bench cell showed: served its load (with the features it asked for, or without
    some), or not (skipped, crashed, timed out, hung, the load failed)."""
    if not ok:
        return Outcome("blocked", why=tuple(why))
    if ran_without:
        return Outcome("runs without", features=tuple(ran_without), why=tuple(why))
    return RUNS
