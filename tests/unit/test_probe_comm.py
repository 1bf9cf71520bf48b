"""The communication probes (nccl_allreduce, nccl_alltoall, symm_mem, p2p) without a GPU.

Scripts are standalone (probe contract), so their pure functions are reached by loading each file
as a module. The worker plumbing (fork, result pipes, timeout, kill) runs for real with plain
Python targets; the gloo tests run whole probes where torch is importable (ENVMGR_TORCH_PYTHON
names an interpreter that has it) and skip otherwise.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envmgr.probes.contract import MARKER
from envmgr.probes.runner import assemble, load_module, script_source

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "probes_comm"
COMM_SCRIPTS = ("nccl_allreduce", "nccl_alltoall", "symm_mem", "p2p")


def load_script(name: str):
    """The probe as the runner assembles it (with its shared libraries)."""
    return load_module(name)


allreduce = load_script("nccl_allreduce")
alltoall = load_script("nccl_alltoall")
symm = load_script("symm_mem")
p2p = load_script("p2p")


# --- the contract: standalone, torch only inside probe() ---------------------------------


@pytest.mark.parametrize("name", COMM_SCRIPTS)
def test_script_defines_the_contract_and_imports_only_stdlib_at_top(name):
    source = assemble(name)
    tree = ast.parse(source)
    top_imports = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            top_imports |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            top_imports.add((node.module or "").split(".")[0])
    assert top_imports <= {"__future__", "os", "time", "traceback", "re", "itertools"}
    every_import = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
    every_import |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "envmgr" not in every_import
    module = load_script(name)
    assert module.PROBE == name and callable(module.probe)


# --- bandwidth (nccl-tests formulas) ------------------------------------------------------


@pytest.mark.parametrize(("n", "factor"), [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75)])
def test_allreduce_busbw_factor_is_2_n_minus_1_over_n(n, factor):
    assert allreduce.allreduce_busbw_factor(n) == pytest.approx(factor)


@pytest.mark.parametrize(("n", "factor"), [(1, 0.0), (2, 0.5), (8, 0.875)])
def test_alltoall_busbw_factor_is_n_minus_1_over_n(n, factor):
    assert alltoall.alltoall_busbw_factor(n) == pytest.approx(factor)


def test_algbw_is_bytes_over_seconds_in_decimal_gb():
    assert allreduce.algbw_gbs(43008, 10e-6) == pytest.approx(4.3008)
    assert allreduce.algbw_gbs(43008, 0.0) == 0.0


def test_bandwidth_row_applies_the_factor_to_algbw():
    row = allreduce.bandwidth_row(1_000_000, 500_000, 100.0, 0, 1.75)
    assert row == {"bytes": 1_000_000, "elements": 500_000, "time_us": 100.0, "algbw_gbs": 10.0,
                   "busbw_gbs": 17.5, "wrong": 0}


def test_merge_rank_rows_takes_the_slowest_rank_and_sums_wrong():
    rank0 = [{"bytes": 8192, "elements": 4096, "time_us": 10.0, "wrong": 0}]
    rank1 = [{"bytes": 8192, "elements": 4096, "time_us": 12.5, "wrong": 3}]
    [row] = allreduce.merge_rank_rows([rank0, rank1], allreduce.allreduce_busbw_factor(2))
    assert row["time_us"] == 12.5 and row["wrong"] == 3
    assert row["busbw_gbs"] == row["algbw_gbs"] == pytest.approx(8192 / 12.5e-6 / 1e9, abs=1e-3)


# --- sizes --------------------------------------------------------------------------------


def test_default_sweep_is_8k_to_32m_by_four():
    assert allreduce.size_sweep() == [8192, 32768, 131072, 524288, 2097152, 8388608, 33554432]


def test_sizes_always_include_the_verify_step_and_stay_whole_elements():
    assert allreduce.VERIFY_BYTES == 43008 == 21504 * 2
    sizes = allreduce.sizes_to_run({"sizes": [8192, 8192, 1001]}, 4)
    assert sizes == [1000, 8192, 43008]
    assert allreduce.sizes_to_run({}, 2)[1] == 32768 and 43008 in allreduce.sizes_to_run({}, 2)


def test_dispatch_elements_split_into_equal_chunks():
    assert alltoall.dispatch_elements(3, 7168, 8) == 21504  # 42 KiB of bf16: the verify size
    assert alltoall.dispatch_elements(1, 7168, 3) % 3 == 0  # 7168 is not a multiple of 3: rounded down
    assert alltoall.VERIFY_TOKENS * alltoall.HIDDEN * 2 == allreduce.VERIFY_BYTES


def test_payload_refuses_an_unknown_dtype():
    with pytest.raises(ValueError, match="dtype"):
        allreduce.payload_from_args({"dtype": "int8"}, "nccl")


# --- GPU count without initialising CUDA --------------------------------------------------


@pytest.mark.parametrize(("value", "physical", "expected"), [
    (None, 8, 8), ("", 8, 0), ("-1", 8, 0), ("0", 8, 1), ("0,1,2,3", 8, 4),
    ("0,9,1", 2, 1),  # CUDA stops at the first invalid ordinal
    ("1,1", 2, 1),  # a repeated ordinal is invalid too
    ("GPU-3f2a1b7c-0000-0000-0000-000000000000", 1, 1), ("0,1", 1, 1),
])
def test_count_visible_reads_cuda_visible_devices_like_cuda(value, physical, expected):
    assert allreduce.count_visible(value, physical) == expected


# --- env of the workers -------------------------------------------------------------------


def test_worker_env_has_no_policy_of_its_own_and_records_what_the_workers_see(monkeypatch):
    """Multicast off is site policy: the spec's env (specs/h200.yaml) sets it, workers inherit it."""
    assert allreduce.worker_env({}) == {}
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    monkeypatch.delenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", raising=False)
    monkeypatch.delenv("NVSHMEM_DISABLE_NVLS", raising=False)
    assert allreduce.multicast_seen({"NVSHMEM_DISABLE_NVLS": "1"}) == {
        "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": None, "NVSHMEM_DISABLE_NVLS": "1"}


def test_worker_env_args_override_defaults_and_combination_wins():
    env = allreduce.worker_env({"env": {"NCCL_NVLS_ENABLE": 1, "NCCL_DEBUG": "WARN", "NCCL_ALGO": "Ring"}},
                               allreduce.combo_env({"algo": "Tree"}))
    assert env["NCCL_NVLS_ENABLE"] == "1" and env["NCCL_DEBUG"] == "WARN"
    assert env["NCCL_ALGO"] == "Tree" and env["NCCL_PROTO"] is None


def test_apply_env_sets_and_unsets(monkeypatch):
    monkeypatch.setenv("NCCL_ALGO", "Tree")
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    allreduce.apply_env(allreduce.worker_env({"env": {"NCCL_NVLS_ENABLE": "0"}}, allreduce.combo_env({"algo": None})))
    assert "NCCL_ALGO" not in os.environ  # "default" means NCCL chooses, whatever the parent had
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"


@pytest.mark.parametrize(("combo", "label"), [
    ({"algo": None}, "default"), ({"algo": "Tree"}, "algo=Tree"),
    ({"algo": "Ring", "proto": "LL"}, "algo=Ring,proto=LL"),
])
def test_combo_label(combo, label):
    assert allreduce.combo_label(combo) == label


# --- verdicts -----------------------------------------------------------------------------


def rank_result(time_us=20.0, wrong=0, graph=True, graph_error=None):
    rows = [{"bytes": b, "elements": b // 2, "time_us": time_us, "wrong": wrong} for b in (8192, 43008)]
    result = {"init_s": 0.5, "eager": rows, "graph": [dict(r, time_us=time_us / 2) for r in rows] if graph else None,
              "device": "NVIDIA H200", "capability": [9, 0]}
    if graph_error:
        result["graph"], result["graph_error"] = [], graph_error
    return result


def run_of(*ranks):
    return {"ranks": dict(enumerate(ranks)), "timed_out": [], "wall_s": 1.0}


def test_one_rank_passes_with_busbw_zero_and_says_the_multi_rank_part_is_skipped():
    env = allreduce.worker_env({}, allreduce.combo_env({"algo": None}))
    combo = allreduce.summarize_combination({"algo": None}, env, run_of(rank_result()), 1)
    result = allreduce.overall_result([combo], 1, {"torch": "2.11.0+cu130"})
    assert result["status"] == "pass"
    assert "multi-rank part skipped: one GPU" in result["summary"]
    assert "eager 20.0 us, graph 10.0 us" in result["summary"]
    assert result["details"]["multi_rank"]["skipped"]
    assert all(row["busbw_gbs"] == 0 for row in combo["eager"] + combo["graph"])
    assert result["details"]["verify_size_us"] == {"default": {"eager_us": 20.0, "graph_us": 10.0}}


CAPTURE_ERROR = "RuntimeError: operation not permitted when stream is capturing"


def test_tree_failing_in_a_graph_fails_with_the_combination_and_error_text():
    ok = allreduce.summarize_combination({"algo": "Ring"}, {}, run_of(rank_result(), rank_result()), 2)
    tree = allreduce.summarize_combination(
        {"algo": "Tree"}, {}, run_of(*[rank_result(graph_error=CAPTURE_ERROR)] * 2), 2)
    result = allreduce.overall_result([ok, tree], 2, {})
    assert result["status"] == "fail"
    assert result["summary"].startswith("2 ranks: algo=Tree: graph: RuntimeError: operation not permitted")
    assert tree["eager"] and "graph" not in tree  # the eager numbers of the failing combination are kept
    assert ok["eager"][0]["busbw_gbs"] == ok["eager"][0]["algbw_gbs"]  # factor 1 at two ranks


def test_wrong_elements_fail_the_combination():
    combo = allreduce.summarize_combination({"algo": None}, {}, run_of(rank_result(wrong=7), rank_result()), 2)
    assert not combo["ok"] and "eager 8192 B: 7 wrong elements" in combo["error"]


def test_a_rank_error_fails_with_its_text_and_traceback():
    run = run_of({"error": "DistBackendError: NCCL error: unhandled system error", "traceback": "tb"},
                 {"error": "no result after rank 0 failed; worker killed"})
    combo = allreduce.summarize_combination({"algo": None}, {}, run, 2)
    assert combo["error"] == "rank 0: DistBackendError: NCCL error: unhandled system error"
    assert combo["traceback"] == "tb"
    assert allreduce.overall_result([combo], 2, {})["status"] == "fail"


def test_alltoall_rows_carry_tokens_and_verify_time():
    rows = [{"bytes": t * 7168 * 2, "elements": t * 7168, "time_us": 30.0, "wrong": 0} for t in (1, 3)]
    rank = {"init_s": 0.1, "eager": rows, "graph": rows}
    combo = alltoall.summarize_combination({"algo": None}, {}, run_of(rank, rank), 2, [1, 3])
    assert [r["tokens"] for r in combo["eager"]] == [1, 3]
    assert combo["eager"][1]["busbw_gbs"] == pytest.approx(combo["eager"][1]["algbw_gbs"] * 0.5, abs=1e-3)
    result = alltoall.overall_result([combo], 2, {"hidden": 7168})
    assert result["status"] == "pass" and "3 tokens x 7168" in result["summary"]


# --- symm_mem -----------------------------------------------------------------------------


@pytest.mark.parametrize(("visible", "sizes"), [(0, []), (1, [1]), (2, [2]), (8, [8])])
def test_symm_mem_default_world_sizes(visible, sizes):
    assert symm.default_world_sizes(visible) == sizes


@pytest.mark.parametrize(("sizes", "results", "extra"), [
    ([2], [{"world_size": 2, "ok": False}], 1),                 # failed across GPUs: try one
    ([2], [{"world_size": 2, "ok": True}], None),                # passed: nothing to diagnose
    ([1, 2], [{"world_size": 1, "ok": True}, {"world_size": 2, "ok": False}], None),  # 1 ran
    ([1], [{"world_size": 1, "ok": False}], None),
    ([2], [{"world_size": 2, "ok": False, "skip": "no P2P"}], None),
])
def test_symm_mem_runs_world_size_one_only_to_diagnose_a_multi_gpu_failure(sizes, results, extra):
    assert symm.diagnostic_size(sizes, results) == extra


def test_symm_mem_capability_gate():
    assert symm.capability_ok((8, 0)) and symm.capability_ok([12, 0]) and not symm.capability_ok((7, 5))


def symm_rank(rank):
    return {"init_s": 0.2, "device": "NVIDIA H200", "capability": [9, 0], "peer_wrong": 0,
            "handle": {"rank": rank, "world_size": 1, "multicast": False}, "backend": "CUDA",
            "one_shot_all_reduce": {"bytes": 43008, "time_us": 8.0, "wrong": 0}}


def test_symm_mem_reports_which_world_size_failed_and_where():
    one = symm.summarize_world_size(1, run_of(symm_rank(0)))
    two = symm.summarize_world_size(2, run_of(
        {"error": "rendezvous: RuntimeError: CUDA driver error: invalid device ordinal", "failed_step": "rendezvous"},
        {"error": "no result after rank 0 failed; worker killed"}))
    result = symm.overall_result([one, two], {"gpus_visible": 2})
    assert result["status"] == "fail"
    assert result["summary"] == ("world size 2: rank 0: rendezvous: RuntimeError: CUDA driver error: "
                                 "invalid device ordinal (passed: 1)")
    assert two["failed_step"] == "rendezvous"


def test_symm_mem_one_gpu_passes_with_one_shot_time():
    result = symm.overall_result([symm.summarize_world_size(1, run_of(symm_rank(0)))], {"gpus_visible": 1})
    assert result["status"] == "pass"
    assert "one_shot_all_reduce 42 KiB at 1: 8.0 us" in result["summary"]
    assert "multi-rank part skipped: one GPU" in result["summary"]


def test_symm_mem_hang_in_one_shot_keeps_the_passed_gate():
    gate = {k: v for k, v in symm_rank(0).items() if k != "one_shot_all_reduce"}
    run = run_of({"error": "no result within 30 s (hang; silent ranks [0]); worker killed", "partial": gate})
    ws = symm.summarize_world_size(1, run)
    assert ws["ok"] and ws["one_shot_all_reduce"]["error"].startswith("rank 0: no result within 30 s")


def test_symm_mem_old_gpu_skips_with_reason():
    why = "compute capability 7.5 < 8.0: symmetric memory needs sm_80+"
    skipped = symm.summarize_world_size(1, run_of({"skip": why}))
    result = symm.overall_result([skipped], {"gpus_visible": 1})
    assert result["status"] == "skip" and "7.5 < 8.0" in result["summary"]


def test_one_shot_failure_is_reported_but_does_not_fail():
    rank = dict(symm_rank(0), one_shot_all_reduce={"error": "RuntimeError: not supported"})
    ws = symm.summarize_world_size(1, run_of(rank))
    assert ws["ok"] and ws["one_shot_all_reduce"] == {"error": "RuntimeError: not supported"}


# --- p2p: nvidia-smi topo -m --------------------------------------------------------------


def topo(name):
    return p2p.parse_topo_matrix((FIXTURES / name).read_text())


def test_topo_of_the_real_h200_one_gpu():
    parsed = topo("nvidia_smi_topo_h200_x1.txt")  # recorded: header wrapped in terminal escapes
    assert parsed["gpus"] == ["GPU0"] and parsed["nics"] == []
    assert parsed["links"] == {"GPU0": {"GPU0": "X"}}
    assert parsed["affinity"]["GPU0"] == {"CPU Affinity": "0-15", "NUMA Affinity": "0", "GPU NUMA ID": "N/A"}
    assert p2p.gpu_links(parsed) == {}


def test_topo_of_eight_h200_with_nics():
    parsed = topo("nvidia_smi_topo_h200_x8.txt")
    assert parsed["gpus"] == [f"GPU{i}" for i in range(8)]
    assert parsed["nics"] == [f"NIC{i}" for i in range(8)]
    assert p2p.gpu_links(parsed) == {"NV18": 56}
    assert parsed["links"]["GPU3"]["NIC3"] == "PIX" and parsed["links"]["GPU0"]["NIC4"] == "SYS"
    assert parsed["affinity"]["GPU5"] == {"CPU Affinity": "48-95,144-191", "NUMA Affinity": "1", "GPU NUMA ID": "N/A"}
    assert "NIC0" not in parsed["affinity"]  # NIC rows have no affinity columns
    assert parsed["nic_names"]["NIC7"] == "mlx5_7"


def test_topo_of_two_pcie_gpus():
    parsed = topo("nvidia_smi_topo_rtxpro6000_x2.txt")
    assert parsed["links"]["GPU0"]["GPU1"] == parsed["links"]["GPU1"]["GPU0"] == "NODE"
    assert p2p.gpu_links(parsed) == {"NODE": 2}


def test_topo_of_an_older_driver_naming_nics_by_device():
    text = ("\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
            "GPU0\t X \tNV1\tSYS\t0-15\n"
            "GPU1\tNV1\t X \tSYS\t0-15\n"
            "mlx5_0\tSYS\tSYS\t X \t\n\nLegend:\n\n  X    = Self\n")
    parsed = p2p.parse_topo_matrix(text)
    assert parsed["gpus"] == ["GPU0", "GPU1"] and parsed["nics"] == ["mlx5_0"]
    assert parsed["links"]["mlx5_0"]["GPU1"] == "SYS"
    assert parsed["affinity"]["GPU1"] == {"CPU Affinity": "0-15"}


def test_topo_without_a_matrix_is_refused():
    with pytest.raises(ValueError, match="GPU0"):
        p2p.parse_topo_matrix("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


@pytest.mark.parametrize(("link", "kind"), [("X", "self"), ("NV18", "nvlink"), ("NV1", "nvlink"), ("PIX", "pcie"),
                                             ("NODE", "pcie"), ("SYS", "pcie"), ("SOC", "pcie"), ("??", "unknown")])
def test_link_class(link, kind):
    assert p2p.link_class(link) == kind


def test_cuda_devices_map_to_nvidia_smi_indexes_by_uuid():
    listing = ("GPU 0: NVIDIA H200 (UUID: GPU-aaaaaaaa-0000-0000-0000-000000000000)\n"
               "GPU 1: NVIDIA H200 (UUID: GPU-bbbbbbbb-0000-0000-0000-000000000000)\n"
               "  MIG 1g.18gb     Device  0: (UUID: MIG-cccccccc-0000-0000-0000-000000000000)\n")
    smi = p2p.parse_smi_uuids(listing)
    assert smi == {0: "GPU-aaaaaaaa-0000-0000-0000-000000000000", 1: "GPU-bbbbbbbb-0000-0000-0000-000000000000"}
    # CUDA_VISIBLE_DEVICES=1,0: torch's device 0 is nvidia-smi's GPU1 (torch prints uuids without "GPU-")
    cuda = ["BBBBBBBB-0000-0000-0000-000000000000", "aaaaaaaa-0000-0000-0000-000000000000", None]
    assert p2p.cuda_to_smi_index(cuda, smi) == [1, 0, None]


def test_pair_status_names_the_pairs_without_access():
    pairs = [{"src": 0, "dst": 1, "link": "NODE", "peer_access": True},
             {"src": 1, "dst": 0, "link": "SYS", "peer_access": False}]
    status, summary = p2p.pair_status(pairs, "torch", 2)
    assert status == "fail" and "1->0 (SYS)" in summary and "1/2" in summary
    status, summary = p2p.pair_status(pairs[:1], "nvml", 2)
    assert status == "pass" and "links: NODE" in summary
    assert p2p.pair_status(pairs, None, 2)[0] == "skip"


# --- worker plumbing, for real, with plain-Python targets ---------------------------------


def answer_target(rank, world_size, store_path, payload):
    return {"rank": rank, "world_size": world_size, "algo": os.environ.get("NCCL_ALGO"),
            "nvls": os.environ.get("NCCL_NVLS_ENABLE")}


def raising_target(rank, world_size, store_path, payload):
    if rank == 1:
        raise RuntimeError("CUDA driver error: invalid device ordinal")
    time.sleep(60)  # a peer that would wait in a collective forever


def dying_target(rank, world_size, store_path, payload):
    os._exit(3)


def pid_then_hang_target(rank, world_size, store_path, payload):
    Path(payload["pid_dir"], str(rank)).write_text(str(os.getpid()))
    if rank == 0:
        return {"ok": True}
    time.sleep(3600)


def partial_then_hang_target(rank, world_size, store_path, payload):
    allreduce.report_partial({"eager": [{"bytes": 8192, "elements": 4096, "time_us": 9.0 + rank, "wrong": 0}]})
    time.sleep(3600)  # the graph stage hangs


@pytest.mark.slow
def test_a_hang_after_a_partial_report_keeps_the_partial():
    run = allreduce.run_workers(partial_then_hang_target, 2, {}, timeout_s=2.0)
    assert run["timed_out"] == [0, 1]
    assert run["ranks"][1]["partial"]["eager"][0]["time_us"] == 10.0
    combo = allreduce.summarize_combination({"algo": "Tree"}, {}, run, 2)
    assert not combo["ok"] and combo["error"].startswith("graph: rank 0: no result within 2 s (hang")
    assert combo["eager"][0]["time_us"] == 10.0  # the eager numbers survive the hung graph stage


def test_workers_answer_with_their_rank_and_the_env_given():
    env = allreduce.worker_env({"env": {"NCCL_NVLS_ENABLE": "0"}}, allreduce.combo_env({"algo": "Tree"}))
    run = allreduce.run_workers(answer_target, 3, {"env": env}, timeout_s=30)
    assert run["timed_out"] == []
    assert [run["ranks"][r]["rank"] for r in range(3)] == [0, 1, 2]
    assert {run["ranks"][r]["algo"] for r in range(3)} == {"Tree"}
    assert {run["ranks"][r]["nvls"] for r in range(3)} == {"0"}


@pytest.mark.slow
def test_a_failing_rank_is_reported_and_its_waiting_peers_are_killed_after_the_grace():
    started = time.monotonic()
    run = allreduce.run_workers(raising_target, 2, {}, timeout_s=60, grace_s=1.0)
    assert time.monotonic() - started < 15
    assert allreduce.first_error(run) == "rank 0: no result after rank 1 failed; worker killed"
    assert run["ranks"][1]["error"] == "RuntimeError: CUDA driver error: invalid device ordinal"
    assert "raising_target" in run["ranks"][1]["traceback"]


def test_a_worker_that_dies_is_reported_with_its_exit_code():
    run = allreduce.run_workers(dying_target, 1, {}, timeout_s=30)
    assert run["ranks"][0]["error"] == "worker died without a result (exit code 3)"


@pytest.mark.slow
def test_a_hang_is_killed_at_the_timeout_and_leaves_no_process(tmp_path):
    started = time.monotonic()
    run = symm.run_workers(pid_then_hang_target, 2, {"pid_dir": str(tmp_path)}, timeout_s=2.0)
    assert time.monotonic() - started < 10
    assert run["timed_out"] == [1] and run["ranks"][0] == {"ok": True}
    assert "within 2 s (hang; silent ranks [1])" in run["ranks"][1]["error"]
    for pid_file in tmp_path.iterdir():
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid_file.read_text()), 0)


# --- the probes here: no GPU -> skip with the reason --------------------------------------


@pytest.mark.parametrize("name", COMM_SCRIPTS)
def test_probe_without_gpu_skips_with_a_reason(name, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi, even on a developer's GPU box
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # and no GPU for torch
    monkeypatch.setitem(sys.modules, "pynvml", None)
    module = load_script(name)
    if hasattr(module, "torch_cuda"):  # p2p asks torch in-process; CUDA may be up already in this pytest
        monkeypatch.setattr(module, "torch_cuda", lambda: None)
    result = module.probe({})
    assert result["status"] == "skip", result
    assert result["summary"] and result["details"]["reason"] == result["summary"]


# --- whole probes through the contract with gloo (needs torch; CPU only) ------------------


def torch_python() -> str | None:
    named = os.environ.get("ENVMGR_TORCH_PYTHON")
    if named:
        return named
    return sys.executable if importlib.util.find_spec("torch") else None


def run_probe(python: str, name: str, args: dict, timeout: float = 120) -> dict:
    """The runner's way: python -c SOURCE ARGS_JSON, the marked line is the result."""
    source = script_source(name)
    out = subprocess.run([python, "-c", source, json.dumps(args)], capture_output=True, text=True,
                         timeout=timeout, cwd="/", env={**os.environ, "PATH": "/usr/bin:/bin"})
    lines = [line for line in out.stdout.splitlines() if line.startswith(MARKER)]
    assert len(lines) == 1, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads(lines[0][len(MARKER):])


needs_torch = pytest.mark.skipif(torch_python() is None,
                                 reason="torch is not importable here (set ENVMGR_TORCH_PYTHON to a python with torch)")


@needs_torch
def test_gloo_allreduce_two_ranks_is_correct_and_timed():
    result = run_probe(torch_python(), "nccl_allreduce",
                       {"backend": "gloo", "world_size": 2, "sizes": [8192], "combinations": [{"algo": None}],
                        "iters": 3, "warmup": 1})
    assert result["status"] == "pass", result
    [combo] = result["details"]["combinations"]
    assert [row["bytes"] for row in combo["eager"]] == [8192, 43008]
    assert all(row["wrong"] == 0 and row["time_us"] > 0 for row in combo["eager"])
    assert combo["graph_skipped"] == "no CUDA graph on CPU"


@needs_torch
def test_gloo_alltoall_three_ranks_with_uneven_hidden_is_correct():
    result = run_probe(torch_python(), "nccl_alltoall",
                       {"backend": "gloo", "world_size": 3, "tokens": [1, 3], "iters": 3, "warmup": 1})
    assert result["status"] == "pass", result
    rows = result["details"]["combinations"][0]["eager"]
    assert [row["tokens"] for row in rows] == [1, 3] and all(row["wrong"] == 0 for row in rows)
    assert rows[1]["busbw_gbs"] == pytest.approx(rows[1]["algbw_gbs"] * 2 / 3, abs=2e-3)


@needs_torch
def test_gloo_hang_of_one_combination_is_reported_and_the_next_still_runs():
    started = time.monotonic()
    result = run_probe(torch_python(), "nccl_allreduce",
                       {"backend": "gloo", "world_size": 2, "sizes": [8192], "timeout_s": 2, "_hang_rank": 1,
                        "combinations": [{"algo": None}, {"algo": "Ring"}]})
    assert time.monotonic() - started < 40
    assert result["status"] == "fail"
    assert [c["label"] for c in result["details"]["combinations"]] == ["default", "algo=Ring"]
    assert "hang" in result["summary"]
