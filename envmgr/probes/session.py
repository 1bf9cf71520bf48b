"""Probe an environment: pick the target, run the probes, predict, compare, record."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envmgr.probes.args import probe_args, probe_env
from envmgr.probes.predict import Prediction, agreement, predict
from envmgr.probes.runner import ProbeResult, run_probes, select
from envmgr.targets import open_target

if TYPE_CHECKING:
    from envmgr.spec.models import Spec
    from envmgr.state import Generation
    from envmgr.targets.base import Target

PROBES_FILE = "probes.json"  # what the apply-time gate ran
ADHOC_DIR = "probe-runs"  # every `envmgr probe` run since, one file each


@dataclass
class ProbeReport:
    target: str
    python: str
    spec: str | None
    results: list[ProbeResult]
    predictions: dict[str, Prediction] = field(default_factory=dict)
    expected_fail: tuple[str, ...] = ()
    recorded: str | None = None

    def verdict(self, result: ProbeResult) -> str:
        return agreement(result.status, self.predictions.get(result.probe))

    def unexpected(self, result: ProbeResult) -> bool:
        """An error, a disagreement, or a failure nobody foresaw."""
        if result.status == "error" or self.verdict(result) == "DISAGREE":
            return True
        foreseen = self.verdict(result) == "agree" or result.probe in self.expected_fail
        return result.status == "fail" and not foreseen

    @property
    def tested(self) -> bool:
        """Whether any probe tested anything (passed or failed): all skipped is no answer."""
        return any(r.status in ("pass", "fail") for r in self.results)

    @property
    def ok(self) -> bool:
        """Nothing unexpected, and something was tested (the apply gate fails a skipped required
        probe too: "every probe skipped" is not "ok")."""
        return self.tested and not any(self.unexpected(r) for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for r in self.results:
            p = self.predictions.get(r.probe)
            rows.append({**r.to_dict(), "predicted": p.outcome if p else None,
                         "predicted_by": list(p.rules) if p else [], "agreement": self.verdict(r),
                         "unexpected": self.unexpected(r)})
        return {"target": self.target, "python": self.python, "spec": self.spec, "ok": self.ok, "tested": self.tested,
                "recorded": self.recorded, "results": rows}


def run_on(target: Target, spec: Spec | None, ids: Sequence[str], *, python: str | None = None,
           timeout: float | None = None, progress: Callable[[str], None] = lambda line: None) -> ProbeReport:
    from envmgr.facts import collect_facts

    py = python or target.interpreter
    results = run_probes(target, py, ids, probe_args(spec), progress, timeout_s=timeout, env=probe_env(spec))
    predictions: dict[str, Prediction] = {}
    if spec is not None:
        predictions = predict(spec, collect_facts(target, python=py), list(ids))
    return ProbeReport(target.url, py, spec.metadata.name if spec else None, results, predictions,
                       tuple(spec.probes.expected_fail) if spec else ())


def record(report: ProbeReport, generation: Generation, adhoc: bool = False) -> str:
    """The gate's report is ``probes.json``; an ad-hoc run (``envmgr probe``) goes beside it
    under ``probe-runs/`` and never replaces what the apply-time gate saw."""
    if adhoc:
        import time

        runs = generation.path / ADHOC_DIR
        runs.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path = runs / f"{stamp}-{len(list(runs.iterdir())) + 1}.json"
    else:
        path = generation.path / PROBES_FILE
    path.write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
    report.recorded = str(path)
    return report.recorded


def probe_environment(*, target: str | None, spec_path: Path | None, only: Sequence[str] | None,
                      python: str | None, timeout: float | None, home: Path | None,
                      progress: Callable[[str], None]) -> ProbeReport:
    """With no target: the current generation (recording the results in it), else local://."""
    from envmgr.spec import load_spec
    from envmgr.state import Store, current_spec

    generation = Store(home).current() if target is None else None
    url = target or (generation.backend if generation else "local://")
    spec = load_spec(spec_path).spec if spec_path else (current_spec(generation).spec if generation else None)
    ids = select(only)
    with open_target(url) as env:
        report = run_on(env, spec, ids, python=python, timeout=timeout, progress=progress)
    if generation is not None:
        record(report, generation, adhoc=True)
    return report


def required_probe_gate(progress: Callable[[str], None]):
    """The apply gate: the spec's required probes must pass in the new generation."""
    from envmgr.state import current_spec

    def gate(generation: Generation, target: Target) -> list[str]:
        spec = current_spec(generation).spec
        required = list(spec.probes.required)
        if not required:
            return []
        progress(f"required probes: {', '.join(required)}")
        report = run_on(target, spec, select(required), progress=progress)
        record(report, generation)
        return [r.probe for r in report.results if r.status != "pass"]

    return gate
