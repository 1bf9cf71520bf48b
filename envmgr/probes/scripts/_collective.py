"""Shared by nccl_allreduce and nccl_alltoall (prepended by the runner): bandwidth rows
with the nccl-tests formulas, NCCL_ALGO/NCCL_PROTO combinations, CUDA-graph capture."""

from __future__ import annotations

import time


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


def combination_verdict(combo: dict, env: dict, run: dict, factor: float, row_label,
                        decorate=lambda out: out) -> dict:
    """One NCCL_ALGO/NCCL_PROTO combination's verdict and numbers from its workers' results.

    ``row_label(row)`` names a row in the "wrong elements" error; ``decorate(out)`` adds what a
    probe's rows carry besides bytes (it runs before that error is written, and on failures)."""
    ranks = [run["ranks"][r] for r in sorted(run["ranks"])]
    out = {"label": combo_label(combo), "env": env, "multicast": multicast_seen(env),
           "wall_s": run["wall_s"], "ok": False, "error": first_error(run)}
    if out["error"]:
        out["traceback"] = next((r.get("traceback") for r in ranks if r.get("traceback")), None)
        eager = eager_part_of_failure(ranks, factor)
        if eager is not None:  # every rank finished eager: the failure is in the graph stage
            out["eager"], out["error"] = eager, f"graph: {out['error']}"
        return decorate(out)
    out["init_s"] = max(r["init_s"] for r in ranks)
    out["eager"] = merge_rank_rows([r["eager"] for r in ranks], factor)
    graph_error = next((f"graph: {r['graph_error']}" for r in ranks if r.get("graph_error")), None)
    if ranks[0]["graph"] is None:
        out["graph_skipped"] = ranks[0].get("graph_skipped")
    elif not graph_error:
        out["graph"] = merge_rank_rows([r["graph"] for r in ranks], factor)
    decorate(out)
    wrong = [f"{mode} {row_label(row)}: {row['wrong']} wrong elements"
             for mode in ("eager", "graph") for row in out.get(mode) or [] if row["wrong"]]
    out["error"] = graph_error or ("; ".join(wrong) if wrong else None)
    out["ok"] = out["error"] is None
    for key in ("device", "capability"):
        if key in ranks[0]:
            out[key] = ranks[0][key]
    return out


def nccl_version_text(torch) -> str | None:
    """torch's NCCL as "2.28.3" (a tuple in torch 2.x, an int before); reading it does not touch CUDA."""
    try:
        version = torch.cuda.nccl.version()
    except Exception:
        return None
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def fmt_us(value) -> str:
    return "n/a" if value is None else f"{value:.1f} us"


DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}


def timing_options(args: dict, backend: str) -> dict:
    """The options the workers of nccl_allreduce / nccl_alltoall read: dtype, loops, graph."""
    dtype = args.get("dtype", "bfloat16")
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype {dtype!r} not one of {sorted(DTYPE_BYTES)}")
    return {"backend": backend, "dtype": dtype,
            "iters": int(args.get("iters", 20)), "warmup": int(args.get("warmup", 5)),
            "graph": bool(args.get("graph", True)), "graph_ops": int(args.get("graph_ops", 10)),
            "graph_replays": int(args.get("graph_replays", 5)), "_hang_rank": args.get("_hang_rank")}


def collective_header(args: dict):
    """(torch, header, world_size, None) or (None, header, None, why not): the start every
    collective probe shares; NCCL needs one visible GPU per rank."""
    backend = args.get("backend", "nccl")
    torch, why_not = torch_or_skip_reason(backend)
    if torch is None:
        return None, {}, None, why_not
    header = {"torch": torch.__version__, "cuda": torch.version.cuda, "backend": backend}
    if backend != "nccl":
        return torch, header, int(args.get("world_size") or 1), None
    header["nccl_version"] = nccl_version_text(torch)
    visible, source = visible_gpu_count()
    header.update(gpus_visible=visible, gpu_count_source=source)
    if visible == 0:
        return torch, header, None, f"no NVIDIA GPU visible ({source})"
    world_size = int(args.get("world_size") or visible)
    if world_size > visible:
        return torch, header, None, f"asked for {world_size} ranks, {visible} GPU(s) visible"
    return torch, header, world_size, None


def skipped(header: dict, why: str) -> dict:
    return {"status": "skip", "summary": why, "details": {**header, "reason": why}}


def collective_worker(rank: int, world_size: int, store_path: str, payload: dict,
                      items: list, eager_row, graph_row) -> dict:
    """One rank of a collective probe: join, then an eager row and a CUDA-graph row per item.
    A graph stage that fails or hangs keeps the eager rows (report_partial)."""
    import torch
    import torch.distributed as dist

    dtype = getattr(torch, payload["dtype"])
    began = time.monotonic()
    device = init_process_group(rank, world_size, store_path, payload["backend"])
    dist.barrier()
    result = {"init_s": round(time.monotonic() - began, 3), "eager": [], "graph": None}
    if device.type == "cuda":
        result["device"] = torch.cuda.get_device_name(device)
        result["capability"] = list(torch.cuda.get_device_capability(device))
    for item in items:
        result["eager"].append(eager_row(torch, dist, device, dtype, item, rank, world_size, payload))
    if not payload["graph"] or device.type != "cuda":
        result["graph_skipped"] = "not asked (args graph=false)" if not payload["graph"] else "no CUDA graph on CPU"
    else:
        report_partial(result)  # a graph that hangs must not take the eager numbers with it
        result["graph"] = []
        try:
            for item in items:
                result["graph"].append(graph_row(torch, dist, device, dtype, item, rank, world_size, payload))
        except Exception as exc:  # e.g. an algorithm that cannot be captured: eager numbers still count
            result["graph_error"] = f"{type(exc).__name__}: {exc}"
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return result
