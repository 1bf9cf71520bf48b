"""Probe: torch.distributed all_to_all_single at expert-parallel dispatch sizes, eager and in a CUDA graph.

Standalone (probe contract): stdlib at module level, torch only inside probe() and the workers.
Same process model as nccl_allreduce: forked workers, one per GPU, the parent never touches CUDA.
One message is a rank's dispatch buffer: tokens x hidden x dtype bytes, 1/n of it to each rank
(nccl-tests' all-to-all "size"). Kimi-K2.5-like: hidden 7168, bf16; 3 tokens = 42 KiB, the size
of one verify-step all-reduce, so the two probes compare directly.

args (all optional):
  world_size     ranks (default: every visible GPU)
  tokens         tokens per rank (default [1, 3, 4, 16, 64, 128])
  hidden         hidden size (default 7168)
  dtype          "bfloat16" (default) | "float16" | "float32"
  combinations   [{"algo": ..., "proto": ...}] (default: NCCL's choice only; all-to-all is p2p)
  iters, warmup, graph, graph_ops, graph_replays, timeout_s, env, backend: as in nccl_allreduce

details: as nccl_allreduce's, with hidden, tokens, verify_tokens, verify_tokens_us; rows gain "tokens".
"""

from __future__ import annotations

# probe-uses: _comm, _collective


PROBE = "nccl_alltoall"

DEFAULT_TOKENS = [1, 3, 4, 16, 64, 128]
HIDDEN = 7168  # Kimi-K2.5 / DeepSeek-V3 hidden size
VERIFY_TOKENS = 3  # 3 x 7168 x 2 B = 42 KiB, the verify step's all-reduce size


def alltoall_busbw_factor(world_size: int) -> float:
    """nccl-tests: busbw = algbw x (n-1)/n for all-to-all (0 at one rank: every byte stays local)."""
    return (world_size - 1) / world_size


def dispatch_elements(tokens: int, hidden: int, world_size: int) -> int:
    """Elements of one rank's dispatch buffer, rounded down to equal chunks (7168 is 2^10 x 7)."""
    return max(world_size, tokens * hidden // world_size * world_size)


def send_pattern(torch, elements: int, rank: int, world_size: int, device, dtype):
    """Chunk j of rank r (bound for rank j) encodes (r, j) and the position: integers < 256, exact in bf16."""
    chunk = elements // world_size
    dest = torch.arange(world_size, device=device).repeat_interleave(chunk)
    pos = torch.arange(elements, device=device) % chunk % 4
    return (((rank * world_size + dest) * 4 + pos) % 256).to(dtype)


def expected_receive(torch, elements: int, rank: int, world_size: int, device):
    chunk = elements // world_size
    src = torch.arange(world_size, device=device).repeat_interleave(chunk)
    pos = torch.arange(elements, device=device) % chunk % 4
    return ((src * world_size + rank) * 4 + pos) % 256


def alltoall_worker(rank: int, world_size: int, store_path: str, payload: dict) -> dict:
    return collective_worker(rank, world_size, store_path, payload, payload["tokens"],
                             eager_alltoall_row, graph_alltoall_row)


def count_wrong(torch, received, rank, world_size, device) -> int:
    expected = expected_receive(torch, received.numel(), rank, world_size, device)
    return int((received.float() != expected.float()).sum())


def eager_alltoall_row(torch, dist, device, dtype, tokens, rank, world_size, payload) -> dict:
    elements = dispatch_elements(tokens, payload["hidden"], world_size)
    received = torch.empty(elements, device=device, dtype=dtype)
    dist.all_to_all_single(received, send_pattern(torch, elements, rank, world_size, device, dtype))
    wrong = count_wrong(torch, received, rank, world_size, device)
    send = torch.zeros(elements, device=device, dtype=dtype)
    for _ in range(payload["warmup"]):
        dist.all_to_all_single(received, send)
    dist.barrier()
    took = time_us(torch, device, lambda: dist.all_to_all_single(received, send), payload["iters"])
    return {"bytes": elements * DTYPE_BYTES[payload["dtype"]], "elements": elements, "time_us": took,
            "wrong": wrong}


def graph_alltoall_row(torch, dist, device, dtype, tokens, rank, world_size, payload) -> dict:
    elements = dispatch_elements(tokens, payload["hidden"], world_size)
    send = torch.zeros(elements, device=device, dtype=dtype)
    received = torch.zeros(elements, device=device, dtype=dtype)
    checked = torch.cuda.CUDAGraph()
    capture_everywhere(torch, dist, device, checked, lambda: dist.all_to_all_single(received, send))
    send.copy_(send_pattern(torch, elements, rank, world_size, device, dtype))
    checked.replay()
    torch.cuda.synchronize(device)
    wrong = count_wrong(torch, received, rank, world_size, device)
    timed = torch.cuda.CUDAGraph()
    # several dispatches per graph, as in a captured forward pass
    capture_everywhere(torch, dist, device, timed,
                       lambda: [dist.all_to_all_single(received, send) for _ in range(payload["graph_ops"])])
    timed.replay()
    torch.cuda.synchronize(device)
    dist.barrier()
    took = time_us(torch, device, timed.replay, payload["graph_replays"]) / payload["graph_ops"]
    del checked, timed
    return {"bytes": elements * DTYPE_BYTES[payload["dtype"]], "elements": elements, "time_us": took,
            "wrong": wrong}


def summarize_combination(combo: dict, env: dict, run: dict, world_size: int, tokens: list[int]) -> dict:
    """One combination's verdict and numbers (rows gain their token count) from its workers' results."""
    return combination_verdict(combo, env, run, alltoall_busbw_factor(world_size),
                               row_label=lambda row: f"{row['tokens']} tokens",
                               decorate=lambda out: with_tokens(out, tokens))


def with_tokens(out: dict, tokens: list[int]) -> dict:
    for mode in ("eager", "graph"):
        for row, count in zip(out.get(mode) or [], tokens):  # rows follow the payload's token order
            row["tokens"] = count
    return out


def times_at_tokens(combo: dict, tokens: int) -> dict:
    pick = {}
    for mode in ("eager", "graph"):
        row = next((r for r in combo.get(mode) or [] if r["tokens"] == tokens), None)
        pick[f"{mode}_us"] = row["time_us"] if row else None
    return pick


def overall_result(combos: list[dict], world_size: int, header: dict) -> dict:
    """Status and one-line summary from every combination's verdict."""
    failed = [c for c in combos if not c["ok"]]
    ran = f"{world_size} rank{'s' if world_size > 1 else ''}"
    verify = {c["label"]: times_at_tokens(c, VERIFY_TOKENS) for c in combos if c["ok"]}
    if failed:
        summary = f"{ran}: " + "; ".join(f"{c['label']}: {c['error']}" for c in failed)
    else:
        label = combos[0]["label"]
        summary = (f"{ran}: {len(combos)}/{len(combos)} combinations correct; all-to-all of "
                   f"{VERIFY_TOKENS} tokens x {header['hidden']} ({label}) eager "
                   f"{fmt_us(verify[label]['eager_us'])}, graph {fmt_us(verify[label]['graph_us'])}")
    if world_size == 1:
        summary += "; multi-rank part skipped: one GPU (1-rank all-to-all is a local copy, busbw 0)"
    details = {**header, "world_size": world_size, "verify_tokens": VERIFY_TOKENS,
               "verify_tokens_us": verify, "combinations": combos,
               "message": "bytes = tokens x hidden x dtype per rank, 1/n of it to each rank",
               "busbw_formula": "busbw = algbw x (n-1)/n (nccl-tests); 0 at one rank: no data crosses a bus",
               "time_meaning": "time_us: slowest rank's mean per all-to-all; graph: replay time / ops captured"}
    if world_size == 1:
        details["multi_rank"] = {"skipped": "one GPU visible: only a 1-rank all-to-all can run"}
    return {"status": "fail" if failed else "pass", "summary": summary[:600], "details": details}


def payload_from_args(args: dict, backend: str) -> dict:
    tokens = sorted({int(t) for t in args.get("tokens") or DEFAULT_TOKENS})
    return {**timing_options(args, backend), "tokens": tokens, "hidden": int(args.get("hidden", HIDDEN))}


def probe(args: dict) -> dict:
    torch, header, world_size, why_not = collective_header(args)
    if world_size is None:
        return skipped(header, why_not)
    backend = header["backend"]
    payload = payload_from_args(args, backend)
    header.update(dtype=payload["dtype"], hidden=payload["hidden"], tokens=payload["tokens"])
    combos = []
    for combo in args.get("combinations") or [{"algo": None}]:
        env = worker_env(args, combo_env(combo))
        run = run_workers(alltoall_worker, world_size, {**payload, "env": env}, float(args.get("timeout_s", 60)))
        combos.append(summarize_combination(combo, env, run, world_size, payload["tokens"]))
    return overall_result(combos, world_size, header)
