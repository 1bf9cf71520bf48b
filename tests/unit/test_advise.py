"""``envmgr advise`` on the scenario's specs: what the upgrade changes per config, and for each
blocked one the nearest known release that clears it, or that none does (and why)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from packaging.version import Version

from envmgr.cli import main
from envmgr.compat.advise import advise, blockers, flag_edits, move, nearest_first, span, upgrade, with_candidate
from envmgr.compat.kb import default_knowledge_base
from envmgr.spec import load_spec

SPECS = Path(__file__).resolve().parents[2] / "specs"


def by_blocker(spec_name: str) -> dict:
    return {a.blocker: a for a in advise(load_spec(SPECS / spec_name).spec)}


def test_the_cuda13_upgrade_per_config_before_anyone_upgrades():
    changes = {c.config: c for c in upgrade(load_spec(SPECS / "cuda128.yaml").spec,
                                             load_spec(SPECS / "cuda13.yaml").spec)}
    # fusion: on 12.8 (sglang 0.5.9) the flag does nothing on SM120 and the server runs without it;
    # on 13 (0.5.15) SGLang's own gate refuses it: the upgrade makes it worse (issue 26)
    assert (changes["allreduce_fusion"].before, changes["allreduce_fusion"].after) == (
        "runs without FlashInfer all-reduce fusion", "blocked")
    assert changes["allreduce_fusion"].why_before == ("allreduce-fusion-sglang-skips",)
    assert changes["allreduce_fusion"].why_after == ("allreduce-fusion-sglang-gate",)
    assert changes["allreduce_fusion"].verdict == "worse"
    # symm-mem: a KeyError on 12.8, a server without the feature on 13
    assert changes["torch_symm_mem"].before == "blocked"
    assert changes["torch_symm_mem"].after == "runs without torch symmetric memory"
    assert changes["torch_symm_mem"].verdict == "starts, feature still off"
    # FlashInfer A2A: on 12.8 (0.5.9) validate warns that the model path stops on the expert-location
    # assert (the scenario saw it), so it does not "run" there (issue 26); 0.5.15 asserts
    # --enable-dp-attention (from 0.5.13, read from the wheel)
    a2a = changes["ep_flashinfer_a2a"]
    assert (a2a.before, a2a.why_before) == ("blocked", ("a2a-flashinfer-expert-location-assert",))
    assert (a2a.after, a2a.why_after) == ("blocked", ("a2a-flashinfer-needs-dp-attention",))
    assert changes["baseline"].verdict == "unchanged"


def test_fusion_on_sm120_has_no_release_and_says_which_was_newest():
    advice = by_blocker("cuda13.yaml")["allreduce_fusion"]
    assert advice.fixed_by is None and advice.starts_with is None
    assert advice.newest_checked == "0.5.23" and advice.checked >= 14
    assert "allreduce-fusion-sglang-gate" in {f.id for f in advice.still}


def test_a_release_that_clears_one_config_but_blocks_another_is_not_advice():
    # allreduce_fusion on cuda13: 0.5.9-0.5.13 would start it (their gate skips SM12, fusion off),
    # but 0.5.11-0.5.13 index the symm-mem table by the major (torch_symm_mem stops) and 0.5.9,
    # 0.5.10's kernels are CUDA 12 builds: no advice, and the advice says what each would cost
    advice = by_blocker("cuda13.yaml")["allreduce_fusion"]
    assert advice.fixed_by is None and advice.starts_with is None
    rejected = dict(advice.rejected)
    assert {rejected[r] for r in ("0.5.11", "0.5.12", "0.5.13")} == {
        "would start it without FlashInfer all-reduce fusion, blocking torch_symm_mem"}
    assert rejected["0.5.9"].endswith("breaking the stack (kernel-cuda-build-mismatch)")
    assert dict(advice.blocked_on)["0.5.14"] == ("allreduce-fusion-sglang-gate",)


def test_the_a2a_config_on_cuda13_has_only_its_flags_and_the_advice_says_why():
    """0.5.9-0.5.12 have no dp-attention assert, but below 0.5.15 the model path stops on the
    expert-location assert (a warning that predicts the stop: validate's judgement, so advise's
    too); from 0.5.13 the A2A path asserts --enable-dp-attention (issue 26)."""
    advice = by_blocker("cuda13.yaml")["ep_flashinfer_a2a"]
    assert advice.fixed_by is None and not advice.rejected
    assert advice.fixed_here
    assert advice.here_edits == {"ep_flashinfer_a2a": {"--enable-dp-attention": True, "--dp-size": 8}}
    assert advice.fragments["flags"] == {"benchmarks": {"configs": {"ep_flashinfer_a2a": {
        "flags": {"--enable-dp-attention": True, "--dp-size": 8}}}}}
    assert advice.conditions() == [("0.5.15-0.5.23", "clear it only with flag changes"),
                                   ("0.5.9-0.5.14", "a2a-flashinfer-expert-location-assert")]


def test_release_spans_run_over_consecutive_checked_releases():
    every = ["0.5.9", "0.5.10", "0.5.11", "0.5.12", "0.5.13", "0.5.15"]
    assert span(["0.5.12", "0.5.9", "0.5.10", "0.5.11"], every) == "0.5.9-0.5.12"
    assert span(["0.5.9", "0.5.10", "0.5.13", "0.5.15"], every) == "0.5.9, 0.5.10, 0.5.13, 0.5.15"
    assert span(["0.5.11", "0.5.13"], every) == "0.5.11, 0.5.13"


def only_symm_mem(tmp_path: Path) -> Path:
    """cuda128-dead-ends with torch_symm_mem its only config (0.5.13+ would block the A2A one)."""
    child = tmp_path / "symm.yaml"
    configs = load_spec(SPECS / "cuda128-dead-ends.yaml").spec.benchmarks.configs
    child.write_text(yaml.safe_dump({
        "apiVersion": "envmgr/v1", "extends": str(SPECS / "cuda128-dead-ends.yaml"),
        "metadata": {"name": "symm"},
        "benchmarks": {"configs": {name: None for name in configs if name != "torch_symm_mem"}}}))
    return child


def test_symm_mem_on_12_8_starts_from_0_5_14_with_cuda_13_but_stays_off(tmp_path):
    [advice] = advise(load_spec(only_symm_mem(tmp_path)).spec)
    assert advice.blocker == "torch_symm_mem" and advice.fixed_by is None
    assert advice.starts_with.sglang == "0.5.14" and advice.feature_off == "torch symmetric memory"
    # flashinfer 0.6.12 needs CUDA >= 12.9 for SM12x: the toolkit and the driver it needs come along
    assert (advice.starts_with.toolkit, advice.starts_with.driver) == ("13.0", "580.95.05")
    fragment = advice.fragments["starts"]
    assert fragment["cuda"]["select"] == "13.0" and fragment["driver"] == {"version": "580.95.05"}
    assert any(t["version"] == "12.8" for t in fragment["cuda"]["toolkits"])  # kept beside it


def test_the_cuda13_a2a_config_alone_writes_its_flags_and_the_child_has_nothing_blocked(tmp_path, capsys):
    child = tmp_path / "a2a.yaml"
    child.write_text(yaml.safe_dump({
        "apiVersion": "envmgr/v1", "extends": str(SPECS / "cuda13.yaml"), "metadata": {"name": "a2a"},
        "benchmarks": {"configs": {"torch_symm_mem": None, "allreduce_fusion": None}}}))
    [advice] = advise(load_spec(child).spec)
    assert advice.blocker == "ep_flashinfer_a2a" and advice.fixed_here and advice.fixed_by is None
    written = tmp_path / "fixed.yaml"
    assert main(["advise", str(child), "--write", str(written)]) == 0
    out = capsys.readouterr().out
    assert "flag changes clear it on this stack" in out and "0.5.9-0.5.14: blocked by a2a-flashinfer-expert-location-assert" in out
    fixed = load_spec(written)
    assert fixed.spec.metadata.name == "a2a-flags"
    assert fixed.spec.python.packages["sglang"] == "==0.5.15"
    assert fixed.spec.benchmarks.flags_of("ep_flashinfer_a2a")["--dp-size"] == 8
    assert advise(fixed.spec) == []  # the written spec has nothing left blocked


def test_the_a2a_config_on_cuda128_is_blocked_and_its_way_out_is_the_scenarios():
    """The scenario: on 12.8 (0.5.9) FlashInfer A2A stopped on the expert-location assert, which
    validate warns of (a warning marked stops): advise offers the first release past that warning's
    range, 0.5.15, with what it needs (CUDA 13, driver 580, torch cu130, --enable-dp-attention)."""
    advice = by_blocker("cuda128.yaml")["ep_flashinfer_a2a"]
    assert [f.id for f in advice.errors] == ["a2a-flashinfer-expert-location-assert"]
    fix = advice.fixed_by
    assert (fix.sglang, fix.toolkit, fix.driver, fix.torch_cuda) == ("0.5.15", "13.0", "580.95.05", "cu130")
    assert advice.edits == {"ep_flashinfer_a2a": {"--enable-dp-attention": True, "--dp-size": 8}}


def child_of(tmp_path: Path, parent: str, overlay: dict) -> Path:
    child = tmp_path / "child.yaml"
    child.write_text(yaml.safe_dump({"apiVersion": "envmgr/v1", "extends": str(SPECS / parent),
                                     "metadata": {"name": "child"}, **overlay}))
    return child


def test_a_release_on_the_same_driver_and_toolkit_beats_a_nearer_one_that_moves_them(tmp_path):
    """Issue 26: 0.5.10 on CUDA 12.8 (flashinfer 0.6.7 wants >= 12.9 on SM12x): its own release
    with CUDA 13 and driver 580 is nearer, 0.5.9 on the unchanged driver and toolkit is smaller."""
    spec = load_spec(child_of(tmp_path, "cuda128.yaml", {
        "python": {"packages": {"sglang": "0.5.10", "flashinfer-python": "0.6.7.post2",
                                "flashinfer-cubin": "0.6.7.post2", "sgl-kernel": None, "sglang-kernel": "0.4.1"}},
        "benchmarks": {"configs": {"ep_flashinfer_a2a": None}}})).spec
    [advice] = advise(spec)
    assert advice.blocker == "" and [f.id for f in advice.errors] == ["flashinfer-sm12x-cuda-min"]
    assert (advice.fixed_by.sglang, advice.fixed_by.toolkit, advice.fixed_by.driver) == ("0.5.9", None, None)
    assert move(advice.fixed_by) == 0


def test_a_release_needing_no_flag_change_beats_a_nearer_one_that_does(tmp_path):
    """Issue 26: on 0.5.20 --cuda-graph-max-bs is gone (its rename clears it on this stack);
    0.5.21 would need the same rename, so it is no alternative; 0.5.19 still accepts the flag."""
    spec = load_spec(child_of(tmp_path, "cuda13.yaml", {
        "python": {"packages": {"sglang": "0.5.20", "torch": "2.13.0", "flashinfer-python": "0.6.18",
                                "flashinfer-cubin": None, "sglang-kernel": "0.4.7"}},
        "benchmarks": {"configs": {"ep_flashinfer_a2a": None, "torch_symm_mem": None, "allreduce_fusion": None}}})).spec
    advice = {a.blocker: a for a in advise(spec)}
    baseline = advice["baseline"]
    assert baseline.fixed_here and baseline.fixed_by.sglang == "0.5.19" and baseline.edits == {}
    assert {"0.5.21", "0.5.22", "0.5.23"} <= set(baseline.with_flags)  # dominated: the rename alone does it


def test_a_newer_release_comes_with_the_renames_and_asserts_it_needs(tmp_path):
    """0.5.20 removed --cuda-graph-max-bs (its setting is --cuda-graph-max-bs-decode) and 0.5.22
    asserts --attn-dp-size: a release advice carries those flag edits, checked by re-evaluation."""
    spec = load_spec(SPECS / "cuda13.yaml").spec
    newest = max(nearest_first(spec, default_knowledge_base()), key=lambda c: Version(c.sglang))
    edited, edits, findings = flag_edits(with_candidate(spec, newest), default_knowledge_base())
    assert edits[""] == {"--cuda-graph-max-bs": False, "--cuda-graph-max-bs-decode": 128}
    assert edits["ep_flashinfer_a2a"] == {"--attn-dp-size": 8}
    assert "ep_flashinfer_a2a" not in blockers(findings)
    assert "--cuda-graph-max-bs" not in edited.benchmarks.flags_of("baseline")


def test_cli_json_and_write_a_child_spec_that_loads(tmp_path, capsys):
    child = tmp_path / "child.yaml"
    rc = main(["advise", "--json", str(SPECS / "cuda128-dead-ends.yaml"), "--write", str(child)])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1  # symm-mem has no release that makes it work
    # (fusion is no blocker on 0.5.9: the flag does nothing on SM120, a feature-off warning)
    advice = {a["blocker"]: a for a in report["advice"]}
    assert set(advice) == {"torch_symm_mem", "ep_flashinfer_a2a"}
    # 0.5.15+ would clear the A2A config, but from 0.5.14 the fusion gate blocks allreduce_fusion
    assert {r["sglang"]: r["because"] for r in advice["ep_flashinfer_a2a"]["rejected"]}["0.5.15"] == (
        "would clear it, blocking allreduce_fusion")
    assert {b["sglang"]: b["by"] for b in advice["torch_symm_mem"]["blocked_on"]}["0.5.9"] == ["torch-symm-mem-keyerror"]
    assert report["written"] is None and not child.exists()  # nothing clears without a cost


def test_the_no_release_sentence_states_its_condition(capsys):
    main(["advise", str(SPECS / "cuda13.yaml")])
    out = capsys.readouterr().out
    assert "no known sglang release clears it without these flags (15 checked, newest 0.5.23):" in out
    assert "0.5.11-0.5.13 would start it without FlashInfer all-reduce fusion, blocking torch_symm_mem" in out


def test_a_stack_nothing_blocks_gets_exit_0(capsys):
    assert main(["advise", str(SPECS / "h200.yaml")]) == 0
    assert "nothing is blocked" in capsys.readouterr().out
