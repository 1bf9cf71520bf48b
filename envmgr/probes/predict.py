"""What the compat rules predict for each probe, and whether the probe agreed.

A rule with ``predicts: [probe]`` that fires for the environment says that probe will
fail; a probe some rule covers but none fired for is predicted to pass; a probe no
rule covers has no prediction. A probe that disagrees means a rule is wrong or the
stack is broken: FACTS.md's policy is that the probe wins and the rule gets fixed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from envmgr.compat import default_knowledge_base, evaluate

if TYPE_CHECKING:
    from envmgr.facts.model import Facts
    from envmgr.spec.models import Spec


@dataclass(frozen=True)
class Prediction:
    outcome: str | None  # "pass", "fail", or None (no rule speaks about this probe)
    rules: tuple[str, ...] = ()  # the rules that predict the failure


def predict(spec: Spec, facts: Facts | None, probes: list[str]) -> dict[str, Prediction]:
    kb = default_knowledge_base()
    fired = {f.id for f in evaluate(spec, facts, kb) if not f.configs}
    out = {}
    for probe in probes:
        covering = [r.id for r in kb.rules if probe in r.predicts]
        failing = tuple(r for r in covering if r in fired)
        out[probe] = Prediction("fail" if failing else ("pass" if covering else None), failing)
    return out


def agreement(status: str, prediction: Prediction | None) -> str:
    """agree / DISAGREE / not run (skip, error) / no prediction."""
    if prediction is None or prediction.outcome is None:
        return "no prediction"
    if status not in ("pass", "fail"):
        return "not run"
    return "agree" if status == prediction.outcome else "DISAGREE"
