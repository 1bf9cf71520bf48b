"""Probe: torch.distributed NCCL all-reduce, one process per GPU, eager and inside a CUDA graph.

Standalone (probe contract): stdlib at module level, torch only inside probe() and the workers.
The script runs through ``python -c``, so workers are forked; the parent never initialises CUDA
(a forked child cannot use CUDA once its parent has), it counts GPUs through NVML or nvidia-smi.
Each NCCL_ALGO/NCCL_PROTO combination runs in fresh workers: NCCL reads its env at comm init.

args (all optional):
  world_size     ranks (default: every visible GPU)
  combinations   [{"algo": "Ring"|"Tree"|None, "proto": "LL"|"LL128"|"Simple"|None}, ...]
                 (default: NCCL's choice, Ring, Tree); None leaves the variable unset
  sizes          message sizes in bytes (default 8 KiB..32 MiB by x4); the verify step's
                 42 KiB (21504 bf16 elements) is always added
  dtype          "bfloat16" (default) | "float16" | "float32"
  iters, warmup  eager timing loop (default 20, 5)
  graph          capture in a CUDA graph too (default true)
  graph_ops, graph_replays  all-reduces captured per graph, timed replays (default 10, 5)
  timeout_s      per combination; a hang is reported and its workers killed (default 60)
  env            extra env for the workers (over the spec's env they inherit)
  backend        "nccl" (default) | "gloo" (CPU plumbing, for tests: no CUDA graph)

details: torch, cuda, nccl_version, gpus_visible, world_size, dtype, sizes, verify_bytes,
  verify_size_us {label: {eager_us, graph_us}}, multi_rank (at one GPU: why skipped), and
  combinations [{label, env, ok, error, init_s, wall_s, eager: [row], graph: [row] | graph_skipped}]
  with row = {bytes, elements, time_us, algbw_gbs, busbw_gbs, wrong}.
"""

from __future__ import annotations

# probe-uses: _comm, _collective


PROBE = "nccl_allreduce"

VERIFY_BYTES = 21504 * 2  # one all-reduce of the verify step: 42 KiB of bf16 (3 tokens x hidden 7168)
DEFAULT_COMBINATIONS = [{"algo": None}, {"algo": "Ring"}, {"algo": "Tree"}]


def allreduce_busbw_factor(world_size: int) -> float:
    """nccl-tests: busbw = algbw x 2(n-1)/n for all-reduce (0 at one rank: nothing crosses a bus)."""
    return 2.0 * (world_size - 1) / world_size


def size_sweep(start: int = 8 * 1024, stop: int = 64 * 1024 * 1024, factor: int = 4) -> list[int]:
    sizes, size = [], start
    while size <= stop:
        sizes.append(size)
        size *= factor
    return sizes


def sizes_to_run(args: dict, element_bytes: int) -> list[int]:
    """Asked sizes plus the verify step's, rounded down to whole elements, sorted, no duplicates."""
    asked = args.get("sizes") or size_sweep()
    whole = {max(element_bytes, int(s) // element_bytes * element_bytes) for s in [*asked, VERIFY_BYTES]}
    return sorted(whole)


def pattern_sum(torch, elements: int, world_size: int, device):
    """Exact expected sum of every rank's pattern (small integers stay exact in bf16)."""
    index = torch.arange(elements, device=device) % 5
    return index * world_size + sum(r % 3 + 1 for r in range(world_size))


def rank_pattern(torch, elements: int, rank: int, device, dtype):
    return ((torch.arange(elements, device=device) % 5) + (rank % 3 + 1)).to(dtype)


def allreduce_worker(rank: int, world_size: int, store_path: str, payload: dict) -> dict:
    return collective_worker(rank, world_size, store_path, payload, payload["sizes"],
                             eager_allreduce_row, graph_allreduce_row)


def eager_allreduce_row(torch, dist, device, dtype, nbytes, rank, world_size, payload) -> dict:
    elements = nbytes // DTYPE_BYTES[payload["dtype"]]
    check = rank_pattern(torch, elements, rank, device, dtype)
    dist.all_reduce(check)
    wrong = int((check.float() != pattern_sum(torch, elements, world_size, device).float()).sum())
    work = torch.zeros(elements, device=device, dtype=dtype)  # zeros stay zeros: no overflow in the loop
    for _ in range(payload["warmup"]):
        dist.all_reduce(work)
    dist.barrier()
    took = time_us(torch, device, lambda: dist.all_reduce(work), payload["iters"])
    return {"bytes": nbytes, "elements": elements, "time_us": took, "wrong": wrong}


def graph_allreduce_row(torch, dist, device, dtype, nbytes, rank, world_size, payload) -> dict:
    elements = nbytes // DTYPE_BYTES[payload["dtype"]]
    check = torch.zeros(elements, device=device, dtype=dtype)
    checked = torch.cuda.CUDAGraph()
    capture_everywhere(torch, dist, device, checked, lambda: dist.all_reduce(check))
    check.copy_(rank_pattern(torch, elements, rank, device, dtype))
    checked.replay()
    torch.cuda.synchronize(device)
    wrong = int((check.float() != pattern_sum(torch, elements, world_size, device).float()).sum())
    work = torch.zeros(elements, device=device, dtype=dtype)
    timed = torch.cuda.CUDAGraph()
    # several all-reduces per graph, as in a captured forward pass
    capture_everywhere(torch, dist, device, timed,
                       lambda: [dist.all_reduce(work) for _ in range(payload["graph_ops"])])
    timed.replay()
    torch.cuda.synchronize(device)
    dist.barrier()
    took = time_us(torch, device, timed.replay, payload["graph_replays"]) / payload["graph_ops"]
    del checked, timed
    return {"bytes": nbytes, "elements": elements, "time_us": took, "wrong": wrong}


def summarize_combination(combo: dict, env: dict, run: dict, world_size: int) -> dict:
    """One combination's verdict and numbers from its workers' results."""
    return combination_verdict(combo, env, run, allreduce_busbw_factor(world_size),
                               row_label=lambda row: f"{row['bytes']} B")


def verify_size_times(combo: dict) -> dict:
    pick = {}
    for mode in ("eager", "graph"):
        row = next((r for r in combo.get(mode) or [] if r["bytes"] == VERIFY_BYTES), None)
        pick[f"{mode}_us"] = row["time_us"] if row else None
    return pick


def overall_result(combos: list[dict], world_size: int, header: dict) -> dict:
    """Status and one-line summary from every combination's verdict."""
    failed = [c for c in combos if not c["ok"]]
    status = "fail" if failed else "pass"
    verify = {c["label"]: verify_size_times(c) for c in combos}
    ran = f"{world_size} rank{'s' if world_size > 1 else ''}"
    if failed:
        summary = f"{ran}: " + "; ".join(f"{c['label']}: {c['error']}" for c in failed)
    else:
        best = combos[0]
        times = verify[best["label"]]
        summary = (f"{ran}: {len(combos)}/{len(combos)} combinations correct; 42 KiB all-reduce "
                   f"({best['label']}) eager {fmt_us(times['eager_us'])}, graph {fmt_us(times['graph_us'])}")
    if world_size == 1:
        summary += "; multi-rank part skipped: one GPU (1-rank communicator, busbw 0)"
    details = {**header, "world_size": world_size, "verify_bytes": VERIFY_BYTES,
               "verify_size_us": verify, "combinations": combos,
               "busbw_formula": "busbw = algbw x 2(n-1)/n (nccl-tests); 0 at one rank: no data crosses a bus",
               "time_meaning": "time_us: slowest rank's mean per all-reduce; graph: replay time / ops captured"}
    if world_size == 1:
        details["multi_rank"] = {"skipped": "one GPU visible: only a 1-rank communicator can run"}
    return {"status": status, "summary": summary[:600], "details": details}


def payload_from_args(args: dict, backend: str) -> dict:
    options = timing_options(args, backend)
    return {**options, "sizes": sizes_to_run(args, DTYPE_BYTES[options["dtype"]])}


def probe(args: dict) -> dict:
    torch, header, world_size, why_not = collective_header(args)
    if world_size is None:
        return skipped(header, why_not)
    backend = header["backend"]
    payload = payload_from_args(args, backend)
    header.update(dtype=payload["dtype"], sizes=payload["sizes"])
    asked = args.get("combinations")
    if asked is None and world_size == 1:
        # A 1-rank communicator always runs Ring/Simple whatever NCCL_ALGO says (NCCL's
        # enqueue.cc cost table), so the Ring and Tree runs would repeat the default one.
        asked = DEFAULT_COMBINATIONS[:1]
        header["combinations_skipped"] = "Ring and Tree: at one rank NCCL always runs Ring/Simple"
    combos = []
    for combo in asked or DEFAULT_COMBINATIONS:
        env = worker_env(args, combo_env(combo))
        run = run_workers(allreduce_worker, world_size, {**payload, "env": env}, float(args.get("timeout_s", 60)))
        combos.append(summarize_combination(combo, env, run, world_size))
    return overall_result(combos, world_size, header)
