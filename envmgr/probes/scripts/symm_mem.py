"""Probe: torch symmetric memory (allocation, rendezvous, peer reads) at the world size that runs.

Standalone (probe contract): stdlib at module level, torch only inside probe() and the workers.
Same process model as nccl_allreduce: forked workers, one per GPU, the parent never touches CUDA;
every world size runs in fresh workers. Needs compute capability >= 8.0 and peer access between
every pair of GPUs (without P2P, rendezvous fails with "CUDA driver error: invalid device ordinal").
With multicast off (TORCH_SYMM_MEM_DISABLE_MULTICAST=1 in the spec's env, as on the lent machines)
multimem ops are not exercised; ``details.multicast`` records what the workers saw.
Besides the gate, it times torch.ops.symm_mem.one_shot_all_reduce at the verify step's 42 KiB
(informational: its failure does not fail the probe) to set beside nccl_allreduce's number.

args (all optional):
  world_sizes    e.g. [2, 8] (default: the visible GPU count). Every size costs a fresh start of
                 its workers (~5-7 s on two H200s), so only the sizes asked run; when one above 1
                 fails, world size 1 runs too, to tell "broken" from "broken across GPUs".
  iters          one_shot_all_reduce timing loop (default 20)
  timeout_s      per world size (default 30)
  env            extra env for the workers (over the spec's env they inherit)

details: torch, cuda, gpus_visible, api {module: [names], ops: [names]}, bytes, multi_rank, and
  world_sizes [{world_size, ok, error, failed_step, peer_wrong, init_s, wall_s, device, capability,
  handle {rank, world_size, multicast}, backend, nvshmem_available,
  one_shot_all_reduce {bytes, time_us, wrong} | {error}}].
"""

from __future__ import annotations

# probe-uses: _comm
import time
import traceback

PROBE = "symm_mem"

ELEMENTS = 21504  # bf16: 42 KiB, one all-reduce of the verify step
API_NAMES = ("empty", "rendezvous", "enable_symm_mem_for_group", "get_backend", "set_backend",
             "is_nvshmem_available", "get_mem_pool")
OP_NAMES = ("one_shot_all_reduce", "one_shot_all_reduce_out", "two_shot_all_reduce_",
            "multimem_all_reduce_", "multimem_one_shot_all_reduce", "fused_all_gather_matmul")


def default_world_sizes(visible: int) -> list[int]:
    """The GPU count: the world size a server on all of them uses (1..N each cost a restart)."""
    return [visible] if visible else []


def diagnostic_size(sizes: list[int], results: list[dict]) -> int | None:
    """World size 1, when a larger one failed and 1 was not run: is it the GPUs or the pairs?"""
    failed_multi = any(not r.get("ok") and "skip" not in r and r["world_size"] > 1 for r in results)
    return 1 if failed_multi and 1 not in sizes else None


def capability_ok(capability) -> bool:
    return tuple(capability) >= (8, 0)


def symm_mem_worker(rank: int, world_size: int, store_path: str, payload: dict) -> dict:
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    capability = tuple(torch.cuda.get_device_capability(rank))
    if not capability_ok(capability):
        return {"skip": f"compute capability {capability[0]}.{capability[1]} < 8.0: symmetric memory needs sm_80+"}
    began = time.monotonic()
    device = init_process_group(rank, world_size, store_path, "nccl")
    group = dist.group.WORLD
    result = {"capability": list(capability), "device": torch.cuda.get_device_name(device),
              "init_s": round(time.monotonic() - began, 3)}
    step = "empty"
    try:
        tensor = symm_mem.empty(ELEMENTS, dtype=torch.bfloat16, device=device)
        step = "rendezvous"
        enable = getattr(symm_mem, "enable_symm_mem_for_group", None)
        if enable is not None and not hasattr(enable, "__deprecated__"):  # needed before torch ~2.8
            enable(group.group_name)
        handle = symm_mem.rendezvous(tensor, group)
        result["handle"] = {"rank": handle.rank, "world_size": handle.world_size,
                            "multicast": bool(getattr(handle, "multicast_ptr", 0))}
        step = "peer_read"
        result["peer_wrong"] = peer_read_wrong(torch, tensor, handle, rank, world_size)
    except Exception as exc:
        return {**result, "error": f"{step}: {type(exc).__name__}: {exc}", "failed_step": step,
                "traceback": traceback.format_exc()[-3000:]}
    result["backend"] = safe_call(lambda: symm_mem.get_backend(device))
    if rank == 0:
        result["nvshmem_available"] = safe_call(symm_mem.is_nvshmem_available)
    report_partial(result)  # the gate has passed: a hang in the informational op must not undo it
    result["one_shot_all_reduce"] = one_shot_all_reduce_numbers(torch, tensor, group, rank, world_size,
                                                                payload["iters"])
    dist.barrier()
    torch.cuda.synchronize(device)
    return result


def peer_read_wrong(torch, tensor, handle, rank: int, world_size: int) -> int:
    """Each rank writes rank+1; everyone reads every peer's buffer through its mapping."""
    tensor.fill_(rank + 1)
    torch.cuda.synchronize()
    handle.barrier(channel=0)
    wrong = 0
    for peer in range(world_size):
        remote = handle.get_buffer(peer, (ELEMENTS,), torch.bfloat16)
        wrong += int((remote.float() != peer + 1).sum())
    torch.cuda.synchronize()
    handle.barrier(channel=0)  # nobody overwrites a buffer a peer may still read
    return wrong


def one_shot_all_reduce_numbers(torch, tensor, group, rank: int, world_size: int, iters: int) -> dict:
    try:
        op = torch.ops.symm_mem.one_shot_all_reduce
        reduced = op(tensor, "sum", group.group_name)  # tensor still holds rank+1
        expected = world_size * (world_size + 1) // 2
        wrong = int((reduced.float() != expected).sum())
        took = time_us(torch, tensor.device, lambda: op(tensor, "sum", group.group_name), iters)
        return {"bytes": ELEMENTS * 2, "time_us": took, "wrong": wrong}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def safe_call(fn):
    try:
        return fn()
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"


def summarize_world_size(world_size: int, run: dict) -> dict:
    ranks = [run["ranks"][r] for r in sorted(run["ranks"])]
    out = {"world_size": world_size, "wall_s": run["wall_s"], "ok": False}
    partials = [r.get("partial") or {} for r in ranks]
    if all("peer_wrong" in p for p in partials):  # every rank passed the gate, then one_shot failed or hung
        ranks = [{**p, "one_shot_all_reduce": {"error": first_error(run)}} for p in partials]
        run = {**run, "ranks": dict(enumerate(ranks))}
    skip = next((r["skip"] for r in ranks if "skip" in r), None)
    if skip:
        return {**out, "skip": skip}
    out["error"] = first_error(run)
    out["failed_step"] = next((r["failed_step"] for r in ranks if "failed_step" in r), None)
    if out["error"]:
        out["traceback"] = next((r.get("traceback") for r in ranks if r.get("traceback")), None)
        return out
    out["peer_wrong"] = sum(r["peer_wrong"] for r in ranks)
    if out["peer_wrong"]:
        out["error"] = f"peer reads: {out['peer_wrong']} wrong elements"
    out["ok"] = not out["error"]
    out["init_s"] = max(r["init_s"] for r in ranks)
    for key in ("device", "capability", "handle", "backend", "nvshmem_available"):
        if key in ranks[0]:
            out[key] = ranks[0][key]
    out["one_shot_all_reduce"] = merge_one_shot([r["one_shot_all_reduce"] for r in ranks])
    return out


def merge_one_shot(per_rank: list[dict]) -> dict:
    """Slowest rank's time, wrong elements summed; the first error if any rank had one."""
    failed = next((r for r in per_rank if "error" in r), None)
    if failed:
        return failed
    return {"bytes": per_rank[0]["bytes"], "time_us": round(max(r["time_us"] for r in per_rank), 2),
            "wrong": sum(r["wrong"] for r in per_rank)}


def overall_result(results: list[dict], header: dict) -> dict:
    details = {**header, "world_sizes": results}
    skipped = next((r["skip"] for r in results if "skip" in r), None)
    if skipped:
        return {"status": "skip", "summary": skipped, "details": {**details, "reason": skipped}}
    failed = [r for r in results if not r["ok"]]
    passed = [str(r["world_size"]) for r in results if r["ok"]]
    if failed:
        summary = "; ".join(f"world size {r['world_size']}: {r['error']}" for r in failed)
        if passed:
            summary += f" (passed: {', '.join(passed)})"
    else:
        summary = f"allocation, rendezvous and peer reads work at world sizes {', '.join(passed)}"
        one_shot = results[-1].get("one_shot_all_reduce") or {}
        if "time_us" in one_shot:
            summary += f"; one_shot_all_reduce 42 KiB at {results[-1]['world_size']}: {one_shot['time_us']:.1f} us"
    if header.get("gpus_visible") == 1:
        summary += "; multi-rank part skipped: one GPU"
        details["multi_rank"] = {"skipped": "one GPU visible: only world size 1 can run"}
    return {"status": "fail" if failed else "pass", "summary": summary[:600], "details": details}


def api_names(torch) -> dict:
    """Which symmetric-memory names this torch has (importing them does not initialise CUDA)."""
    try:
        import torch.distributed._symmetric_memory as symm_mem
    except Exception as exc:
        return {"module_error": f"{type(exc).__name__}: {exc}"}
    return {"module": [n for n in API_NAMES if hasattr(symm_mem, n)],
            "ops": [n for n in OP_NAMES if hasattr(torch.ops.symm_mem, n)]}


def probe(args: dict) -> dict:
    torch, why_not = torch_or_skip_reason("nccl")
    if torch is None:
        return {"status": "skip", "summary": why_not, "details": {"reason": why_not}}
    visible, source = visible_gpu_count()
    header = {"torch": torch.__version__, "cuda": torch.version.cuda, "gpus_visible": visible,
              "gpu_count_source": source, "api": api_names(torch), "bytes": ELEMENTS * 2}
    if visible == 0:
        why = f"no NVIDIA GPU visible ({source})"
        return {"status": "skip", "summary": why, "details": {**header, "reason": why}}
    if "module_error" in header["api"]:
        why = f"torch {torch.__version__} has no torch.distributed._symmetric_memory: {header['api']['module_error']}"
        return {"status": "fail", "summary": why, "details": header}
    sizes = [int(s) for s in args.get("world_sizes") or default_world_sizes(visible)]
    too_big = [s for s in sizes if s > visible]
    if too_big:
        why = f"asked for world sizes {too_big}, {visible} GPU(s) visible"
        return {"status": "skip", "summary": why, "details": {**header, "reason": why}}
    payload = {"iters": int(args.get("iters", 20)), "env": worker_env(args), "_hang_rank": args.get("_hang_rank")}
    results = []
    for world_size in sizes:
        run = run_workers(symm_mem_worker, world_size, payload, float(args.get("timeout_s", 30)))
        results.append(summarize_world_size(world_size, run))
        if "skip" in results[-1]:
            break
    extra = diagnostic_size(sizes, results)
    if extra:
        run = run_workers(symm_mem_worker, extra, payload, float(args.get("timeout_s", 30)))
        results.insert(0, summarize_world_size(extra, run))
    return overall_result(results, {**header, "env": payload["env"], "multicast": multicast_seen(payload["env"])})
