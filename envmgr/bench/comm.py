"""The verify step's communication, measured inside an environment: TP all-reduces vs EP all-to-alls.

The measuring is the ``comm_bench`` probe script (``envmgr/probes/scripts/comm_bench.py``),
run like every probe (``envmgr probe --only comm_bench``). Here: its arguments from the spec
(model shapes, tokens per verify step). The arithmetic that turns its microseconds into a share
of the scenario's decode step budget is the tests' and the evidence's (tests/comm_summary.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envmgr.errors import UsageError

if TYPE_CHECKING:
    from envmgr.spec.models import Spec

PROBE_ID = "comm_bench"

# The probe's default model when the spec's model config is not readable here: Kimi-K2.5
# (DeepSeek-V3 shape), hidden 7168, 61 layers each with attention and MoE, 8 experts per token.
MODEL_SHAPE = {"hidden": 7168, "attention_layers": 61, "moe_layers": 61, "top_k": 8, "dtype": "bfloat16"}
DEFAULT_DRAFT_TOKENS = 4  # SGLang's EAGLE-3 config in the scenario: --speculative-num-draft-tokens 4
DEFAULT_BATCH = 1  # one stream: the scenario's ~42 KB all-reduce is a few tokens x 7168 x 2 B
SPECULATIVE_ALGORITHMS = ("EAGLE3", "EAGLE", "NEXTN", "STANDALONE")
DRAFT_TOKENS_FLAG = "--speculative-num-draft-tokens"

# What the probe script reads (its docstring); an override outside these is a typo.
ARG_KEYS = frozenset({"world_size", "tokens", "hidden", "top_k", "attention_layers", "moe_layers", "dtype",
                      "iters", "warmup", "graph", "graph_replays", "timeout_s", "env", "backend",
                      "draft_tokens", "batch", "tokens_from", "shape_from"})


def draft_tokens_of(spec: Spec | None) -> tuple[int, str]:
    """(draft tokens per verify step, where the number came from): the first speculative config's flag."""
    benchmarks = spec.benchmarks if spec else None
    if spec is None or benchmarks is None:
        return DEFAULT_DRAFT_TOKENS, f"default {DRAFT_TOKENS_FLAG} (no speculative config in a spec)"
    for name in benchmarks.configs:
        flags = benchmarks.flags_of(name)
        if str(flags.get("--speculative-algorithm", "")).upper() not in SPECULATIVE_ALGORITHMS:
            continue
        if DRAFT_TOKENS_FLAG in flags:
            return int(flags[DRAFT_TOKENS_FLAG] or 0), f"spec {spec.metadata.name}, config {name}: {DRAFT_TOKENS_FLAG}"
        return DEFAULT_DRAFT_TOKENS, f"spec {spec.metadata.name}, config {name} sets no {DRAFT_TOKENS_FLAG}: default"
    return DEFAULT_DRAFT_TOKENS, f"default {DRAFT_TOKENS_FLAG} (no speculative config in a spec)"


def model_shape(spec: Spec | None) -> tuple[dict[str, Any], str]:
    """The shapes the communication depends on, from the spec's model config.json where it is
    readable here (hidden_size, num_hidden_layers, first_k_dense_replace, num_experts_per_tok),
    else MODEL_SHAPE; and where they came from."""
    from envmgr.model_config import int_field, model_config

    path = spec.benchmarks.model_path if spec and spec.benchmarks else None
    config = model_config(path) if path else None
    hidden, layers, top_k = (int_field(config, key) for key in ("hidden_size", "num_hidden_layers",
                                                                "num_experts_per_tok"))
    if not (hidden and layers and top_k):
        return dict(MODEL_SHAPE), "default (Kimi-K2.5 shape)" + (f": no readable MoE config.json in {path}" if path else "")
    dense = int_field(config, "first_k_dense_replace") or 0
    return ({"hidden": hidden, "attention_layers": layers, "moe_layers": layers - dense, "top_k": top_k,
             "dtype": MODEL_SHAPE["dtype"]}, f"{path}/config.json")


def comm_args(spec: Spec | None = None, **overrides: Any) -> dict[str, Any]:
    """The probe's arguments: model shapes, tokens = draft tokens x batch, ranks = the spec's GPUs.

    Overrides (None = keep the default) may name any key of ``ARG_KEYS``; ``tokens`` wins over
    ``draft_tokens`` x ``batch``."""
    unknown = sorted(set(overrides) - ARG_KEYS)
    if unknown:
        raise UsageError(f"unknown comm bench argument(s): {', '.join(unknown)}",
                         hint=f"known: {', '.join(sorted(ARG_KEYS))}")
    given = {key: value for key, value in overrides.items() if value is not None}
    draft, source = draft_tokens_of(spec)
    if "draft_tokens" in given:
        source = "given"
    draft, batch = int(given.pop("draft_tokens", draft)), int(given.pop("batch", DEFAULT_BATCH))
    shape, shape_from = model_shape(spec)
    args: dict[str, Any] = {**shape, "shape_from": shape_from,
                            "draft_tokens": draft, "batch": batch, "tokens": draft * batch,
                            "tokens_from": f"{draft} draft tokens ({source}) x batch {batch}"}
    if spec is not None:
        args["world_size"] = spec.hardware.gpu.count
    if "tokens" in given:
        args["tokens_from"] = "given"
    args.update(given)
    return args
