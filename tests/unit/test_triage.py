"""Triage of server logs: every signature on real log text, clean logs, ranks, specificity,
values and the mem_fraction_static arithmetic, live feeding, the CLI entry point.

Fixtures and their sources: tests/fixtures/triage/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envmgr.bench.memory import UNLOGGED_AFTER_WEIGHTS_GB, UNLOGGED_BEFORE_WEIGHTS_GB, kv_pool_sizing, sglang_reserve_gb
from envmgr.bench.render import read_findings, render_findings
from envmgr.bench.triage import (
    Triage,
    clean_line,
    load_signatures,
    parse_signatures,
    triage_file,
    triage_lines,
    triage_stream,
    triage_text,
)
from envmgr.bench.values import display
from envmgr.cli import build_parser, main
from envmgr.errors import KnowledgeBaseError, UsageError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "triage"
REQUIRED_IDS = {
    "kv_pool_oom", "cuda_oom", "cuda_graph_capture_failed", "flashinfer_arch_unsupported",
    "nvcc_arch_unsupported", "no_kernel_image", "symm_mem_unsupported_arch",
    "ep_expert_location_assert", "driver_too_old", "forward_compat_unsupported",
    "nvml_driver_mismatch", "abi_undefined_symbol", "nccl_error",
}


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def ids(findings) -> list[str]:
    return [f.id for f in findings]


def first_line_containing(name: str, needle: str) -> int:
    for number, line in enumerate(fixture(name).split("\n"), start=1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {name}")


# --- the data file ---------------------------------------------------------------------------

def test_shipped_signatures_cover_the_issue_ids():
    assert REQUIRED_IDS <= {s.id for s in load_signatures().signatures}


def test_every_signature_names_a_source_and_a_fix():
    for signature in load_signatures().signatures:
        assert signature.sources and signature.fix and signature.message, signature.id


@pytest.mark.parametrize("bad, words", [
    ("hold_lines: 1\nsignatures: [{id: x, title: t, priority: 1, patterns: ['(('], "
     "message: [m], fix: [f], sources: [s]}]", "invalid regex"),
    ("hold_lines: 1\nsignatures: [{id: x, title: t, priority: 1, patterns: [a], "
     "supersedes: [nope], message: [m], fix: [f], sources: [s]}]", "unknown ids"),
    ("hold_lines: 1\nsignatures: [{id: x, title: t, priority: 1, patterns: [a], "
     "compute: magic, message: [m], fix: [f], sources: [s]}]", "unknown compute"),
    ("hold_lines: 1\nsignatures: [{id: x, title: t, priority: 1, patterns: [a], "
     "context: [{regex: 'no groups'}], message: [m], fix: [f], sources: [s]}]", "named groups"),
])
def test_malformed_signature_data_is_a_knowledge_base_error(bad, words):
    with pytest.raises(KnowledgeBaseError, match=words):
        parse_signatures(bad, origin="test.yaml")


def test_the_family_a_propagated_warning_names_must_be_an_error_signature():
    shipped = (Path(__file__).parents[2] / "envmgr/bench/signatures.yaml").read_text(encoding="utf-8")
    text = shipped.replace("    family: nccl_error  #", "    family: no_such_family  #", 1)
    assert text != shipped
    with pytest.raises(KnowledgeBaseError, match="unclassified.propagated.family names no error signature: .'no_such_family'"):
        parse_signatures(text)
    assert load_signatures().unclassified.propagated.family == "nccl_error"


# --- each signature on real (or scenario) log text -------------------------------------------

@pytest.mark.parametrize("name, expected_id, needle", [
    ("kv_pool_oom_scenario_ep_tp8.log", "kv_pool_oom", "RuntimeError: Not enough memory"),
    ("kv_pool_oom_inferencex_2128.log", "kv_pool_oom", "ValueError: Loaded weights"),
    ("kv_pool_oom_sglang_7691_dp8.log", "kv_pool_oom", "profiled value -561981"),
    ("flashinfer_arch_sglang_15650.log", "flashinfer_arch_unsupported", "No supported CUDA"),
    ("flashinfer_arch_sglang_13342.log", "flashinfer_arch_unsupported", "No supported CUDA"),
    ("nvcc_ptxas_rlinf_92_ray.log", "nvcc_arch_unsupported", "ptxas fatal"),
    ("nvcc_flashmla_79.log", "nvcc_arch_unsupported", "nvcc fatal"),
    ("no_kernel_image_vim_42.log", "no_kernel_image", "no kernel image"),
    ("cuda_oom_mygirlgpt_11.log", "cuda_oom", "CUDA out of memory"),
    ("cuda_oom_moss_ttsd_71_sglang.log", "cuda_oom", "CUDA out of memory"),
    ("kv_pool_oom_h200_sglang_0.5.11.log", "kv_pool_oom", "Not enough memory"),
    # real sglang 0.5.11 on the H200 (docs/evidence/h200-sglang): each failure provoked on purpose
    ("not_enough_gpus_h200_sglang_0.5.11_tp2.log", "not_enough_gpus", "invalid device ordinal"),
    ("feature_package_missing_h200_sglang_0.5.11_deepep.log", "feature_package_missing", "DeepEP is not installed"),
    ("grpc_port_h200_sglang_0.5.11_port60311.log", "grpc_port_out_of_range", "SGLANG_GRPC_PORT (70311)"),
    ("model_path_missing_h200_sglang_0.5.11.log", "model_path_missing", "Repo id must be in the form"),
    ("server_args_rejected_h200_sglang_0.5.11.log", "server_args_rejected", "sglang serve: error: argument"),
    ("server_subprocess_died_h200_sglang_0.5.11_sigkill.log", "server_subprocess_died", "crashed with exit code -9"),
    ("custom_allreduce_off_sglang_12496.log", "custom_allreduce_off", "Setup Custom allreduce failed"),
    # a warning, not a failure: the server turned CUDA graphs off and served (docs/evidence/h200-feature-off)
    ("cuda_graph_off_h200_sglang_0.5.11.log", "cuda_graph_off", "Cuda graph is disabled"),
    ("symm_mem_keyerror_12_scenario.log", "symm_mem_unsupported_arch", "KeyError: 12"),
    ("ep_expert_location_assert_scenario.log", "ep_expert_location_assert", "AssertionError"),
    ("driver_too_old_yuan_65.log", "driver_too_old", "too old"),
    ("forward_compat_video_llava_22.log", "forward_compat_unsupported", "Error 804"),
    ("nvml_mismatch_mozilla_1167.log", "nvml_driver_mismatch", "Failed to initialize NVML"),
    ("abi_sgl_kernel_sglang_13948.log", "abi_undefined_symbol", "undefined symbol"),
    ("abi_sgl_kernel_sglang_8131.log", "abi_undefined_symbol", "undefined symbol"),
    ("nccl_sglang_8974.log", "nccl_error", "RuntimeError: NCCL error"),
    ("nccl_dist_backend_hkproj_1.log", "nccl_error", "DistBackendError"),
    # real torch 2.11 + NCCL 2.28 on the H200: an all_reduce stuck behind a busy stream (docs/evidence/h200-nccl-watchdog)
    ("nccl_watchdog_timeout_h200_torch_2.11.log", "nccl_error", "Watchdog caught collective operation timeout"),
    ("nccl_wheel_collision_facts.log", "nccl_wheel_collision", "ncclCommResume"),
])
def test_each_fixture_gives_exactly_its_root_cause_on_the_right_line(name, expected_id, needle):
    findings = triage_text(fixture(name))
    assert ids(findings) == [expected_id]
    assert findings[0].line == first_line_containing(name, needle)
    assert findings[0].fix and findings[0].message
    assert needle.split()[-1] in findings[0].text


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("clean_*.log")))
def test_clean_logs_give_no_finding(name):
    assert triage_text(fixture(name)) == []


def test_real_h200_findings_carry_the_values_of_their_log():
    tp2 = triage_text(fixture("not_enough_gpus_h200_sglang_0.5.11_tp2.log"))[0]
    assert (tp2.values["tp_size"], tp2.values["gpu_id"]) == (2, 1) and tp2.ranks == ("TP1",)
    deepep = triage_text(fixture("feature_package_missing_h200_sglang_0.5.11_deepep.log"))[0]
    assert deepep.values["package"] == "DeepEP" and "DeepEP" in deepep.fix
    grpc = triage_text(fixture("grpc_port_h200_sglang_0.5.11_port60311.log"))[0]
    assert grpc.values == {"grpc_port": 70311, "http_port": 60311}
    missing = triage_text(fixture("model_path_missing_h200_sglang_0.5.11.log"))[0]
    assert missing.values["model_path"] == "/opt/models/does-not-exist"
    rejected = triage_text(fixture("server_args_rejected_h200_sglang_0.5.11.log"))[0]
    assert rejected.values["detail"].startswith("argument --moe-a2a-backend: invalid choice: 'bogus'")
    killed = triage_text(fixture("server_subprocess_died_h200_sglang_0.5.11_sigkill.log"))[0]
    assert killed.values["exit_code"] == -9 and "OOM killer" in killed.fix


@pytest.mark.parametrize("line", [
    # an orderly stop (envmgr's SIGTERM) makes the detokenizer exit -15: not a failure
    "[2026-12-01 08:25:35] Subprocess detokenizer (pid=1459) crashed with exit code -15. Triggering SIGQUIT for cleanup...",
    # a benign traceback the real server prints while it keeps serving (it goes on to ready)
    "ModuleNotFoundError: No module named 'openai_harmony'\n[2026-12-01 08:00:28] INFO:     Application startup complete.",
    # the argparse word "error" in a server's own option help
    "  --enable-error-log ERROR_LOG  where errors go",
    "sglang serve: warning: argument --foo is deprecated",
])
def test_real_look_alikes_stay_quiet(line):
    assert triage_text(line + "\n") == []


def test_clean_logs_end_ready_or_hang_and_are_real_startups():
    ready = [p for p in FIXTURES.glob("clean_*.log")
             if p.read_text().rstrip().endswith("The server is fired up and ready to roll!")]
    assert len(ready) >= 4


# Lines quoted in SCENARIO.md and FACTS.md, one by one (each inside SGLang's usual prefix).
QUOTED = [
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current "
     "value: self.server_args.mem_fraction_static=0.778734296875", "kv_pool_oom"),
    ("Exception: Capture cuda graph failed: No supported CUDA architectures found for major "
     "versions [9, 10].", "flashinfer_arch_unsupported"),
    ("nvcc fatal : Unsupported gpu architecture 'compute_120a'", "nvcc_arch_unsupported"),
    ("nvcc fatal   : Unsupported gpu architecture 'sm_70'", "nvcc_arch_unsupported"),
    ("RuntimeError: SM 12.x requires CUDA >= 12.9", "nvcc_arch_unsupported"),
    ("RuntimeError: FlashInfer requires GPUs with sm75 or higher", "flashinfer_arch_unsupported"),
    ("Failed to initialize NVML: Driver/library version mismatch", "nvml_driver_mismatch"),
    ("CUDA error 804: forward compatibility was attempted on non supported HW",
     "forward_compat_unsupported"),
    ("ImportError: /venv/lib/python3.12/site-packages/sgl_kernel/common_ops.abi3.so: undefined "
     "symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb", "abi_undefined_symbol"),
    ("ImportError: libnccl.so.2: undefined symbol: ncclCommResume", "nccl_wheel_collision"),
]


@pytest.mark.parametrize("line, expected_id", QUOTED)
def test_lines_quoted_in_scenario_and_facts(line, expected_id):
    assert ids(triage_text(f"[2026-01-01 12:00:00 TP0] {line}\n")) == [expected_id]


def test_symm_mem_keyerror_needs_its_traceback():
    # A bare "KeyError: 12" from anywhere else is not the symmetric-memory table: a failure
    # nobody's signature explains, reported where it is.
    found = triage_text("Traceback (most recent call last):\n  File \"x.py\"\nKeyError: 12\n")
    assert [(f.id, f.line, f.text) for f in found] == [("unclassified_failure", 3, "KeyError: 12")]


def test_bare_assertion_without_expert_location_frames_is_not_ep():
    text = "Traceback (most recent call last):\n  File \"a.py\"\nAssertionError\n"
    assert [(f.id, f.line) for f in triage_text(text)] == [("unclassified_failure", 3)]


def test_a_raise_line_in_a_traceback_is_not_the_error_message():
    text = '    raise RuntimeError(f"NCCL error: {error_str}")\n'
    assert triage_text(text) == []


# --- multi-rank logs: once per root cause ----------------------------------------------------

def test_interleaved_ranks_give_one_finding_with_every_line_counted():
    [finding] = triage_text(fixture("kv_pool_oom_scenario_ep_tp8.log"))
    assert finding.count == 8
    # Continuation lines carry no prefix: TP3's and TP0's interleaved errors both read as TP0.
    assert set(finding.ranks) == {"TP0", "TP1", "TP2", "TP4", "TP5", "TP6", "TP7"}


def test_dp_tp_prefixes_give_ranks():
    [finding] = triage_text(fixture("kv_pool_oom_sglang_7691_dp8.log"))
    assert finding.count == 8 and finding.rank == "DP0 TP0"
    assert sorted(finding.ranks) == [f"DP{i} TP{i}" for i in range(8)]


def test_rank_of_continuation_lines_ends_with_the_traceback():
    text = ("[2026-01-01 12:00:00 TP5] Scheduler hit an exception: Traceback (most recent "
            "call last):\n"
            "RuntimeError: NCCL error: unhandled cuda error\n"
            "[2026-01-01 12:00:01] Received sigquit from a child process.\n"
            "Failed to initialize NVML: Driver/library version mismatch\n")
    nvml, nccl = triage_text(text)
    assert (nccl.id, nccl.rank) == ("nccl_error", "TP5")
    assert (nvml.id, nvml.rank) == ("nvml_driver_mismatch", None)


def test_ep_prefixes_with_three_tokens():
    [finding] = triage_text(fixture("ep_expert_location_assert_scenario.log"))
    assert finding.rank == "DP0 TP0 EP0" and finding.count == 8


# --- specificity -----------------------------------------------------------------------------

def test_arch_gate_inside_graph_capture_is_the_arch_gate():
    findings = triage_text(fixture("flashinfer_arch_sglang_15650.log"))
    assert ids(findings) == ["flashinfer_arch_unsupported"]
    assert findings[0].values["supported_majors"] == "9, 10"


def test_cause_on_the_line_after_the_capture_failure_still_wins():
    findings = triage_text(fixture("nvcc_ptxas_rlinf_92_ray.log"))
    assert ids(findings) == ["nvcc_arch_unsupported"]
    assert findings[0].values["arch"] == "sm_120"


def test_capture_failure_with_an_unknown_cause_is_reported_as_such():
    [finding] = triage_text("Exception: Capture cuda graph failed: CUDA error: misaligned address\n")
    assert finding.id == "cuda_graph_capture_failed"
    assert "misaligned address" in finding.message and "--cuda-graph-max-bs" in finding.fix
    # a cause that has a signature of its own explains the capture failure
    [finding] = triage_text("Exception: Capture cuda graph failed: CUDA error: an illegal "
                            "memory access was encountered\n")
    assert finding.id == "cuda_illegal_address"


def test_oom_during_capture_is_cuda_oom():
    text = ("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB."
            " GPU 3 has a total capacity of 94.97 GiB of which 1.10 GiB is free.\n")
    [finding] = triage_text(text)
    assert finding.id == "cuda_oom"
    assert finding.values["tried_to_allocate"] == 2.0 and finding.values["gpu"] == 3


def test_several_causes_are_listed_most_specific_first():
    text = ("RuntimeError: NCCL error: unhandled cuda error\n"
            "Failed to initialize NVML: Driver/library version mismatch\n")
    assert ids(triage_text(text)) == ["nvml_driver_mismatch", "nccl_error"]


# --- values and the mem_fraction_static arithmetic ---------------------------------------------

def test_scenario_kv_pool_values_and_suggestion():
    [finding] = triage_text(fixture("kv_pool_oom_scenario_ep_tp8.log"))
    v = finding.values
    assert v["mem_fraction_static"] == pytest.approx(0.778734296875)
    assert v["avail_after_weights_gb"] == 16.3      # lowest rank (TP3)
    assert v["total_gb"] == 94.43                   # lowest "Load weight begin"
    pre = 94.43 + UNLOGGED_BEFORE_WEIGHTS_GB       # SGLang's readings around the logged ones
    post = 16.3 - UNLOGGED_AFTER_WEIGHTS_GB
    assert v["pre_load_gb"] == pytest.approx(pre, abs=0.005)
    assert v["post_load_gb"] == pytest.approx(post, abs=0.005)
    # rest = post_load - pre_load * (1 - mem_fraction_static)
    rest = post - pre * (1 - 0.778734296875)
    assert v["kv_pool_gb"] == pytest.approx(rest, abs=0.01) and rest < 0
    assert v["min_mem_fraction_static"] == pytest.approx(1 - post / pre, abs=1e-5)
    # this log shows no server_args, so SGLang's own reserve is unknown: half of the free
    # memory to the pool, 1 - 16.28 * 0.5 / 94.49 = 0.9139 -> 0.92, and the text says so
    assert "sglang_reserve_gb" not in v
    assert v["suggested_mem_fraction_static"] == 0.92
    assert finding.fix.startswith("raise --mem-fraction-static from 0.7787 to 0.92: ")
    for shown in ("16.3 GB per GPU", f"{pre:.2f} GB", f"{rest:.2f} GB", f"{1 - post / pre:.4f}", "half"):
        assert shown in finding.fix, shown
    # The operator's second launch used 0.92 and got past the memory pool (SCENARIO.md).


def test_h200_real_kv_pool_boundary_is_between_the_runs_that_failed_and_ran():
    """sglang 0.5.11 on one H200: 0.0006 died with this log, 0.001 ran (18,979 KV tokens). The
    old model (no unlogged term) put the boundary at 0.0003, below a value that failed."""
    [finding] = triage_text(fixture("kv_pool_oom_h200_sglang_0.5.11.log"))
    v = finding.values
    assert v["mem_fraction_static"] == 0.0006
    assert 0.0006 < v["min_mem_fraction_static"] < 0.001
    assert v["kv_pool_gb"] < 0  # the model says this launch fails, as it did


def test_suggestion_keeps_sglangs_own_reserve_from_the_logged_server_args():
    [finding] = triage_text(fixture("kv_pool_oom_h200_sglang_0.5.11.log"))
    v = finding.values
    # server_args: chunked_prefill_size 8192, cuda_graph_max_bs 256, tp 1, pp 1, no piecewise:
    # 512 + 8192*1.5 + 256*2 + 1/8*1024 = 13440 MB (above the 10 GB floor)
    assert v["sglang_reserve_gb"] == pytest.approx(13440 / 1024, abs=0.01)
    # rounded down so that the headroom is at least the reserve
    headroom = v["pre_load_gb"] * (1 - v["suggested_mem_fraction_static"])
    assert headroom >= v["sglang_reserve_gb"]
    assert v["suggested_mem_fraction_static"] == 0.90
    assert "SGLang's own default reserves" in finding.fix


def test_sglang_reserve_terms():
    base = {"chunked_prefill_size": 4096, "cuda_graph_max_bs": 512, "tp_size": 8, "pp_size": 1}
    assert sglang_reserve_gb(base) == pytest.approx(10.0)  # 512+6144+1024+1024 = 8704 -> floor 10 GB
    dp = {**base, "enable_dp_attention": "True", "dp_size": 8}
    assert sglang_reserve_gb(dp) == pytest.approx((8704 + 512 * 8 * 3 + 512 * 8 * 1.5) / 1024)
    spec = {**base, "speculative_algorithm": "'EAGLE'"}
    assert sglang_reserve_gb(spec) == pytest.approx(14.0)
    piecewise = {**base, "chunked_prefill_size": 8192, "disable_piecewise_cuda_graph": "False",
                 "piecewise_cuda_graph_tokens": "4, 8, 12, 16"}
    assert sglang_reserve_gb(piecewise) == pytest.approx((512 + 12288 + 1024 + 1024 + 32) / 1024)
    assert sglang_reserve_gb({"tp_size": 1}) is None


def test_inferencex_minimum_matches_sglangs_own_figure_and_is_capped():
    [finding] = triage_text(fixture("kv_pool_oom_inferencex_2128.log"))
    v = finding.values
    assert v["total_gb"] == pytest.approx(12.25 + 125.65)  # no "Load weight begin": avail + usage
    assert v["min_mem_fraction_static"] == pytest.approx(0.9113, abs=1e-4)  # SGLang said 0.9113
    assert v["suggested_mem_fraction_static"] == 0.95
    assert finding.fix.startswith("raise --mem-fraction-static from 0.88 to 0.95: ")


def test_kv_pool_without_the_fraction_still_says_what_to_change():
    [finding] = triage_text(fixture("kv_pool_oom_sglang_7691_dp8.log"))
    assert finding.values["profiled_tokens"] == -561981
    assert "suggested_mem_fraction_static" not in finding.values
    assert finding.fix.startswith("raise --mem-fraction-static")


def test_kv_pool_with_only_the_fraction_steps_it_up():
    [finding] = triage_text("RuntimeError: Not enough memory. Please try to increase "
                            "--mem-fraction-static. Current value: mem_fraction_static=0.7\n")
    assert finding.fix.startswith("raise --mem-fraction-static from 0.7 to about 0.75 (+0.05)")


def test_kv_pool_tokens_estimate_from_a_logged_kv_size():
    values = kv_pool_sizing({"mem_fraction_static": 0.8, "avail_after_weights_gb": 20.0,
                             "total_gb": 80.0, "kv_tokens": 100_000, "kv_size_gb": 5.0})
    # 1 - 19.98 * 0.5 / 80.06 = 0.8752 -> 0.88; pool 19.98 - 80.06*0.12 = 10.37 GB at 5e-5 GB/token
    assert values["suggested_mem_fraction_static"] == 0.88
    assert "about 207,456 tokens" in values["sizing"]


def test_weights_filling_the_gpu_get_no_fraction_suggestion():
    values = kv_pool_sizing({"mem_fraction_static": 0.9, "avail_after_weights_gb": 2.0,
                             "total_gb": 80.0})
    assert "suggested_mem_fraction_static" not in values
    assert "more GPUs" in values["no_room"]


def test_other_extracted_values():
    assert triage_text(fixture("driver_too_old_yuan_65.log"))[0].values["driver_cuda"] == "11.0"
    assert triage_text(fixture("nvml_mismatch_mozilla_1167.log"))[0].values == {
        "nvml_library_version": "550.144"}
    nccl = triage_text(fixture("nccl_dist_backend_hkproj_1.log"))[0]
    assert nccl.values["nccl_version"] == "2.18.6" and "2.18.6" in nccl.fix
    symm = triage_text(fixture("symm_mem_keyerror_12_scenario.log"))[0]
    assert symm.values == {"major": 12} and "SM12" in symm.message
    abi = triage_text(fixture("abi_sgl_kernel_sglang_8131.log"))[0]
    assert abi.values["symbol"] == "cuGreenCtxStreamCreate"
    assert abi.values["library"].endswith("common_ops.abi3.so")


def test_display_of_numbers():
    assert display(0.778734296875) == "0.7787" and display(16.30) == "16.3" and display(8) == "8"


# --- line cleaning ---------------------------------------------------------------------------

@pytest.mark.parametrize("raw, text, rank", [
    ("\x1b[31m[2026-01-01 12:00:00 TP3] boom\x1b[0m", "boom", "TP3"),
    ("[2026-01-01 12:00:00] boom", "boom", None),
    ("[TP3] boom", "boom", "TP3"),
    ("[DP0 TP1 EP1] boom", "boom", "DP0 TP1 EP1"),
    ("sglang-1  | [2025-11-01 16:50:36 TP0] boom", "boom", "TP0"),
    ("2025-03-07 23:50:27,531 - __main__ - INFO - [2025-03-07 23:50:27 TP0] boom", "boom", "TP0"),
    ("(SGLangWorker pid=38138) boom", "boom", None),
    ("[] boom", "[] boom", None),
    ("Capturing batches (bs=1 avail_mem=37.08 GB):  50%|\r", "Capturing batches (bs=1 "
     "avail_mem=37.08 GB):  50%|", None),
])
def test_clean_line(raw, text, rank):
    cleaned = clean_line(raw)
    assert (cleaned.text, cleaned.rank) == (text, rank)


def test_ansi_and_timestamps_do_not_change_the_result():
    plain = ("Exception: Capture cuda graph failed: No supported CUDA architectures found for "
             "major versions [9, 10].")
    coloured = f"\x1b[1;31m[2026-01-01 12:00:00 TP3] {plain}\x1b[0m"
    assert ids(triage_text(plain)) == ids(triage_text(coloured)) == ["flashinfer_arch_unsupported"]
    assert triage_text(coloured)[0].rank == "TP3"


def test_line_numbers_count_newlines_only():
    text = "progress 10%\rprogress 100%\nok\nRuntimeError: NCCL error: unhandled system error\n"
    assert triage_text(text)[0].line == 3


# --- live feeding ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.log")))
def test_incremental_equals_batch(name):
    triage = Triage()
    emitted = []
    for line in fixture(name).split("\n"):
        emitted += triage.feed(line)
    emitted += triage.close()
    batch = triage_text(fixture(name))
    assert [f.to_dict() for f in triage.findings()] == [f.to_dict() for f in batch]
    assert sorted(ids(emitted)) == sorted(ids(batch))
    assert triage_lines(fixture(name).splitlines(keepends=True)) == batch


def test_live_fatal_line_is_reported_once_the_program_could_have_said_it_recovered():
    # A fatal finding waits `recovered.within` lines (or close) for "retrying without ..." before
    # the launcher calls the server crashed: llama.cpp recovers from some allocation failures.
    within = load_signatures().recovered.within
    triage = Triage()
    lines = fixture("kv_pool_oom_scenario_ep_tp8.log").split("\n")
    fatal = first_line_containing("kv_pool_oom_scenario_ep_tp8.log", "Not enough memory")
    for number, line in enumerate(lines, start=1):
        new = triage.feed(line)
        if number < fatal + within:
            assert new == []
            assert triage.pending() == (number >= fatal)
        else:
            assert ids(new) == ["kv_pool_oom"]
            break


def test_a_failure_the_program_recovers_from_is_no_finding_live_or_batch():
    # llama.cpp's server (ggml-org/llama.cpp#26297): the first compute-buffer reservation fails,
    # it retries without pipeline parallelism and serves.
    log = ("1.06.520.077 E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 51748.72 MiB on device 1: "
           "cudaMalloc failed: out of memory\n"
           "1.06.520.086 E graph_reserve: failed to allocate compute buffers\n"
           "1.06.520.107 W sched_reserve: compute buffer allocation failed, retrying without pipeline parallelism\n"
           "1.07.304.130 I srv    load_model: initializing, n_slots = 1\n")
    assert triage_text(log) == []
    triage = Triage()
    assert [f for line in log.splitlines() for f in triage.feed(line)] + triage.close() == []
    # the same failure with no such line after it is one
    assert ids(triage_text(log.replace("retrying without pipeline parallelism", "giving up"))) == ["cuda_oom"]
    # and one that comes back after the recovery is reported
    assert ids(triage_text(log + log.splitlines()[0] + "\n")) == ["cuda_oom"]


def test_live_generic_capture_failure_waits_for_a_more_specific_cause():
    triage = Triage()
    lines = fixture("nvcc_ptxas_rlinf_92_ray.log").split("\n")
    capture = first_line_containing("nvcc_ptxas_rlinf_92_ray.log", "Capture cuda graph failed")
    emitted = {n: ids(triage.feed(line)) for n, line in enumerate(lines, start=1)}
    assert emitted[capture] == []                       # held: a better cause may follow
    better = capture + 1                                # it does, on the next line
    within = load_signatures().recovered.within         # and is reported once no recovery came
    assert [emitted[n] for n in range(better, better + within + 1)] == [[]] * within + [["nvcc_arch_unsupported"]]
    assert triage.close() == []                         # the generic one is never reported


def test_live_generic_capture_failure_is_released_after_hold_lines_or_close():
    hold = load_signatures().hold_lines
    triage = Triage()
    assert triage.feed("Exception: Capture cuda graph failed: something odd") == []
    released = []
    for _ in range(hold):
        released += triage.feed("Possible solutions: ...")
    assert ids(released) == ["cuda_graph_capture_failed"]
    closing = Triage()
    closing.feed("Exception: Capture cuda graph failed: something odd")
    assert ids(closing.close()) == ["cuda_graph_capture_failed"]


REAL_LINES = sorted({line for p in FIXTURES.glob("*.log") for line in p.read_text().split("\n")})


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(REAL_LINES), max_size=400), st.integers(min_value=1, max_value=300))
def test_blocks_of_any_size_give_what_feeding_line_by_line_gives(lines, chunk):
    """Real log lines in any order, read in blocks that cut lines anywhere: the batch path
    (prefilter over blocks, look-backs across block boundaries) equals the live path."""
    import io

    text = "\n".join(lines)
    streamed = triage_stream(io.BytesIO(text.encode()), block=chunk)
    fed = triage_lines(text.split("\n")) if text else triage_lines([])
    assert [f.to_dict() for f in streamed] == [f.to_dict() for f in fed]


def test_triage_file_streams_in_constant_memory(tmp_path):
    """A log bigger than many blocks: read in blocks, the finding on its real line."""
    import envmgr.bench.triage as triage_module

    steady = "[2026-12-01 08:00:42] Decode batch, #running-req: 8, #token: 1280, token usage: 0.00\n"
    repeats = 3 * triage_module.CHUNK // len(steady)
    log = tmp_path / "server.log"
    log.write_text(steady * repeats + fixture("nccl_sglang_8974.log"))
    findings = triage_file(log)
    assert ids(findings) == ["nccl_error"]
    assert findings[0].line == repeats + first_line_containing("nccl_sglang_8974.log", "RuntimeError: NCCL error")


# --- robustness ------------------------------------------------------------------------------

LOGGY = st.text(alphabet=st.characters(codec="utf-8"), max_size=200) | st.sampled_from([
    "KeyError: 12", "AssertionError", "Capture cuda graph failed:", "undefined symbol:",
    "mem_fraction_static=0.", "Load weight end. avail mem=1e9 GB, mem usage=-3 GB",
    "Load weight begin. avail mem=0 GB", "\x1b[", "[TP", "[2026-01-01 12:00:00 TP3]",
    "Not enough memory. Please try to increase --mem-fraction-static. mem_fraction_static=1.5",
    "KV Cache is allocated. #tokens: 0, KV size: 0.00 GB", "found version 0)",
])


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(LOGGY, max_size=4).map("".join), max_size=30))
def test_random_text_never_raises(lines):
    findings = triage_lines(lines)
    for finding in findings:
        assert 1 <= finding.line <= len(lines)
        json.dumps(finding.to_dict())


def test_kv_sizing_with_degenerate_numbers_never_raises():
    for total in (0.0, -1.0, 1e-9):
        kv_pool_sizing({"mem_fraction_static": 1.5, "avail_after_weights_gb": 3.0,
                        "total_gb": total})


# --- command line ----------------------------------------------------------------------------

def test_triage_command_json_shape_and_exit_codes(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text(fixture("kv_pool_oom_scenario_ep_tp8.log"))
    assert main(["triage", str(log), "--json"]) == 1
    [item] = json.loads(capsys.readouterr().out)
    assert {"id", "line", "message", "fix", "values"} <= item.keys()
    assert item["id"] == "kv_pool_oom" and item["values"]["suggested_mem_fraction_static"] == 0.92
    assert "sizing" not in item["values"]  # the explanation is in "fix", values stay data
    clean = tmp_path / "clean.log"
    clean.write_text(fixture("clean_pr11830_single_gpu.log"))
    assert main(["triage", str(clean), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_triage_command_human_output(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text(fixture("flashinfer_arch_sglang_15650.log"))
    assert main(["triage", str(log)]) == 1
    out = capsys.readouterr().out
    assert "flashinfer_arch_unsupported" in out and "line 1" in out and "fix:" in out


def test_triage_command_unreadable_log_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot read log"):
        read_findings(tmp_path / "missing.log")


def test_render_no_findings(capsys):
    render_findings("x.log", [])
    assert "no known failure signature" in capsys.readouterr().out


def test_triage_through_the_cli(tmp_path, capsys):
    from envmgr.cli import main

    log = tmp_path / "server.log"
    log.write_text(fixture("nccl_sglang_8974.log"))
    assert main(["triage", str(log), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["id"] == "nccl_error"
    with pytest.raises(SystemExit):  # argparse's --help exits after printing
        build_parser().parse_args(["triage", "--help"])
    assert "usage: envmgr triage" in capsys.readouterr().out


def test_a_real_feature_off_warning_is_not_a_failure():
    [finding] = triage_text(fixture("cuda_graph_off_h200_sglang_0.5.11.log"))
    assert not finding.fatal and finding.feature == "CUDA graphs"
    assert "torch native attention backend" in finding.message
