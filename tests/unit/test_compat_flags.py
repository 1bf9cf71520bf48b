"""SGLang's server flags per release (envmgr/compat/sglang_flags.yaml) and check_flags."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from envmgr.compat.flags import (
    canonical_flag,
    check_flags,
    known_flags,
    load_flag_table,
    parse_flag_data,
)
from envmgr.errors import KnowledgeBaseError
from envmgr.findings import Finding
from envmgr.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ["specs/cuda128.yaml", "specs/cuda13.yaml", "specs/cuda128-dead-ends.yaml"]

# The flags FACTS.md and the brief name: each must be known to some release.
NAMED = """--model-path --tokenizer-path --dp-size --data-parallel-size --ep-size --expert-parallel-size
--ep --enable-dp-attention --mem-fraction-static --max-running-requests --chunked-prefill-size
--context-length --kv-cache-dtype --quantization --attention-backend --enable-torch-compile
--disable-cuda-graph --cuda-graph-max-bs --cuda-graph-max-bs-decode --disable-radix-cache --enable-eplb
--ep-num-redundant-experts --deepep-mode --log-level --served-model-name --dist-init-addr --nnodes
--node-rank --watchdog-timeout --skip-server-warmup --random-seed --load-format --dtype --enable-metrics
--moe-dense-tp-size --enable-mscclpp --enable-nccl-nvls --enable-symm-mem --tp-size --tensor-parallel-size
--moe-a2a-backend --moe-runner-backend --disable-custom-all-reduce --enable-torch-symm-mem
--enable-flashinfer-allreduce-fusion --speculative-algorithm --speculative-draft-model-path
--speculative-num-steps --speculative-eagle-topk --speculative-num-draft-tokens --trust-remote-code
--host --port""".split()


def problems(flags, version):
    return {(p.severity, p.id, p.flag) for p in check_flags(flags, version)}


def only(flags, version) -> Finding:
    found = check_flags(flags, version)
    assert len(found) == 1, found
    return found[0]


# --- the data -------------------------------------------------------------------------------


def test_shipped_data_loads_once_and_is_large():
    table = load_flag_table()
    assert table is load_flag_table()  # lru_cache: read once per process
    assert len(table.data.flags) > 500  # the whole parser, not a hand-picked few
    assert table.data.verified[0] == "0.5.9" and table.data.verified[-1] == "0.5.23"
    assert "sglang-wheels" in {s.id for s in table.data.sources}
    # public sources only: nothing cites a file of ours outside the repository
    assert not any("shared/" in s.title for s in table.data.sources)


def test_every_spelling_is_a_spec_flag_name():
    pattern = re.compile(r"^--[a-z0-9][a-z0-9-]*$")
    bad = [s for s in load_flag_table().entries if not pattern.match(s)]
    assert bad == []


@pytest.mark.parametrize("name", NAMED)
def test_named_flags_are_known(name):
    assert name in known_flags(None)


def test_facts_choices_of_0_5_9_match():
    flags = load_flag_table().data.flags
    v = load_flag_table().first
    assert flags["--moe-a2a-backend"].choices_at(v) == [
        "none", "deepep", "mooncake", "mori", "ascend_fuseep", "flashinfer"]
    assert flags["--moe-runner-backend"].choices_at(v) == [
        "auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm", "flashinfer_cutlass",
        "flashinfer_mxfp4", "flashinfer_cutedsl", "cutlass"]
    assert flags["--speculative-algorithm"].choices_at(v) == ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]


GOOD = yaml.safe_load("""
sources: [{id: s, title: t, how: h}]
verified: ["0.5.9", "0.5.10"]
flags:
  --a: {kind: value, aliases: [--b]}
  --c: {kind: bare}
""")


def _with(path: str, value):
    data = yaml.safe_load(yaml.safe_dump(GOOD))
    node = data
    keys = path.split("/")
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return yaml.safe_dump(data)


def test_minimal_data_parses():
    table = parse_flag_data(yaml.safe_dump(GOOD))
    assert set(table.entries) == {"--a", "--b", "--c"}


@pytest.mark.parametrize("text, words", [
    (_with("flags/--c/kind", "switch"), "kind"),
    (_with("flags/--c/aliases", ["--b"]), "spelling of both"),
    (_with("flags/--a_x", {"kind": "bare"}), "--a_x"),
    (_with("flags/--c/since", 0.6), "since"),  # an unquoted version is a float: refused
    (_with("flags/--c/since", "0.5.12"), ""),
    (_with("flags/--a", {"kind": "value", "choices": ["x"], "choices_since": {"y": "0.5.10"}}), "not in choices"),
    (_with("flags/--c/choices", ["x"]), "no choices"),
    (_with("flags/--c/sets", "--nope"), "unknown flags"),
    (_with("verified", ["0.5.10", "0.5.9"]), "oldest first"),
    (_with("sources", []), "sources"),
    ("flags: [", "sglang_flags.yaml"),
])
def test_malformed_data_is_a_knowledge_base_error(text, words):
    if words == "":  # control row: the mutation alone is fine
        parse_flag_data(text)
        return
    with pytest.raises(KnowledgeBaseError, match=re.escape(words)):
        parse_flag_data(text)


def test_since_must_precede_removed():
    text = _with("flags/--c", {"kind": "bare", "since": "0.5.12", "removed": "0.5.12"})
    with pytest.raises(KnowledgeBaseError, match="not before removed"):
        parse_flag_data(text)


# --- names ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name, canonical", [
    ("--tp-size", "--tp-size"),
    ("--tensor-parallel-size", "--tp-size"),
    ("--ep", "--ep-size"),
    ("--expert-parallel-size", "--ep-size"),
    ("--data-parallel-size", "--dp-size"),
    ("--model", "--model-path"),
    ("--nccl-init-addr", "--dist-init-addr"),
    ("--speculative-draft-model", "--speculative-draft-model-path"),
    ("--enable-hicache", "--enable-hierarchical-cache"),
    ("--no-enable-tf32-matmul", "--no-enable-tf32-matmul"),  # a negation is its own spelling
    ("--tp", "--tp"),  # a prefix depends on the release: not expanded here
    ("--not-a-flag", "--not-a-flag"),
])
def test_canonical_flag(name, canonical):
    assert canonical_flag(name) == canonical


@pytest.mark.parametrize("name, present, absent", [
    ("--cuda-graph-max-bs-decode", ["0.5.14", "0.5.23"], ["0.5.9", "0.5.13"]),
    ("--cuda-graph-max-bs", ["0.5.9", "0.5.19"], ["0.5.20", "0.5.23"]),
    ("--enable-hicache", ["0.5.23"], ["0.5.22"]),
    ("--enable-hierarchical-cache", ["0.5.9", "0.5.23"], []),
    ("--attn-dp-size", ["0.5.22"], ["0.5.21"]),
    ("--hierarchical-sparse-attention-extra-config", ["0.5.9", "0.5.12"], ["0.5.10", "0.5.11"]),
    ("--tp-size", ["0.5.9", "0.5.15", "0.5.23"], []),
])
def test_known_flags_per_version(name, present, absent):
    for version in present:
        assert name in known_flags(version), version
    for version in absent:
        assert name not in known_flags(version), version
    assert name in known_flags(None)


# --- check_flags: one row per kind of problem ------------------------------------------------


@pytest.mark.parametrize("flags, version, expected", [
    # unknown, with a suggestion
    ({"--tp-sise": 8}, "0.5.9", {("error", "flag-unknown", "--tp-sise")}),
    # newer than the environment
    ({"--cuda-graph-max-bs-decode": 64}, "0.5.9", {("error", "flag-too-new", "--cuda-graph-max-bs-decode")}),
    ({"--cuda-graph-max-bs-decode": 64}, "0.5.14", set()),
    # removed, and parsed-but-refused counts as removed
    ({"--cuda-graph-max-bs": 128}, "0.5.20", {("error", "flag-removed", "--cuda-graph-max-bs")}),
    ({"--enable-expert-distribution-metrics": True}, "0.5.18",
     {("error", "flag-removed", "--enable-expert-distribution-metrics")}),
    ({"--enable-expert-distribution-metrics": True}, "0.5.17", set()),
    # deprecated: still works, say what replaces it
    ({"--cuda-graph-max-bs": 128}, "0.5.15", {("info", "flag-deprecated", "--cuda-graph-max-bs")}),
    ({"--cuda-graph-max-bs": 128}, "0.5.13", set()),
    # kinds
    ({"--port": True}, "0.5.9", {("error", "flag-needs-value", "--port")}),
    ({"--trust-remote-code": "yes"}, "0.5.9", {("error", "flag-takes-no-value", "--trust-remote-code")}),
    ({"--trust-remote-code": 1}, "0.5.9", {("error", "flag-takes-no-value", "--trust-remote-code")}),
    ({"--trust-remote-code": True, "--port": 30000}, "0.5.9", set()),
    # false / null: not on the command line at all
    ({"--nonsense": False, "--port": None}, "0.5.9", set()),
    # types
    ({"--tp-size": "eight"}, "0.5.9", {("error", "flag-bad-value", "--tp-size")}),
    ({"--tp-size": "8", "--mem-fraction-static": 0.85}, "0.5.9", set()),
    ({"--mem-fraction-static": "0.8x"}, "0.5.9", {("error", "flag-bad-value", "--mem-fraction-static")}),
    # choices, per release
    ({"--moe-a2a-backend": "deepepp"}, "0.5.9", {("error", "flag-bad-choice", "--moe-a2a-backend")}),
    ({"--moe-a2a-backend": "megamoe"}, "0.5.9", {("error", "flag-bad-choice", "--moe-a2a-backend")}),
    ({"--moe-a2a-backend": "megamoe"}, "0.5.12", set()),
    ({"--kv-cache-dtype": "fp4_e2m1"}, "0.5.20", set()),
    ({"--kv-cache-dtype": "fp4_e2m1"}, "0.5.21", {("error", "flag-bad-choice", "--kv-cache-dtype")}),
    ({"--speculative-algorithm": "EAGLE3"}, "0.5.9", set()),
    ({"--speculative-algorithm": "eagle3"}, "0.5.9", {("error", "flag-bad-choice", "--speculative-algorithm")}),
    ({"--speculative-algorithm": "MY_PLUGIN"}, "0.5.12", set()),  # free text from 0.5.12
    ({"--log-requests-level": 2}, "0.5.9", set()),  # int choices compare as text
    ({"--log-requests-level": 7}, "0.5.9", {("error", "flag-bad-choice", "--log-requests-level")}),
    # one setting twice
    ({"--tp-size": 8, "--tensor-parallel-size": 8}, "0.5.9", {("error", "flag-duplicate", "--tensor-parallel-size")}),
    ({"--ep-size": 8, "--ep": 8}, "0.5.9", {("error", "flag-duplicate", "--ep")}),
    ({"--cuda-graph-max-bs": 8, "--cuda-graph-max-bs-decode": 8}, "0.5.15",
     {("info", "flag-deprecated", "--cuda-graph-max-bs"), ("error", "flag-duplicate", "--cuda-graph-max-bs-decode")}),
    ({"--enable-tf32-matmul": True, "--no-enable-tf32-matmul": True}, "0.5.23",
     {("error", "flag-duplicate", "--no-enable-tf32-matmul")}),
    # argparse abbreviations
    ({"--tp": 8}, "0.5.9", {("info", "flag-abbreviated", "--tp")}),
    ({"--tp-size": 8, "--tp": 8}, "0.5.9", {("info", "flag-abbreviated", "--tp"), ("error", "flag-duplicate", "--tp")}),
    ({"--cuda-graph-max": 8}, "0.5.15", {("error", "flag-ambiguous", "--cuda-graph-max")}),
    # an alias with its own span
    ({"--enable-hicache": True}, "0.5.22", {("error", "flag-too-new", "--enable-hicache")}),
    ({"--hierarchical-sparse-attention-extra-config": "{}"}, "0.5.10",
     {("error", "flag-missing", "--hierarchical-sparse-attention-extra-config")}),
])
def test_check_flags(flags, version, expected):
    assert problems(flags, version) == expected


@pytest.mark.parametrize("flags, expected", [
    # names and kinds only: no spans, no choices, no release-bound `sets`
    ({"--cuda-graph-max-bs-decode": 64, "--cuda-graph-max-bs": 128, "--moe-a2a-backend": "bogus"}, set()),
    ({"--port": True}, {("error", "flag-needs-value", "--port")}),
    ({"--no-such-flag": 1}, {("error", "flag-unknown", "--no-such-flag")}),
    ({"--tensor-parallel-size": 2, "--tp-size": 2}, {("error", "flag-duplicate", "--tp-size")}),
])
def test_check_flags_without_a_version(flags, expected):
    assert problems(flags, None) == expected


@pytest.mark.parametrize("version, severity", [
    ("0.5.9", "error"), ("0.5.23", "error"),
    ("0.5.30", "warning"), ("0.5.8", "warning"),  # outside the parsers read: cannot be sure
])
def test_unknown_flag_outside_the_verified_range_is_a_warning(version, severity):
    assert problems({"--brand-new-flag": True}, version) == {(severity, "flag-unknown", "--brand-new-flag")}


def test_messages_say_what_and_what_to_do():
    p = only({"--cuda-graph-max-bs-decode": 64}, "0.5.9")
    assert p.message == "--cuda-graph-max-bs-decode appears in sglang 0.5.14; this environment has 0.5.9"
    p = only({"--port": True}, "0.5.9")
    assert "`--port: true` makes no sense" in p.message
    p = only({"--tp-sise": 8}, "0.5.9")
    assert "did you mean --tp-size" in p.fix and "python -m sglang.launch_server --help" in p.fix
    p = only({"--cuda-graph-max-bs": 128}, "0.5.15")
    assert "--cuda-graph-max-bs-decode" in p.fix
    p = only({"--cuda-graph-max-bs": 128}, "0.5.21")
    assert "removed in sglang 0.5.20" in p.message and "--cuda-graph-max-bs-decode" in p.fix
    p = only({"--moe-a2a-backend": "megamoe"}, "0.5.9")
    assert "appears in sglang 0.5.12" in p.message
    p = only({"--moe-a2a-backend": "deepepp"}, "0.5.9")
    assert "did you mean deepep" in p.fix
    p = only({"--enable-hicache": True}, "0.5.22")
    assert "--enable-hierarchical-cache" in p.fix


@pytest.mark.parametrize("version", ["0.5.15", "==0.5.15", "0.5.15.post1"])
def test_version_spellings(version):
    assert problems({"--cuda-graph-max-bs": 128}, version) == {("info", "flag-deprecated", "--cuda-graph-max-bs")}


def test_an_unreadable_version_still_checks_names():
    found = problems({"--cuda-graph-max-bs-decode": 1, "--nope": 1}, ">=0.5")
    assert found == {("warning", "flag-version", ""), ("error", "flag-unknown", "--nope")}


def test_where_names_the_field_and_errors_come_first():
    found = check_flags({"--cuda-graph-max-bs": 128, "--bogus": 1}, "0.5.15",
                        where=lambda name: f"benchmarks.configs.x.flags.{name}")
    assert [(p.severity, p.field) for p in found] == [
        ("error", "benchmarks.configs.x.flags.--bogus"),
        ("info", "benchmarks.configs.x.flags.--cuda-graph-max-bs"),
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        found[0].severity = "info"  # type: ignore[misc]
    assert found[0].to_dict()["id"] == "flag-unknown"


# --- the scenario specs ----------------------------------------------------------------------


def _configs():
    out = []
    for path in SCENARIOS:
        spec = load_spec(ROOT / path).spec
        version = spec.python.packages.get("sglang")
        assert spec.benchmarks is not None and version
        for config in spec.benchmarks.configs:
            flags = spec.benchmarks.flags_of(config)
            out.append(pytest.param(path, version.removeprefix("=="), flags, config, id=f"{path}:{config}"))
    return out


@pytest.mark.parametrize("path, version, flags, config", _configs())
def test_scenario_configs_use_real_flags(path, version, flags, config):
    # for the spec's own sglang and for "any release": their flags are real, so no errors at all
    for v in (version, None):
        errors = [p for p in check_flags(flags, v) if p.severity == "error"]
        assert errors == [], (path, config, v)


def test_cuda13_scenario_is_told_about_deprecated_flags():
    spec = load_spec(ROOT / "specs/cuda13.yaml").spec
    found = problems(spec.benchmarks.flags_of("allreduce_fusion"), "0.5.15")
    assert found == {("info", "flag-deprecated", "--cuda-graph-max-bs"),
                     ("info", "flag-deprecated", "--enable-flashinfer-allreduce-fusion")}


@pytest.mark.parametrize("version, expected", [
    ("0.5.13", set()),                                                # the flag, no other spelling yet
    ("0.5.14", {("info", "flag-deprecated", "--cuda-graph-max-bs")}),  # -decode and -prefill arrive
    ("0.5.19", {("info", "flag-deprecated", "--cuda-graph-max-bs")}),
    ("0.5.20", {("error", "flag-removed", "--cuda-graph-max-bs")}),    # gone: a prefix of two flags
])
def test_cuda_graph_max_bs_per_release(version, expected):
    # issue 26: deprecated from 0.5.14, removed in 0.5.20, where argparse rejects the old spelling
    # as an ambiguous prefix of --cuda-graph-max-bs-decode and --cuda-graph-max-bs-prefill
    flags = {"--cuda-graph-max-bs": 128}
    assert problems(flags, version) == expected
    if version == "0.5.20":
        [removed] = check_flags(flags, version)
        assert ("ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
                "--cuda-graph-max-bs-prefill") in removed.message
        assert dict(removed.edit) == {"--cuda-graph-max-bs": False, "--cuda-graph-max-bs-decode": 128}


def test_a_setting_is_read_under_any_of_its_spellings():
    """One alias table (the flag data) for the parallel layout too (issue 28): the canonical name,
    an alias, or a prefix argparse can only read as that flag; an ambiguous prefix is none."""
    from envmgr.compat.flags import setting

    assert setting({"--tensor-parallel-size": 4}, "--tp-size") == 4
    assert setting({"--tp": 2}, "--tp-size") == 2  # argparse's abbreviation
    assert setting({"--ep": 8, "--tp-size": 8}, "--ep-size") == 8
    assert setting({"--tp-size": 8, "--tensor-parallel-size": 4}, "--tp-size") == 8  # the name wins
    assert setting({"--pp": 2}, "--pp-size") is None  # --pp begins several flags
    assert setting({"--dp-size": 2}, "--tp-size") is None
