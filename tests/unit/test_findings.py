"""One Finding for rules, flag checks, triage and the bench matrix: its JSON shape round-trips,
and records written before it (the real H200 results) still read."""

from __future__ import annotations

import json
from pathlib import Path

from envmgr.bench.triage import triage_text
from envmgr.compat import evaluate
from envmgr.compat.flags import check_flags
from envmgr.findings import Finding, root_cause
from envmgr.spec import Spec

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_every_producer_makes_the_same_type():
    spec = Spec.model_validate({"apiVersion": "envmgr/v1", "metadata": {"name": "x"},
                                "hardware": {"gpu": {"arch": "sm_120"}}, "driver": {"version": "570.124.06"},
                                "cuda": {"toolkits": [{"version": "13.0"}]}})
    log = (FIXTURES / "triage" / "kv_pool_oom_scenario_ep_tp8.log").read_text(encoding="utf-8")
    found = [*evaluate(spec), *check_flags({"--no-such-flag": True}, "0.5.11"), *triage_text(log)]
    assert {type(f) for f in found} == {Finding} and len(found) >= 3


def test_the_json_shape_round_trips():
    finding = Finding("a2a", "error", "m", "f", sources=("https://x",), field="benchmarks.configs.ep.flags",
                      configs=("ep",), flag="--ep-size", edit=(("--attn-dp-size", 8), ("--dp-size", False)),
                      line=3, text="t", values={"n": 1}, ranks=("TP0", "TP1"), count=2)
    data = json.loads(json.dumps(finding.to_dict()))
    assert data["edit"] == {"--attn-dp-size": 8, "--dp-size": False} and data["ranks"] == ["TP0", "TP1"]
    assert Finding.from_dict(data) == finding


def test_a_record_from_before_one_finding_still_reads():
    old = json.loads((FIXTURES / "bench" / "results_h200_sglang_0.5.11" / "kv_0006" / "result.json")
                     .read_text(encoding="utf-8"))["findings"]
    assert "field" not in old[0]  # recorded by the real server run, before the shape grew
    read = [Finding.from_dict(f) for f in old]
    assert read[0].id == old[0]["id"] and read[0].line == old[0]["line"] and read[0].fix == old[0]["fix"]
    legacy = Finding.from_dict({"rule": "r", "source": "https://s", "message": "m", "fix": "f"})
    assert (legacy.id, legacy.sources, legacy.severity) == ("r", ("https://s",), "error")


def test_the_root_cause_is_the_first_failure_never_a_warning():
    off = Finding("cuda_graph_off", "warning", "m", "f")
    crash = Finding("kv_pool_oom", "error", "m", "f")
    assert root_cause((off, crash)) is crash and root_cause((off,)) is None
