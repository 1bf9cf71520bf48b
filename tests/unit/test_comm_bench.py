"""The comm microbenchmark without a GPU: shapes and bytes, verdicts, args from a spec, the budget arithmetic.

The probe script is standalone (probe contract), so its pure functions are reached by loading it as
the runner assembles it. Whole runs use gloo on the CPU where an interpreter with torch is named by
ENVMGR_TORCH_PYTHON (or this one has torch), and skip otherwise.
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

import comm_summary
import pytest

from envmgr.bench import comm
from envmgr.errors import UsageError
from envmgr.probes import runner
from envmgr.probes.contract import MARKER
from envmgr.probes.runner import ProbeInfo, assemble, load_module, script_source
from envmgr.spec.models import Spec
from envmgr.targets.base import CommandResult, Target

bench = load_module("comm_bench")
KIMI = {"tokens": 4, "hidden": 7168, "top_k": 8, "attention_layers": 61, "moe_layers": 61, "dtype": "bfloat16"}
# The line proposed for runner.PROBES; used here only where the registry does not have it yet.
PROPOSED_INFO = ProbeInfo(300, True, "verify-step communication: TP all-reduces vs EP all-to-alls, eager and graph")


# --- the contract -------------------------------------------------------------------------


def imported_roots(nodes) -> set[str]:
    roots = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])
    return roots


def test_script_is_standalone_and_uses_the_comm_libraries():
    tree = ast.parse(assemble("comm_bench"))
    assert imported_roots(tree.body) <= {"__future__", "os", "time", "traceback"}  # torch only inside functions
    assert "envmgr" not in imported_roots(ast.walk(tree))
    assert bench.PROBE == "comm_bench" and callable(bench.probe) and callable(bench.run_workers)


# --- shapes and bytes ---------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "world", "splits"), [
    (32, 1, [32]), (32, 2, [16, 16]), (32, 8, [4] * 8), (32, 3, [11, 11, 10]), (2, 4, [1, 1, 0, 0]),
])
def test_even_splits_spread_rows_and_keep_them_all(rows, world, splits):
    assert bench.even_splits(rows, world) == splits and sum(splits) == rows


def test_tp_plan_is_122_all_reduces_of_tokens_x_hidden_bf16():
    plan = bench.tp_plan(KIMI, 8)
    assert plan["ops"] == 122 and plan["message_bytes"] == 4 * 7168 * 2 == 57344  # 56 KiB at 4 tokens
    assert plan["step_bytes"] == 122 * 57344
    assert plan["bus_bytes_per_rank_step"] == 122 * 57344 * 7 // 4  # ring: 2(n-1)/n = 1.75
    assert bench.tp_plan(dict(KIMI, tokens=3), 8)["message_bytes"] == 43008  # the scenario's ~42 KB
    assert bench.tp_plan(KIMI, 1)["bus_bytes_per_rank_step"] == 0


def test_ep_plan_is_61_dispatches_and_combines_of_tokens_x_top_k_rows():
    plan = bench.ep_plan(KIMI, 8)
    assert plan["ops"] == 122 and plan["rows_per_rank"] == 32 and plan["splits"] == [4] * 8
    assert plan["message_bytes"] == 32 * 7168 * 2 == 458752  # 448 KiB per rank per dispatch
    assert plan["step_bytes"] == 122 * 458752
    # 28 of 32 rows leave on dispatch, 7 x 4 go back on combine: 2(n-1)/n of the rows per layer
    assert plan["bus_bytes_per_rank_step"] == 61 * 56 * 7168 * 2
    assert bench.ep_plan(KIMI, 1)["bus_bytes_per_rank_step"] == 0


def test_ep_plan_takes_the_busiest_rank_when_rows_do_not_divide():
    plan = bench.ep_plan(dict(KIMI, tokens=1, top_k=8, moe_layers=1), 3)  # splits 3, 3, 2
    assert plan["splits"] == [3, 3, 2]
    assert plan["bus_bytes_per_rank_step"] == ((8 - 3) + 2 * 3) * 7168 * 2


def test_shape_from_args_defaults_to_kimi_and_refuses_nonsense():
    shape = bench.shape_from_args({"draft_tokens": 4, "batch": 1})
    assert {k: shape[k] for k in KIMI} == KIMI and shape["dtype_bytes"] == 2 and shape["draft_tokens"] == 4
    with pytest.raises(ValueError, match="dtype"):
        bench.shape_from_args({"dtype": "int8"})
    with pytest.raises(ValueError, match="tokens must be at least 1"):
        bench.shape_from_args({"tokens": 0})


# --- verdicts from the workers' results ---------------------------------------------------


def rank_result(tp_us=2000.0, ep_us=3000.0, wrong=0, graph=True, graph_error=None):
    eager = {"tp": {"step_us": tp_us, "wrong": wrong}, "ep": {"step_us": ep_us, "wrong": 0}}
    result = {"init_s": 0.4, "eager": eager, "graph": None, "device": "NVIDIA H200", "capability": [9, 0]}
    if graph:
        result["graph"] = {"tp": {"step_us": tp_us / 10, "wrong": 0}, "ep": {"step_us": ep_us / 10, "wrong": 0}}
        result["graph_error"] = {}
    else:
        result["graph_skipped"] = "no CUDA graph on CPU"
    if graph_error:
        del result["graph"]["ep"]
        result["graph_error"] = {"ep": graph_error}
    return result


def run_of(*ranks):
    return {"ranks": dict(enumerate(ranks)), "timed_out": [], "wall_s": 1.5}


def header(world_size=2):
    return {"torch": "2.11.0+cu130", "backend": "nccl", "shape": bench.shape_from_args({})}


def test_two_ranks_take_the_slowest_rank_and_divide_by_ops():
    measured = bench.summarize_run(run_of(rank_result(), rank_result(tp_us=2440.0)), KIMI, 2)
    assert measured["ok"] and measured["error"] is None
    assert measured["tp"]["eager"] == {"step_us": 2440.0, "per_op_us": 20.0,
                                       "algbw_gbs": round(122 * 57344 / 2440e-6 / 1e9, 3), "wrong": 0}
    assert measured["ep"]["graph"]["step_us"] == 300.0 and measured["ep"]["graph"]["per_op_us"] == 2.459
    result = bench.overall_result(measured, 2, header())
    assert result["status"] == "pass"
    assert result["summary"].startswith("2 ranks, 4 tokens: TP 122 all-reduces of 56 KiB: eager 2440 us/step")
    assert "EP 61x(dispatch+combine) of 448 KiB" in result["summary"]
    assert result["details"]["launch_overhead_only"] is False and "multi_rank" not in result["details"]


def test_one_rank_says_the_numbers_are_launch_overhead_only():
    result = bench.overall_result(bench.summarize_run(run_of(rank_result()), KIMI, 1), 1, header(1))
    assert result["status"] == "pass"
    assert result["summary"].endswith("one rank: launch overhead only (no data crosses a bus)")
    assert result["details"]["launch_overhead_only"] is True and result["details"]["multi_rank"]["skipped"]


def test_wrong_elements_fail():
    measured = bench.summarize_run(run_of(rank_result(wrong=5), rank_result()), KIMI, 2)
    assert not measured["ok"] and measured["error"] == "tp eager: 5 wrong elements"
    assert bench.overall_result(measured, 2, header())["status"] == "fail"


def test_a_graph_capture_failure_keeps_the_other_numbers_and_fails():
    error = "RuntimeError: capture failed: operation not permitted when stream is capturing"
    measured = bench.summarize_run(run_of(*[rank_result(graph_error=error)] * 2), KIMI, 2)
    assert measured["error"] == f"ep graph: {error}"
    assert measured["ep"]["graph_error"] == error and "graph" not in measured["ep"]
    assert measured["tp"]["graph"]["step_us"] == 200.0 and measured["ep"]["eager"]["step_us"] == 3000.0


def test_without_graphs_the_skip_reason_is_kept():
    measured = bench.summarize_run(run_of(rank_result(graph=False)), KIMI, 1)
    assert measured["ok"] and measured["tp"]["graph_skipped"] == "no CUDA graph on CPU"


def test_a_hang_in_the_graph_stage_keeps_the_eager_numbers():
    partial = {k: v for k, v in rank_result().items() if k not in ("graph", "graph_error")}
    partial["graph"] = None
    hung = {"error": "no result within 5 s (hang; silent ranks [0, 1]); worker killed", "partial": partial}
    measured = bench.summarize_run(run_of(hung, dict(hung)), KIMI, 2)
    assert measured["error"].startswith("graph: rank 0: no result within 5 s (hang")
    assert measured["tp"]["eager"]["step_us"] == 2000.0 and "graph" not in measured["tp"]
    assert "graph_skipped" not in measured["tp"]


def test_a_rank_error_before_eager_keeps_its_text_and_the_plans():
    run = run_of({"error": "DistBackendError: NCCL error: unhandled system error", "traceback": "tb"},
                 {"error": "no result after rank 0 failed; worker killed"})
    measured = bench.summarize_run(run, KIMI, 2)
    assert measured["error"] == "rank 0: DistBackendError: NCCL error: unhandled system error"
    assert measured["traceback"] == "tb" and measured["tp"]["message_bytes"] == 57344
    result = bench.overall_result(measured, 2, header())
    assert result["status"] == "fail" and "eager n/a" in result["summary"]


# --- args from a spec ---------------------------------------------------------------------


def spec_with(configs: dict | None, count: int = 8) -> Spec:
    data = {"apiVersion": "envmgr/v1", "metadata": {"name": "pcie8"},
            "hardware": {"gpu": {"arch": "sm_120", "count": count}}}
    if configs is not None:
        data["benchmarks"] = {"model_path": "/models/kimi", "server_flags": {"--tp-size": 8}, "configs": configs}
    return Spec.model_validate(data)


EAGLE3 = {"flags": {"--speculative-algorithm": "EAGLE3", "--speculative-num-draft-tokens": 3}}


def test_args_without_a_spec_are_the_kimi_shape_at_four_tokens_on_every_visible_gpu():
    args = comm.comm_args()
    assert {k: args[k] for k in KIMI} == KIMI and "world_size" not in args
    assert args["tokens"] == 4 and args["draft_tokens"] == 4 and args["batch"] == 1
    assert args["tokens_from"].startswith("4 draft tokens (default")


def test_args_take_draft_tokens_from_the_eagle3_config_and_gpus_from_the_spec():
    args = comm.comm_args(spec_with({"baseline": {}, "eagle3": EAGLE3}), batch=2)
    assert args["draft_tokens"] == 3 and args["batch"] == 2 and args["tokens"] == 6
    assert args["world_size"] == 8
    assert args["tokens_from"] == ("3 draft tokens (spec pcie8, config eagle3: --speculative-num-draft-tokens)"
                                   " x batch 2")


def test_args_default_draft_tokens_when_the_config_does_not_set_them():
    args = comm.comm_args(spec_with({"eagle": {"flags": {"--speculative-algorithm": "EAGLE"}}}, count=2))
    assert args["draft_tokens"] == 4 and args["world_size"] == 2 and "sets no" in args["tokens_from"]
    assert comm.comm_args(spec_with(None))["draft_tokens"] == 4


def test_a_config_that_drops_the_algorithm_is_not_speculative():
    dropped = {"flags": {"--speculative-algorithm": None, "--speculative-num-draft-tokens": 9}}
    assert comm.comm_args(spec_with({"plain": dropped}))["draft_tokens"] == 4


def test_overrides_win_none_keeps_the_default_and_typos_are_refused():
    args = comm.comm_args(spec_with({"eagle3": EAGLE3}), world_size=None, tokens=16, graph=False)
    assert args["world_size"] == 8 and args["tokens"] == 16 and args["tokens_from"] == "given"
    assert args["graph"] is False
    with pytest.raises(UsageError, match="world_sizes"):
        comm.comm_args(world_sizes=2)


def test_the_args_are_all_read_by_the_script():
    shape = bench.shape_from_args(comm.comm_args(batch=3))
    assert shape["tokens"] == 12 and shape["batch"] == 3
    assert set(comm.comm_args(spec_with({}))) <= comm.ARG_KEYS
    assert {k: bench.DEFAULT_SHAPE[k] for k in comm.MODEL_SHAPE} == comm.MODEL_SHAPE  # one model, two sides


# --- the step budget and the summary ------------------------------------------------------


def test_step_budget_is_one_token_of_the_baseline():
    assert comm_summary.baseline_step_budget_ms() == pytest.approx(11.173, abs=1e-3)  # 1000 / 89.5
    assert comm_summary.DEFAULT_STEP_BUDGET_MS == comm_summary.baseline_step_budget_ms(89.5)
    assert comm_summary.baseline_step_budget_ms(82) == pytest.approx(12.195, abs=1e-3)
    with pytest.raises(UsageError):
        comm_summary.baseline_step_budget_ms(0)


def probe_result(world_size=8, graph=True):
    measured = bench.summarize_run(run_of(*[rank_result(tp_us=24400.0, ep_us=12200.0, graph=graph)] * world_size),
                                   KIMI, world_size)
    out = bench.overall_result(measured, world_size, header())
    return {"probe": "comm_bench", "status": out["status"], "summary": out["summary"], "details": out["details"]}


def test_summary_gives_us_per_step_and_share_of_budget_for_every_scheme_and_mode():
    summary = comm_summary.summarize(probe_result(), 10.0)
    rows = {(r["scheme"], r["mode"]): r for r in summary["rows"]}
    assert list(rows) == [("tp", "eager"), ("tp", "graph"), ("ep", "eager"), ("ep", "graph")]
    assert rows["tp", "eager"]["step_us"] == 24400.0 and rows["tp", "eager"]["per_op_us"] == 200.0
    assert rows["tp", "eager"]["share_of_budget"] == 2.44  # 24.4 ms / 10 ms
    assert rows["ep", "graph"]["step_us"] == 1220.0 and rows["ep", "graph"]["share_of_budget"] == 0.122
    assert summary["ep_over_tp"] == {"eager": 0.5, "graph": 0.5}
    assert summary["best"]["scheme"] == "ep" and summary["best"]["mode"] == "graph"
    assert summary["step_budget_ms"] == 10.0 and not summary["launch_overhead_only"]


def test_summary_compares_with_the_scenarios_hand_measured_step():
    summary = comm_summary.summarize(probe_result())  # default budget: 1000 / 89.5 ms
    assert summary["scenario"]["tp_step_us"] == 24400.0
    assert summary["scenario"]["share_of_budget"] == pytest.approx(24.4 / (1000 / 89.5), abs=1e-4)  # 2.18
    assert summary["rows"][0]["share_of_budget"] == summary["scenario"]["share_of_budget"]


def test_summary_of_a_run_without_graphs_says_why_and_flags_launch_overhead():
    summary = comm_summary.summarize(probe_result(world_size=1, graph=False)["details"])
    graph_rows = [r for r in summary["rows"] if r["mode"] == "graph"]
    assert all(r["step_us"] is None and r["why_none"] == "no CUDA graph on CPU" for r in graph_rows)
    assert summary["ep_over_tp"]["graph"] is None and summary["ep_over_tp"]["eager"] == 0.5
    assert summary["launch_overhead_only"] and "launch overheads" in summary["caveat"]
    lines = comm_summary.summary_lines(summary)
    assert any(line.startswith("tp     graph") and "n/a: no CUDA graph on CPU" in line for line in lines)


def test_summary_of_a_skipped_probe_has_no_numbers():
    skipped = {"status": "skip", "summary": "no NVIDIA GPU visible", "details": {"reason": "no NVIDIA GPU visible"}}
    summary = comm_summary.summarize(skipped)
    assert summary["best"] is None and all(r["step_us"] is None for r in summary["rows"])
    assert summary["rows"][0]["why_none"] == "no numbers for this scheme"
    assert comm_summary.summary_lines(summary)[0].startswith("step budget 11.17 ms/token")


# --- through the runner -------------------------------------------------------------------


class RecordingRunner(Target):
    """A target test double: records the argv and answers with a probe's marked line."""

    url = "fake://"

    def __init__(self, answer: dict):
        self.answer, self.calls = answer, []

    def run(self, argv, timeout=60.0, env=None):
        self.calls.append({"argv": list(argv), "timeout": timeout, "env": dict(env or {})})
        return CommandResult(tuple(argv), 0, "noise\n" + MARKER + json.dumps(self.answer) + "\n", "", 2.5)


@pytest.fixture
def registered(monkeypatch):
    if "comm_bench" not in runner.PROBES:
        monkeypatch.setitem(runner.PROBES, "comm_bench", PROPOSED_INFO)


def test_run_comm_bench_sends_the_assembled_script_with_the_args(registered):
    fake = RecordingRunner({"probe": "comm_bench", "status": "pass", "summary": "ok", "details": {"world_size": 2},
                            "duration_s": 2.0})
    lines: list[str] = []
    args = comm.comm_args(world_size=2, timeout_s=30)
    result = comm_summary.run_comm_bench(fake, "/opt/env/bin/python", args, lines.append)
    [call] = fake.calls
    assert call["argv"][:2] == ["/opt/env/bin/python", "-c"] and call["argv"][2] == script_source("comm_bench")
    assert json.loads(call["argv"][3]) == args
    assert call["timeout"] == 30 + comm_summary.STARTUP_S and call["env"] == {"PYTHONUNBUFFERED": "1"}
    assert result["status"] == "pass" and result["details"] == {"world_size": 2} and result["wall_s"] == 2.5
    assert lines[0].startswith("comm_bench: 2 rank(s), 4 tokens x 7168") and lines[-1].startswith("comm_bench: pass")


def test_run_comm_bench_without_a_timeout_uses_the_registrys(registered):
    fake = RecordingRunner({"probe": "comm_bench", "status": "skip", "summary": "no GPU", "details": {}})
    comm_summary.run_comm_bench(fake, "python3", comm.comm_args())
    assert fake.calls[0]["timeout"] == runner.PROBES["comm_bench"].timeout_s


@pytest.mark.skipif("comm_bench" not in runner.PROBES,
                    reason="the PROBES line for comm_bench is not in envmgr/probes/runner.py yet (the lead adds it)")
def test_comm_bench_is_registered_as_an_exclusive_probe():
    info = runner.PROBES["comm_bench"]
    assert info.exclusive and info.timeout_s >= 120 + comm_summary.STARTUP_S


# --- skipping without torch or a GPU ------------------------------------------------------


def test_without_torch_the_script_skips_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    result = load_module("comm_bench").probe({})
    assert result["status"] == "skip" and result["summary"].startswith("torch is not importable")
    assert result["details"]["reason"] == result["summary"]


# --- whole runs with gloo (needs torch; CPU only) -----------------------------------------


def torch_python() -> str | None:
    named = os.environ.get("ENVMGR_TORCH_PYTHON")
    if named:
        return named
    return sys.executable if importlib.util.find_spec("torch") else None


needs_torch = pytest.mark.skipif(torch_python() is None,
                                 reason="torch is not importable here (set ENVMGR_TORCH_PYTHON to a python with torch)")


def run_script(args: dict, env: dict | None = None, timeout: float = 300) -> dict:
    """The runner's way: python -c SOURCE ARGS_JSON; the marked line is the result."""
    out = subprocess.run([torch_python(), "-c", script_source("comm_bench"), json.dumps(args)],
                         capture_output=True, text=True, timeout=timeout, cwd="/",
                         env={**os.environ, "PATH": "/usr/bin:/bin", **(env or {})})
    lines = [line for line in out.stdout.splitlines() if line.startswith(MARKER)]
    assert len(lines) == 1, out.stdout[-2000:] + out.stderr[-2000:]
    return json.loads(lines[0][len(MARKER):])


@needs_torch
def test_gloo_two_ranks_run_the_whole_verify_step_correctly():
    args = comm.comm_args(world_size=2, backend="gloo", graph=False, iters=2, warmup=1)
    result = run_script(args)
    details = result["details"]
    assert result["status"] == "pass", result["summary"]
    assert details["world_size"] == 2 and details["launch_overhead_only"] is False
    for name, message in (("tp", 57344), ("ep", 458752)):
        scheme = details[name]
        assert scheme["ops"] == 122 and scheme["message_bytes"] == message
        assert scheme["eager"]["wrong"] == 0 and scheme["eager"]["step_us"] > 0
        assert scheme["eager"]["per_op_us"] == pytest.approx(scheme["eager"]["step_us"] / 122, abs=1e-3)
        assert scheme["graph_skipped"] == "not asked (args graph=false)"
    assert details["shape"]["tokens_from"].startswith("4 draft tokens")
    summary = comm_summary.summarize(result)
    assert [r["step_us"] is not None for r in summary["rows"]] == [True, False, True, False]


@needs_torch
def test_gloo_three_ranks_with_rows_that_do_not_divide_are_correct():
    result = run_script({"backend": "gloo", "world_size": 3, "attention_layers": 2, "moe_layers": 2,
                         "tokens": 1, "iters": 2, "warmup": 1})
    assert result["status"] == "pass", result["summary"]
    assert result["details"]["ep"]["splits"] == [3, 3, 2] and result["details"]["ep"]["eager"]["wrong"] == 0
    assert result["details"]["tp"]["graph_skipped"] == "no CUDA graph on CPU"


@needs_torch
def test_gloo_one_rank_runs_and_says_launch_overhead_only():
    result = run_script({"backend": "gloo", "attention_layers": 2, "moe_layers": 2, "iters": 2, "warmup": 1})
    assert result["status"] == "pass" and result["details"]["world_size"] == 1
    assert "launch overhead only" in result["summary"]


@needs_torch
def test_gloo_hang_kills_the_ranks_at_the_timeout():
    started = time.monotonic()
    result = run_script({"backend": "gloo", "world_size": 2, "timeout_s": 2, "_hang_rank": 1})
    assert time.monotonic() - started < 40
    assert result["status"] == "fail" and "hang" in result["summary"]


@needs_torch
def test_nccl_without_a_gpu_skips_with_the_reason():
    result = run_script({}, env={"PATH": "/nonexistent", "CUDA_VISIBLE_DEVICES": ""})
    assert result["status"] == "skip", result
    assert result["summary"] in (result["details"]["reason"],)
    assert "no NVIDIA GPU visible" in result["summary"] or "CPU build" in result["summary"]


def test_probe_processes_get_the_specs_env_and_no_policy_of_envmgrs_own():
    """Site policy (NVLink multicast off on the lent machines) lives in the spec's env."""
    from envmgr.probes.session import run_on
    from envmgr.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "specs" / "h200.yaml").spec
    fake = RecordingRunner({"probe": "gpu", "status": "pass", "summary": "ok", "details": {}, "duration_s": 0.1})
    run_on(fake, spec, ["gpu"], python="/opt/env/bin/python")
    [call] = [c for c in fake.calls if "PYTHONUNBUFFERED" in c["env"]]  # the rest: facts for the predictions
    assert call["env"] == {"PYTHONUNBUFFERED": "1", "NCCL_NVLS_ENABLE": "0",
                           "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    run_on(fake, None, ["gpu"], python="/opt/env/bin/python")
    assert fake.calls[-1]["env"] == {"PYTHONUNBUFFERED": "1"}


def test_comm_shapes_come_from_the_models_config_where_readable(tmp_path):
    from envmgr.spec import Spec

    model = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "tiny-qwen3moe"
    spec = Spec.model_validate({"apiVersion": "envmgr/v1", "metadata": {"name": "m"},
                                "hardware": {"gpu": {"arch": "sm_90", "count": 2}},
                                "benchmarks": {"model_path": str(model), "configs": {"a": {}}}})
    args = comm.comm_args(spec)
    config = json.loads((model / "config.json").read_text())
    assert (args["hidden"], args["attention_layers"], args["moe_layers"], args["top_k"]) == (
        config["hidden_size"], config["num_hidden_layers"], config["num_hidden_layers"], config["num_experts_per_tok"])
    assert args["shape_from"].endswith("tiny-qwen3moe/config.json")
    # a model this host cannot read: the probe's documented default, said so
    unreadable = spec.model_copy(update={"benchmarks": spec.benchmarks.model_copy(update={"model_path": str(tmp_path)})})
    args = comm.comm_args(unreadable)
    assert args["hidden"] == comm.MODEL_SHAPE["hidden"] and args["shape_from"].startswith("default")


def test_probe_processes_never_get_the_specs_secrets():
    from envmgr.probes.args import probe_env
    from envmgr.spec import Spec

    spec = Spec.model_validate({"apiVersion": "envmgr/v1", "metadata": {"name": "s"},
                                "hardware": {"gpu": {"arch": "sm_90"}},
                                "env": {"HF_TOKEN": "hf_x", "MY_PASS": "p", "NCCL_NVLS_ENABLE": "0"},
                                "secrets": {"MY_PASS": True}})
    assert probe_env(spec) == {"NCCL_NVLS_ENABLE": "0"}
