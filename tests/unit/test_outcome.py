"""The three outcomes of a config (issue 26): one judgement for validate, advise, bench and report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envmgr.bench.results import CellResult, EnvInfo, LoadResult
from envmgr.cli import main
from envmgr.compat import check
from envmgr.compat.advise import blockers, upgrade
from envmgr.compat.outcome import Outcome, expected, expected_all, measured
from envmgr.findings import Finding
from envmgr.report.bench import comparison
from envmgr.spec import load_spec

SPECS = Path(__file__).resolve().parents[2] / "specs"


def finding(id_: str, severity: str = "warning", configs: tuple[str, ...] = ("x",), **extra) -> Finding:
    return Finding(id_, severity, "m", "f", configs=configs, **extra)  # type: ignore[arg-type]


@pytest.mark.parametrize(("findings", "label", "why"), [
    ([], "runs", ()),
    ([finding("note", "info")], "runs", ()),
    ([finding("a-warning")], "runs", ()),
    ([finding("bad-flag", "error")], "blocked", ("bad-flag",)),
    ([finding("assert", stops=True)], "blocked", ("assert",)),  # a warning that says the server stops
    ([finding("stack-error", "error", configs=())], "blocked", ("stack-error",)),  # every config stands on it
    ([finding("stack-warning", configs=())], "runs", ()),
    ([finding("other", "error", configs=("y",))], "runs", ()),  # another config's
    ([finding("off", feature="torch symmetric memory")], "runs without torch symmetric memory", ("off",)),
    ([finding("off", feature="fusion"), finding("bad", "error")], "blocked", ("bad",)),  # blocked wins
])
def test_expected_from_findings(findings, label, why):
    outcome = expected(findings, "x")
    assert (outcome.label, outcome.why) == (label, why)


def test_an_outcome_round_trips_as_json():
    outcome = Outcome("runs without", features=("a", "b"), why=("r",))
    assert outcome.label == "runs without a, b" and outcome.because == "runs without a, b (r)"
    assert Outcome.from_dict(json.loads(json.dumps(outcome.to_dict()))) == outcome


@pytest.mark.parametrize("spec", sorted(SPECS.glob("*.yaml")), ids=lambda p: p.name)
def test_validate_and_advise_judge_every_shipped_config_alike(spec):
    """advise's blockers are exactly the configs validate calls blocked, and the upgrade table's
    after column is validate's outcome on the same spec."""
    loaded = load_spec(spec)
    if loaded.spec.benchmarks is None:
        pytest.skip("no benchmark configs")
    findings = check(loaded)
    outcomes = expected_all(findings, loaded.spec.benchmarks.configs)
    blocked = blockers(findings)  # by config, and "" for the stack
    for name, outcome in outcomes.items():
        assert (outcome.state == "blocked") == (name in blocked or "" in blocked), name
    for change in upgrade(loaded.spec, loaded.spec):
        assert change.after == change.before == outcomes[change.config].label


def test_validate_says_each_configs_outcome(capsys):
    rc = main(["validate", "--json", str(SPECS / "cuda13.yaml")])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert {name: c["outcome"] for name, c in report["configs"].items()} == {
        "baseline": "runs", "ep_flashinfer_a2a": "blocked", "eagle3": "runs", "allreduce_fusion": "blocked",
        "torch_symm_mem": "runs without torch symmetric memory"}
    assert report["configs"]["torch_symm_mem"]["why"] == ["torch-symm-mem-unsupported-arch"]
    main(["validate", str(SPECS / "cuda128.yaml")])
    out = capsys.readouterr().out
    # a warning that predicts the stop blocks the config, although validate exits 0 on warnings
    assert "each config on this stack:" in out
    assert out.split("each config on this stack:")[1].split() == [
        "baseline:", "runs", "ep_flashinfer_a2a:", "blocked", "(a2a-flashinfer-expert-location-assert)",
        "eagle3:", "runs"]


LOAD = LoadResult(10.0, 30.0, 0.1, 8, 60.0, *([1.0] * 9))
ENV = EnvInfo(label="gen 1", generation=1, spec="s", backend="local://")


@pytest.mark.parametrize(("outcome", "ran_without", "label"), [
    ("ok", (), "runs"), ("ok", ("torch symmetric memory",), "runs without torch symmetric memory"),
    ("crashed", (), "blocked"), ("skipped", (), "blocked"), ("hung", (), "blocked"), ("load_failed", (), "blocked"),
])
def test_a_cell_measured_in_the_same_three_outcomes(outcome, ran_without, label):
    cell = CellResult(env=ENV, config="x", outcome=outcome, summary="s", load=LOAD if outcome == "ok" else None,
                      ran_without=ran_without, findings=(finding("kv_pool_oom", "error"),) if outcome == "crashed" else ())
    assert cell.measured.label == label
    assert cell.measured.why == (("kv_pool_oom",) if outcome == "crashed" else ())
    assert measured(cell.ok, ran_without).label == label


def test_the_report_marks_where_the_outcome_is_not_the_expected_one():
    cells = [CellResult(env=ENV, config="as-said", outcome="crashed", summary="s",
                        expected=Outcome("blocked", why=("rule",))),
             CellResult(env=ENV, config="wrong", outcome="ok", summary="s", load=LOAD,
                        expected=Outcome("blocked", why=("rule",))),
             CellResult(env=ENV, config="old-record", outcome="ok", summary="s", load=LOAD)]
    by_config = {row.config: row.cells[0] for row in comparison(cells).rows}
    assert [by_config[c].surprise for c in ("as-said", "wrong", "old-record")] == [False, True, False]
    assert by_config["wrong"].expected == "blocked (rule)" and by_config["wrong"].result == "runs"
    assert by_config["old-record"].expected == ""
