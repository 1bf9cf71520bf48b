"""Probe: the communication of one EAGLE-3 verify step, TP all-reduces vs EP all-to-alls, eager and in a CUDA graph.

Standalone (probe contract): stdlib at module level, torch only inside probe() and the workers.
Same process model as nccl_allreduce: forked workers, one per GPU, the parent never touches CUDA.

The verify step of a Kimi-K2.5-like model (61 attention + 61 MoE layers, hidden 7168, bf16):
  TP  one all-reduce per layer: 122 all-reduces of tokens x hidden (4 tokens: 56 KiB), in place,
      one buffer per layer (a forward pass reduces a new tensor each layer).
  EP  per MoE layer a dispatch, all_to_all_single of tokens x top_k rows of hidden (4 x 8 rows:
      448 KiB per rank) with the rows spread evenly over the ranks (uniform routing), and a combine
      that sends the same rows back: 61 x 2 = 122 all-to-alls. Expert compute is left out.
Each scheme runs back to back eagerly (CUDA events around whole steps) and as ONE captured CUDA
graph per step (replayed). Values are small integers (exact in bf16), so every all-reduce result
and every received row is checked; a combine must return exactly what was dispatched.
At one rank the collectives move no data: the numbers are launch and bookkeeping overhead only.

args (all optional):
  world_size        ranks (default: every visible GPU; gloo: 1)
  tokens            tokens in the verify step per rank (default 4 = draft tokens 4 x batch 1)
  hidden            hidden size (default 7168)
  top_k             experts per token (default 8)
  attention_layers, moe_layers   (default 61, 61): all-reduces = their sum, dispatches = moe_layers
  dtype             "bfloat16" (default) | "float16" | "float32"
  iters, warmup     eager steps timed and untimed before (default 10, 3)
  graph             capture each step in a CUDA graph too (default true)
  graph_replays     timed replays (default 20; one untimed before)
  timeout_s         for the workers, a hang is reported and its ranks killed (default 120)
  env               extra env for the workers (over the spec's env they inherit)
  backend           "nccl" (default) | "gloo" (CPU plumbing, for tests: no CUDA graph)
  draft_tokens, batch, tokens_from   echoed into details.shape (how tokens was derived)

details: torch, cuda, nccl_version, backend, gpus_visible, world_size, launch_overhead_only,
  shape {tokens, hidden, top_k, dtype, dtype_bytes, attention_layers, moe_layers, draft_tokens, batch,
         tokens_from},
  tp / ep: {ops, op, message_bytes, step_bytes, bus_bytes_per_rank_step, bus_formula,
            (ep also rows_per_rank, splits, routing)
            eager: mode, graph: mode | graph_skipped | graph_error}
  with mode = {step_us, per_op_us, algbw_gbs, wrong} (step_us: slowest rank's mean per step),
  ok, error, init_s, wall_s, device, capability.
"""

from __future__ import annotations

# probe-uses: _comm, _collective
import time

PROBE = "comm_bench"

DEFAULT_SHAPE = {"tokens": 4, "hidden": 7168, "top_k": 8, "attention_layers": 61, "moe_layers": 61,
                 "dtype": "bfloat16"}
SCHEMES = ("tp", "ep")


# --- shapes and bytes (pure) --------------------------------------------------------------


def even_splits(rows: int, world_size: int) -> list[int]:
    """Rows sent to each rank under uniform routing: as even as whole rows allow, the first ranks get the rest."""
    base, rest = divmod(rows, world_size)
    return [base + (1 if rank < rest else 0) for rank in range(world_size)]


def tp_plan(shape: dict, world_size: int) -> dict:
    """The TP step's bytes: one in-place all-reduce of tokens x hidden per layer."""
    ops = shape["attention_layers"] + shape["moe_layers"]
    message = shape["tokens"] * shape["hidden"] * DTYPE_BYTES[shape["dtype"]]
    ring_factor = 2.0 * (world_size - 1) / world_size  # a ring all-reduce sends 2(n-1)/n of the message
    return {"ops": ops, "op": "all_reduce", "message_bytes": message, "step_bytes": ops * message,
            "bus_bytes_per_rank_step": round(ops * message * ring_factor),
            "bus_formula": "ops x message x 2(n-1)/n (ring all-reduce; 0 at one rank)"}


def ep_plan(shape: dict, world_size: int) -> dict:
    """The EP step's bytes: per MoE layer a dispatch of tokens x top_k rows and a combine of the same rows back."""
    rows = shape["tokens"] * shape["top_k"]
    row_bytes = shape["hidden"] * DTYPE_BYTES[shape["dtype"]]
    splits = even_splits(rows, world_size)
    # rows leaving each rank: dispatch keeps its own chunk; combine returns what came from the others
    leaving = [(rows - splits[r]) + (world_size - 1) * splits[r] for r in range(world_size)]
    ops = 2 * shape["moe_layers"]
    return {"ops": ops, "op": "all_to_all_single (dispatch + combine)", "rows_per_rank": rows,
            "splits": splits, "message_bytes": rows * row_bytes, "step_bytes": ops * rows * row_bytes,
            "bus_bytes_per_rank_step": shape["moe_layers"] * max(leaving) * row_bytes,
            "bus_formula": "moe_layers x rows leaving the busiest rank (dispatch + combine) x row bytes "
                           "(uniform routing: 2(n-1)/n of the rows; 0 at one rank)",
            "routing": "uniform; every rank dispatches all its tokens x top_k rows (no merging of a "
                       "token's copies bound for the same rank): an upper bound on EP's bytes"}


# --- deterministic values (small integers: exact in bf16) ---------------------------------


def tp_pattern(torch, shape, layer: int, rank: int, device, dtype):
    """At most 4 per rank, so the sum stays exact in bf16 (integers <= 256) up to 64 ranks."""
    index = torch.arange(shape[0] * shape[1], device=device).reshape(shape)
    return (index % 3 + rank % 2 + layer % 2).to(dtype)


def tp_expected(torch, shape, layer: int, world_size: int, device):
    index = torch.arange(shape[0] * shape[1], device=device).reshape(shape)
    return index % 3 * world_size + world_size // 2 + layer % 2 * world_size


def dispatch_pattern(torch, splits: list[int], hidden: int, rank: int, world_size: int, device, dtype):
    """Row i of the chunk for rank j encodes (this rank, j, i mod 4): what each receiver can check."""
    dest = torch.repeat_interleave(torch.arange(world_size, device=device),
                                   torch.tensor(splits, device=device))
    row_in_chunk = torch.cat([torch.arange(n, device=device) for n in splits])
    value = ((rank * world_size + dest) * 4 + row_in_chunk % 4) % 256
    return value.to(dtype).unsqueeze(1).expand(-1, hidden).contiguous()


def dispatch_expected(torch, splits: list[int], hidden: int, rank: int, world_size: int, device):
    """What rank receives: splits[rank] rows from every source, in source order."""
    mine = splits[rank]
    source = torch.arange(world_size, device=device).repeat_interleave(mine)
    row_in_chunk = torch.arange(mine, device=device).repeat(world_size)
    value = ((source * world_size + rank) * 4 + row_in_chunk % 4) % 256
    return value.unsqueeze(1).expand(-1, hidden)


def count_wrong(got, expected) -> int:
    return int((got.float() != expected.float()).sum())


# --- the two steps: buffers, issue, check -------------------------------------------------


def tp_step(torch, dist, shape: dict, rank: int, world_size: int, device, dtype) -> dict:
    layers = shape["attention_layers"] + shape["moe_layers"]
    size = (shape["tokens"], shape["hidden"])
    buffers = [torch.zeros(size, device=device, dtype=dtype) for _ in range(layers)]

    def issue():
        for buffer in buffers:
            dist.all_reduce(buffer)

    def arm():  # patterns in; an all-reduce in place is not idempotent, so re-arm before each check
        for layer, buffer in enumerate(buffers):
            buffer.copy_(tp_pattern(torch, size, layer, rank, device, dtype))

    def wrong():
        return sum(count_wrong(b, tp_expected(torch, size, layer, world_size, device))
                   for layer, b in enumerate(buffers))

    def quiet():  # zeros stay zeros: timed steps cannot overflow
        for buffer in buffers:
            buffer.zero_()

    return {"ops": layers, "issue": issue, "arm": arm, "wrong": wrong, "quiet": quiet}


def ep_step(torch, dist, shape: dict, rank: int, world_size: int, device, dtype) -> dict:
    hidden, layers = shape["hidden"], shape["moe_layers"]
    splits = even_splits(shape["tokens"] * shape["top_k"], world_size)
    received_rows = world_size * splits[rank]
    back_splits = [splits[rank]] * world_size  # combine: each source gets its rows back
    if len(set(splits)) == 1:  # equal chunks: the plain path, as nccl_alltoall proved it in graphs
        splits_or_none, back_or_none = None, None
    else:
        splits_or_none, back_or_none = splits, back_splits
    send = dispatch_pattern(torch, splits, hidden, rank, world_size, device, dtype)
    received = [torch.zeros((received_rows, hidden), device=device, dtype=dtype) for _ in range(layers)]
    combined = [torch.zeros_like(send) for _ in range(layers)]

    def issue():
        for layer in range(layers):
            dist.all_to_all_single(received[layer], send, output_split_sizes=back_or_none,
                                   input_split_sizes=splits_or_none)
            dist.all_to_all_single(combined[layer], received[layer], output_split_sizes=splits_or_none,
                                   input_split_sizes=back_or_none)

    def arm():  # dispatch then combine is idempotent: clear the outputs so a no-op cannot pass
        for buffer in received + combined:
            buffer.zero_()

    def wrong():
        expected = dispatch_expected(torch, splits, hidden, rank, world_size, device)
        return (sum(count_wrong(r, expected) for r in received)
                + sum(count_wrong(c, send) for c in combined))

    return {"ops": 2 * layers, "issue": issue, "arm": arm, "wrong": wrong, "quiet": lambda: None}


# --- timing -------------------------------------------------------------------------------


def eager_mode(torch, dist, device, step: dict, payload: dict) -> dict:
    step["arm"]()
    step["issue"]()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wrong = step["wrong"]()
    step["quiet"]()
    for _ in range(payload["warmup"]):
        step["issue"]()
    dist.barrier()
    took = time_us(torch, device, step["issue"], payload["iters"])
    return {"step_us": took, "wrong": wrong}


def graph_mode(torch, dist, device, step: dict, payload: dict) -> dict:
    """The whole step captured in one graph, as a captured forward pass launches it."""
    graph = torch.cuda.CUDAGraph()
    capture_everywhere(torch, dist, device, graph, step["issue"])
    step["arm"]()
    graph.replay()
    torch.cuda.synchronize(device)
    wrong = step["wrong"]()
    step["quiet"]()
    graph.replay()  # untimed
    torch.cuda.synchronize(device)
    dist.barrier()
    took = time_us(torch, device, graph.replay, payload["graph_replays"])
    del graph
    return {"step_us": took, "wrong": wrong}


def comm_worker(rank: int, world_size: int, store_path: str, payload: dict) -> dict:
    import torch
    import torch.distributed as dist

    shape, dtype = payload["shape"], getattr(torch, payload["shape"]["dtype"])
    began = time.monotonic()
    device = init_process_group(rank, world_size, store_path, payload["backend"])
    dist.barrier()
    result = {"init_s": round(time.monotonic() - began, 3), "eager": {}, "graph": None}
    if device.type == "cuda":
        result["device"] = torch.cuda.get_device_name(device)
        result["capability"] = list(torch.cuda.get_device_capability(device))
    steps = {"tp": tp_step(torch, dist, shape, rank, world_size, device, dtype),
             "ep": ep_step(torch, dist, shape, rank, world_size, device, dtype)}
    for name, step in steps.items():
        result["eager"][name] = eager_mode(torch, dist, device, step, payload)
    if not payload["graph"] or device.type != "cuda":
        result["graph_skipped"] = "not asked (args graph=false)" if not payload["graph"] else "no CUDA graph on CPU"
    else:
        report_partial(result)  # a graph that hangs must not take the eager numbers with it
        result["graph"], result["graph_error"] = {}, {}
        for name, step in steps.items():
            try:
                result["graph"][name] = graph_mode(torch, dist, device, step, payload)
            except Exception as exc:  # capture can fail where eager works: keep the rest
                result["graph_error"][name] = f"{type(exc).__name__}: {exc}"
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return result


# --- verdict ------------------------------------------------------------------------------


def merge_mode(modes: list[dict], ops: int, step_bytes: int) -> dict:
    """Ranks' numbers for one scheme and mode: the slowest rank's step (the step waits for it), wrong summed."""
    step_us = max(m["step_us"] for m in modes)
    return {"step_us": round(step_us, 2), "per_op_us": round(step_us / ops, 3),
            "algbw_gbs": round(algbw_gbs(step_bytes, step_us / 1e6), 3),
            "wrong": sum(m["wrong"] for m in modes)}


def scheme_result(name: str, plan: dict, ranks: list[dict]) -> dict:
    out = dict(plan)
    out["eager"] = merge_mode([r["eager"][name] for r in ranks], plan["ops"], plan["step_bytes"])
    first = ranks[0]
    if first.get("graph") is None:
        out["graph_skipped"] = first.get("graph_skipped")
        return out
    error = next((r["graph_error"][name] for r in ranks if name in (r.get("graph_error") or {})), None)
    if error:
        out["graph_error"] = error
    else:
        out["graph"] = merge_mode([r["graph"][name] for r in ranks], plan["ops"], plan["step_bytes"])
    return out


def scheme_problems(name: str, scheme: dict) -> list[str]:
    problems = [f"{name} {mode}: {scheme[mode]['wrong']} wrong elements"
                for mode in ("eager", "graph") if (scheme.get(mode) or {}).get("wrong")]
    if scheme.get("graph_error"):
        problems.append(f"{name} graph: {scheme['graph_error']}")
    return problems


def summarize_run(run: dict, shape: dict, world_size: int) -> dict:
    """Both schemes' numbers and the verdict from the workers' results."""
    ranks = [run["ranks"][r] for r in sorted(run["ranks"])]
    plans = {"tp": tp_plan(shape, world_size), "ep": ep_plan(shape, world_size)}
    out = {"wall_s": run["wall_s"], "ok": False, "error": first_error(run)}
    if out["error"]:
        out["traceback"] = next((r.get("traceback") for r in ranks if r.get("traceback")), None)
        partials = [r.get("partial") or {} for r in ranks]
        if all(p.get("eager") for p in partials):  # every rank finished eager: the graph stage failed
            out["error"] = f"graph: {out['error']}"
            for name in SCHEMES:
                out[name] = scheme_result(name, plans[name], [dict(p, graph=None) for p in partials])
                out[name].pop("graph_skipped", None)
        else:
            out.update(plans)
        return out
    out["init_s"] = max(r["init_s"] for r in ranks)
    for name in SCHEMES:
        out[name] = scheme_result(name, plans[name], ranks)
    problems = [p for name in SCHEMES for p in scheme_problems(name, out[name])]
    out["error"] = "; ".join(problems) or None
    out["ok"] = not problems
    for key in ("device", "capability"):
        if key in ranks[0]:
            out[key] = ranks[0][key]
    return out


def mode_text(scheme: dict, mode: str) -> str:
    numbers = scheme.get(mode)
    if not numbers:
        return f"{mode} n/a"
    return f"{mode} {numbers['step_us']:.0f} us/step ({numbers['per_op_us']:.1f} us/op)"


def overall_result(measured: dict, world_size: int, header: dict) -> dict:
    shape = header["shape"]
    ran = f"{world_size} rank{'s' if world_size > 1 else ''}"
    parts = []
    for name, label in (("tp", f"TP {shape['attention_layers'] + shape['moe_layers']} all-reduces"),
                        ("ep", f"EP {shape['moe_layers']}x(dispatch+combine)")):
        scheme = measured.get(name) or {}
        kib = scheme.get("message_bytes", 0) / 1024
        parts.append(f"{label} of {kib:g} KiB: {mode_text(scheme, 'eager')}, {mode_text(scheme, 'graph')}")
    summary = f"{ran}, {shape['tokens']} tokens: " + "; ".join(parts)
    if measured["error"]:
        summary = f"{ran}: {measured['error']} | {summary}"
    launch_only = world_size == 1
    if launch_only:
        summary += "; one rank: launch overhead only (no data crosses a bus)"
    details = {**header, "world_size": world_size, "launch_overhead_only": launch_only, **measured,
               "time_meaning": "step_us: slowest rank's mean time of one whole step (all its ops); "
                               "per_op_us = step_us / ops; graph: one graph per step, replay time"}
    if launch_only:
        details["multi_rank"] = {"skipped": "one rank: collectives run but move no data; "
                                            "the times are launch and bookkeeping overhead only"}
    return {"status": "pass" if measured["ok"] else "fail", "summary": summary[:700], "details": details}


# --- args and entry point -----------------------------------------------------------------


def shape_from_args(args: dict) -> dict:
    shape = {key: args.get(key, default) for key, default in DEFAULT_SHAPE.items()}
    if shape["dtype"] not in DTYPE_BYTES:
        raise ValueError(f"dtype {shape['dtype']!r} not one of {sorted(DTYPE_BYTES)}")
    for key in ("tokens", "hidden", "top_k", "attention_layers", "moe_layers"):
        shape[key] = int(shape[key])
        if shape[key] < 1:
            raise ValueError(f"{key} must be at least 1, got {shape[key]}")
    shape["dtype_bytes"] = DTYPE_BYTES[shape["dtype"]]
    for echoed in ("draft_tokens", "batch", "tokens_from"):  # how tokens was derived, for the record
        shape[echoed] = args.get(echoed)
    return shape


def payload_from_args(args: dict, backend: str) -> dict:
    return {"backend": backend, "shape": shape_from_args(args),
            "iters": int(args.get("iters", 10)), "warmup": int(args.get("warmup", 3)),
            "graph": bool(args.get("graph", True)), "graph_replays": int(args.get("graph_replays", 20)),
            "_hang_rank": args.get("_hang_rank")}


def probe(args: dict) -> dict:
    torch, header, world_size, why_not = collective_header(args)
    if world_size is None:
        return skipped(header, why_not)
    backend = header["backend"]
    payload = payload_from_args(args, backend)
    header["shape"] = payload["shape"]
    env = worker_env(args)
    header["env"] = env
    header["multicast"] = multicast_seen(env)
    run = run_workers(comm_worker, world_size, {**payload, "env": env}, float(args.get("timeout_s", 120)))
    return overall_result(summarize_run(run, payload["shape"], world_size), world_size, header)
