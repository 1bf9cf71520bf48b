"""SGLang's memory arithmetic, from the numbers a server log gives: how large the KV pool came out
(or would come out) for a mem_fraction_static, the smallest value that gives it room, and the one
to use, with the sentence that explains it. triage's ``kv_pool_oom`` signature computes it
(``compute: kv_pool_sizing`` in signatures.yaml)."""

from __future__ import annotations

import math

from envmgr.bench.values import Value, display
from envmgr.bench.values import number as _number


def _round_up(value: float, step: float = 0.01) -> float:
    return round(math.ceil(value / step - 1e-9) * step, 4)


MAX_MEM_FRACTION = 0.95  # above this there is no headroom left for activations at all
KV_SHARE = 0.5           # fallback: the KV pool gets half of what is free after the weights
# SGLang's two readings are not the ones it logs: "before" (pre_model_load_memory, end of
# init_torch_distributed) comes before allocations made ahead of "Load weight begin", and
# "after" (at the pool's sizing) after allocations made since "Load weight end". Measured on
# sglang 0.5.11, one H200, TP 1: launches at 0.3 (43,659,564 KV tokens) and 0.001 (18,979),
# 1024 bytes a token, solve rest = after - before*(1-f) for before = 139.19 GB and after =
# 139.07 GB, against 139.13 and 139.09 logged (docs/evidence/h200-sglang/). Without these terms
# the boundary came out 0.0003, below a value that failed (0.0006); the real one is 0.00087.
UNLOGGED_BEFORE_WEIGHTS_GB = 0.06
UNLOGGED_AFTER_WEIGHTS_GB = 0.02


def kv_pool_sizing(values: dict[str, Value]) -> dict[str, Value]:
    """SGLang's sizing (0.5.11 ``_profile_available_bytes``), solved for mem_fraction_static.

    rest = post_load - pre_load * (1 - mem_fraction_static). ``post_load`` is the memory free
    after the weights ("Load weight end ... avail mem", lowest rank) minus
    ``UNLOGGED_AFTER_WEIGHTS_GB``; ``pre_load`` is the memory free before them ("Load weight
    begin. avail mem"; else avail + mem usage of "Load weight end") plus
    ``UNLOGGED_BEFORE_WEIGHTS_GB``. rest <= 0 is this failure; the smallest working
    value is 1 - post/pre. The suggestion keeps as headroom what SGLang's own default reserves
    for activations and CUDA graphs (``sglang_reserve_gb``, from the logged server_args), rounded
    down to 0.01 so the headroom is at least that; when the weights leave less than that reserve,
    half of the free memory goes to the pool (a rule of thumb, and said so).
    """
    derived: dict[str, Value] = {}
    fraction = _number(values.get("mem_fraction_static"))
    if fraction is not None:
        derived["step_mem_fraction_static"] = min(round(fraction + 0.05, 2), MAX_MEM_FRACTION)
    available = _number(values.get("avail_after_weights_gb"))
    total = _number(values.get("total_gb"))
    weights = _number(values.get("weights_gb"))
    if total is None and available is not None and weights is not None:
        total = round(available + weights, 2)
        derived["total_gb"] = total
    if fraction is None or available is None or total is None:
        return derived
    if not (0 < fraction <= 1 and 0 < available <= total):
        return derived  # numbers that cannot come from one sane launch: no arithmetic on them
    pre = total + UNLOGGED_BEFORE_WEIGHTS_GB
    post = max(available - UNLOGGED_AFTER_WEIGHTS_GB, 0.01)
    reserved = pre * (1 - fraction)
    minimum = 1 - post / pre
    derived.update(pre_load_gb=round(pre, 2), post_load_gb=round(post, 2), reserved_gb=round(reserved, 2),
                   kv_pool_gb=round(post - reserved, 2), min_mem_fraction_static=round(minimum, 5))
    if minimum >= MAX_MEM_FRACTION:
        derived["no_room"] = (
            f"no --mem-fraction-static fixes this: the weights leave only {display(available)} GB "
            f"of {display(total)} GB per GPU, and the smallest working value "
            f"{display(round(minimum, 4))} leaves no headroom for activations. Spread the model "
            f"over more GPUs or use a smaller quantization.")
        return derived
    reserve = sglang_reserve_gb(values)
    if reserve is not None:
        derived["sglang_reserve_gb"] = round(reserve, 2)
    if reserve is not None and post - reserve > 0:
        suggested = min(_round_down(1 - reserve / pre), MAX_MEM_FRACTION)
        basis = "reserve"
    else:
        suggested = min(_round_up(1 - post * (1 - KV_SHARE) / pre), MAX_MEM_FRACTION)
        basis = "half"
    suggested = max(suggested, _round_up(minimum + 0.005))  # never at the boundary itself
    derived["suggested_mem_fraction_static"] = suggested
    derived["sizing"] = _sizing_text(values, fraction, available, total, pre, post, reserved, minimum,
                                     suggested, reserve, basis)
    return derived


def _round_down(value: float, step: float = 0.01) -> float:
    return round(math.floor(value / step + 1e-9) * step, 4)


def sglang_reserve_gb(values: dict[str, Value]) -> float | None:
    """What SGLang 0.5.11 sets aside for activations and CUDA graphs when it picks the default
    mem_fraction_static (server_args.py ``_handle_gpu_memory_settings``), from the logged
    server_args; None when the log does not show them. The MLA and speculative terms are left
    out where the log cannot tell (MLA) and added where it can (speculative)."""
    chunked = _number(values.get("chunked_prefill_size"))
    graphs = _number(values.get("cuda_graph_max_bs"))
    tp, pp = _number(values.get("tp_size")), _number(values.get("pp_size"))
    if chunked is None or graphs is None or tp is None or pp is None:
        return None
    prefill = chunked if chunked > 0 else (_number(values.get("max_prefill_tokens")) or 2048)
    mb = 512 + max(prefill, 2048) * 1.5 + graphs * 2 + tp * pp / 8 * 1024
    dp = _number(values.get("dp_size")) or 1
    if values.get("enable_dp_attention") == "True":
        mb += graphs * dp * 3 + (graphs * dp * 1.5 if graphs > 300 else 0)
    tokens = values.get("piecewise_cuda_graph_tokens")
    if values.get("disable_piecewise_cuda_graph") == "False" and isinstance(tokens, str):
        mb += len([t for t in tokens.split(",") if t.strip()]) * 8
    mb = max(mb, 10 * 1024)  # every GPU over 60 GB keeps at least 10 GB
    algorithm = values.get("speculative_algorithm")
    if isinstance(algorithm, str) and algorithm not in ("None", "'NGRAM'"):
        mb += 6 * 1024 if algorithm == "'STANDALONE'" else 4 * 1024
    return mb / 1024


def _sizing_text(values: dict[str, Value], fraction: float, available: float, total: float, pre: float,
                 post: float, reserved: float, minimum: float, suggested: float, reserve: float | None,
                 basis: str) -> str:
    d = display
    new_pool = post - pre * (1 - suggested)
    headroom = pre * (1 - suggested)
    text = (f"after the weights {d(available)} GB per GPU are free (lowest rank). SGLang 0.5.11 gives "
            f"the KV pool after - before*(1-mem_fraction_static), from readings it takes around the "
            f"ones it logs: before = {d(round(pre, 2))} GB (logged {d(total)} + "
            f"{d(UNLOGGED_BEFORE_WEIGHTS_GB)}), after = {d(round(post, 2))} GB (logged {d(available)} - "
            f"{d(UNLOGGED_AFTER_WEIGHTS_GB)}; both terms measured on 0.5.11): {d(round(post, 2))} - "
            f"{d(round(reserved, 2))} = {d(round(post - reserved, 2))} GB. Any value above about "
            f"{d(round(minimum, 4))} (= 1 - after/before; the log rounds to 0.01 GB, so within "
            f"~0.0001 of it the outcome is uncertain) makes it positive. {d(suggested)} gives the "
            f"pool {d(round(new_pool, 2))} GB and keeps {d(round(headroom, 2))} GB of headroom")
    if basis == "reserve":
        text += (f", at least the {d(round(reserve or 0, 2))} GB SGLang's own default reserves for "
                 f"activations and CUDA graphs with these server arguments")
    elif reserve is not None:
        text += (f" (half of the free memory: the weights leave less than the "
                 f"{d(round(reserve, 2))} GB SGLang's own default reserves for activations and CUDA "
                 f"graphs, so lower --cuda-graph-max-bs or --chunked-prefill-size too, or spread the "
                 f"model over more GPUs)")
    else:
        text += " (half of the free memory each: the log does not show the server arguments SGLang's own reserve is computed from)"
    per_token = _kv_bytes_per_token_gb(values)
    if per_token:
        text += f", about {int(new_pool / per_token):,} tokens at the logged KV size per token"
    return text + ". If CUDA graph capture then runs out of memory, lower --cuda-graph-max-bs."


def _kv_bytes_per_token_gb(values: dict[str, Value]) -> float | None:
    tokens = _number(values.get("kv_tokens"))
    size = _number(values.get("kv_size_gb"))
    if size is None:
        k, v = _number(values.get("k_size_gb")), _number(values.get("v_size_gb"))
        size = k + v if k is not None and v is not None else None
    if not tokens or not size:
        return None
    return size / tokens
