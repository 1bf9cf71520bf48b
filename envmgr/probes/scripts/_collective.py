"""Shared by nccl_allreduce and nccl_alltoall (prepended by the runner): bandwidth rows
with the nccl-tests formulas, NCCL_ALGO/NCCL_PROTO combinations, CUDA-graph capture."""

from __future__ import annotations


def algbw_gbs(nbytes: int, seconds: float) -> float:
    """nccl-tests algbw: bytes / time, in GB/s (1e9)."""
    return nbytes / seconds / 1e9 if seconds > 0 else 0.0


def bandwidth_row(nbytes: int, elements: int, time_us_max: float, wrong: int, factor: float) -> dict:
    algbw = algbw_gbs(nbytes, time_us_max / 1e6)
    return {"bytes": nbytes, "elements": elements, "time_us": round(time_us_max, 2),
            "algbw_gbs": round(algbw, 3), "busbw_gbs": round(algbw * factor, 3), "wrong": wrong}


def merge_rank_rows(per_rank: list[list[dict]], factor: float) -> list[dict]:
    """One row per size: the slowest rank's time (the step waits for it), wrong summed over ranks."""
    rows = []
    for same_size in zip(*per_rank):
        slowest = max(row["time_us"] for row in same_size)
        wrong = sum(row["wrong"] for row in same_size)
        rows.append(bandwidth_row(same_size[0]["bytes"], same_size[0]["elements"], slowest, wrong, factor))
    return rows


def combo_label(combo: dict) -> str:
    parts = [f"{k}={combo[k]}" for k in ("algo", "proto") if combo.get(k)]
    return ",".join(parts) or "default"


def combo_env(combo: dict) -> dict:
    return {"NCCL_ALGO": combo.get("algo"), "NCCL_PROTO": combo.get("proto")}


def graph_capture(torch, graph):
    """Capture context; thread_local so the NCCL watchdog thread's CUDA calls cannot break the capture."""
    try:
        return torch.cuda.graph(graph, capture_error_mode="thread_local")
    except TypeError:  # torch before capture_error_mode
        return torch.cuda.graph(graph)


def capture_everywhere(torch, dist, device, graph, issue) -> None:
    """Capture issue() into graph on every rank, or raise on every rank: a rank replaying alone would hang."""
    error = None
    try:
        with graph_capture(torch, graph):
            issue()
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    flag = torch.tensor([0 if error is None else 1], device=device, dtype=torch.int32)
    dist.all_reduce(flag)  # eager: every rank learns whether any rank's capture failed
    if int(flag.item()):
        raise RuntimeError(f"capture failed: {error or 'on another rank'}")


def eager_part_of_failure(ranks: list[dict], factor: float) -> list[dict] | None:
    """Eager rows every rank sent before a later stage (the graph) failed or hung, merged; else None."""
    partials = [r.get("partial") or {} for r in ranks]
    if all(p.get("eager") for p in partials):
        return merge_rank_rows([p["eager"] for p in partials], factor)
    return None


def nccl_version_text(torch) -> str | None:
    """torch's NCCL as "2.28.3" (a tuple in torch 2.x, an int before); reading it does not touch CUDA."""
    try:
        version = torch.cuda.nccl.version()
    except Exception:
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def fmt_us(value) -> str:
    return "n/a" if value is None else f"{value:.1f} us"
