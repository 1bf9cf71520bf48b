"""The scenario's arithmetic on comm_bench results: microseconds per verify step as a share of
the decode step budget of the plain TP8 baseline (89.5 tok/s on the 8x RTX PRO 6000 host).

Used by the tests and the GPU evidence only (it was library code no command called).

Step budget. The plain TP8 baseline decodes 89.5 tok/s, so it spends 1000 / 89.5 = 11.17 ms per
output token. Speculation pays off only if one verify step (with its drafting) costs less than
11.17 ms per token it accepts. ``share_of_budget`` = the step's communication / 11.17 ms: above
1, communication alone costs more than a plain token. The scenario's 122 all-reduces x ~200 us
= 24.4 ms give 2.18.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from envmgr.bench.comm import MODEL_SHAPE, PROBE_ID
from envmgr.errors import UsageError
from envmgr.probes.runner import run_probe
from envmgr.targets.base import Runner

BASELINE_TOK_S = 89.5  # SCENARIO.md: plain TP8 with --cuda-graph-max-bs 128
SCENARIO_ALLREDUCE_US = 200.0  # SCENARIO.md: one ~42 KB NCCL all-reduce on the PCIe host
DEFAULT_STEP_BUDGET_MS = 1000.0 / BASELINE_TOK_S  # 11.17 ms per output token (module docstring)
STARTUP_S = 60.0  # interpreter start and torch import before the workers' own timeout counts


def baseline_step_budget_ms(baseline_tok_s: float = BASELINE_TOK_S) -> float:
    """Milliseconds the plain baseline spends per output token (1000 / 89.5 = 11.17)."""
    if baseline_tok_s <= 0:
        raise UsageError(f"baseline throughput must be positive, got {baseline_tok_s}")
    return 1000.0 / baseline_tok_s


def run_comm_bench(backend: Runner, python: str, args: dict[str, Any],
                   progress: Callable[[str], None] = lambda line: None,
                   env: dict[str, str] | None = None) -> dict[str, Any]:
    """The probe result (``ProbeResult.to_dict()``): status, summary, details, wall_s."""
    progress(f"{PROBE_ID}: {args.get('world_size', 'all visible')} rank(s), {args.get('tokens')} tokens "
             f"x {args.get('hidden')}, top-k {args.get('top_k')}")
    timeout = float(args["timeout_s"]) + STARTUP_S if "timeout_s" in args else None  # else the registry's
    result = run_probe(backend, python, PROBE_ID, args, timeout_s=timeout, env=env)
    progress(f"{PROBE_ID}: {result.status} ({result.wall_s:.1f}s) {result.summary}")
    return result.to_dict()


def summarize(result: dict[str, Any], step_budget_ms: float = DEFAULT_STEP_BUDGET_MS) -> dict[str, Any]:
    """Microseconds per verify step for TP and EP, eager and graph, and their share of the step budget.

    ``result``: what ``run_comm_bench`` returns (or just its ``details``)."""
    details = result.get("details", result)
    rows = [mode_row(scheme, mode, details.get(scheme) or {}, step_budget_ms)
            for scheme in ("tp", "ep") for mode in ("eager", "graph")]
    measured = [row for row in rows if row["step_us"] is not None]
    out = {"status": result.get("status"), "summary": result.get("summary"),
           "world_size": details.get("world_size"), "shape": details.get("shape"),
           "launch_overhead_only": bool(details.get("launch_overhead_only")),
           "step_budget_ms": round(step_budget_ms, 3),
           "budget_meaning": "ms the plain baseline spends per output token (1000 / tok/s); share_of_budget "
                             "= a step's communication / budget = tokens a verify step must accept just to "
                             "pay for its communication",
           "rows": rows, "ep_over_tp": ep_over_tp(rows),
           "best": min(measured, key=lambda row: row["step_us"]) if measured else None,
           "scenario": scenario_reference(details, step_budget_ms)}
    if out["launch_overhead_only"]:
        out["caveat"] = "one rank: no data crossed a bus; these are launch overheads, not PCIe/NVLink times"
    return out


def mode_row(scheme: str, mode: str, numbers: dict[str, Any], budget_ms: float) -> dict[str, Any]:
    measured = numbers.get(mode)
    row = {"scheme": scheme, "mode": mode, "ops": numbers.get("ops"), "message_bytes": numbers.get("message_bytes"),
           "step_us": None, "per_op_us": None, "share_of_budget": None}
    if not measured:
        row["why_none"] = (numbers.get(f"{mode}_error") or numbers.get(f"{mode}_skipped")
                           or ("not measured" if numbers else "no numbers for this scheme"))
        return row
    row.update(step_us=measured["step_us"], per_op_us=measured["per_op_us"], wrong=measured.get("wrong", 0),
               share_of_budget=round(measured["step_us"] / 1000.0 / budget_ms, 4))
    return row


def ep_over_tp(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """EP's step time over TP's, per mode: below 1, the all-to-alls cost less than the all-reduces."""
    by = {(row["scheme"], row["mode"]): row["step_us"] for row in rows}
    ratios: dict[str, float | None] = {}
    for mode in ("eager", "graph"):
        tp, ep = by.get(("tp", mode)), by.get(("ep", mode))
        ratios[mode] = round(ep / tp, 3) if tp and ep is not None else None
    return ratios


def scenario_reference(details: dict[str, Any], budget_ms: float) -> dict[str, Any]:
    """The scenario's hand-measured TP step (PCIe, 8 ranks), for a side-by-side look."""
    ops = (details.get("tp") or {}).get("ops") or 2 * MODEL_SHAPE["moe_layers"]
    step_us = ops * SCENARIO_ALLREDUCE_US
    return {"tp_step_us": step_us, "share_of_budget": round(step_us / 1000.0 / budget_ms, 4),
            "source": f"SCENARIO.md: {ops} all-reduces x ~{SCENARIO_ALLREDUCE_US:g} us (8x RTX PRO 6000, PCIe)"}


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """A small table for the terminal."""
    lines = [f"step budget {summary['step_budget_ms']:.2f} ms/token; world size {summary['world_size']}"]
    lines.append(f"{'scheme':6} {'mode':6} {'ops':>4} {'KiB/op':>7} {'us/step':>9} {'us/op':>7} {'share':>6}")
    for row in summary["rows"]:
        kib = f"{row['message_bytes'] / 1024:.0f}" if row["message_bytes"] else "-"
        if row["step_us"] is None:
            lines.append(f"{row['scheme']:6} {row['mode']:6} {row['ops'] or '-':>4} {kib:>7}  n/a: {row['why_none']}")
            continue
        lines.append(f"{row['scheme']:6} {row['mode']:6} {row['ops']:>4} {kib:>7} {row['step_us']:>9.1f} "
                     f"{row['per_op_us']:>7.2f} {row['share_of_budget']:>6.3f}")
    ref = summary["scenario"]
    lines.append(f"scenario: {ref['tp_step_us'] / 1000:.1f} ms/step, share {ref['share_of_budget']:.2f} "
                 f"({ref['source']})")
    if summary.get("caveat"):
        lines.append(summary["caveat"])
    return lines
