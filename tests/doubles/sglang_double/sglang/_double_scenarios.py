"""TEST DOUBLE helpers: the replay logs, how they are printed, and SGLang's KV-pool arithmetic.

A scenario is a log file under ``logs/`` split into sections by ``#@ name`` lines (other
``#`` lines are comments). The launcher prints ``launch``, the scheduler child prints
``scheduler`` and then ``kv_oom`` or ``memory_pool`` (decided by the arithmetic below),
``crash`` where the scenario has one; the launcher prints ``uvicorn``, ``ready``, ``sigquit``
and ``shutdown``. Lines are written for TP0..TP7; a launch with a smaller --tp-size drops the
other ranks (with their traceback lines) and a single GPU loses the ``TP0`` tag, as SGLang's
own prefixes do.
"""

from __future__ import annotations

import os
import re
import string
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

LOG_DIR = Path(__file__).resolve().parents[1] / "logs"

# SGLang's auto-chosen value in the scenario's EP launch (SCENARIO.md); used when the launch
# passes no --mem-fraction-static, so the numbers match the story on both configs.
DEFAULT_MEM_FRACTION_STATIC = 0.778734296875

# Kimi-K2.5 is DeepSeek-V3 style MLA: SGLang's profile_max_num_token sizes a token's cell as
# (kv_lora_rank + qk_rope_head_dim) * num_layers * element_size = (512 + 64) * 61 * 2 bytes.
KV_CELL_BYTES = (512 + 64) * 61 * 2
CONTEXT_LEN = 262144
GRAPH_MEM_PER_BS_GB = 0.02  # invented: 52 captured sizes ~ 1.04 GB, as in sglang PR #12978's log


@dataclass(frozen=True)
class Scenario:
    name: str
    log: str
    flow: str  # "serve" | "crash_stay" | "crash_exit" | "hang" | "warmup_hang"
    # mem_fraction_static when the launch passes none: SGLang's auto value, except where the
    # scenario's launch passed one (EP launch 2 ran with --mem-fraction-static 0.92).
    default_fraction: float = DEFAULT_MEM_FRACTION_STATIC
    extra: str = ""  # a section the scheduler plays after its own (a warning the real server logs)


SCENARIOS = {
    "ready": Scenario("ready", "ready.log", "serve"),
    "kv_pool_oom": Scenario("kv_pool_oom", "kv_pool_oom.log", "serve"),
    "assert_after_weights": Scenario("assert_after_weights", "assert_after_weights.log",
                                     "crash_stay", default_fraction=0.92),
    "hang": Scenario("hang", "hang.log", "hang"),
    "crash_exit": Scenario("crash_exit", "crash_exit.log", "crash_exit"),
    # sglang 0.5.11 with --moe-a2a-backend flashinfer on one H200: HTTP up, the warmup
    # request never answered, /health_generate 503 (and its access line) every poll
    "warmup_hang": Scenario("warmup_hang", "ready.log", "warmup_hang"),
    # sglang >= 0.5.14 with --enable-torch-symm-mem on SM120: every rank warns, the server serves
    # with NCCL all-reduce (torch_symm_mem.py's logger.warning, read in the 0.5.21 wheel)
    "symm_mem_off": Scenario("symm_mem_off", "ready.log", "serve", extra="symm_mem_off"),
}


def scenario_from_env() -> Scenario:
    name = os.environ.get("SGLANG_DOUBLE_SCENARIO", "ready")
    if name not in SCENARIOS:
        sys.exit(f"sglang test double: unknown SGLANG_DOUBLE_SCENARIO={name!r}; "
                 f"known: {', '.join(sorted(SCENARIOS))}")
    return SCENARIOS[name]


def line_delay() -> float:
    return float(os.environ.get("SGLANG_DOUBLE_DELAY", "0.05"))


def read_sections(log_name: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in (LOG_DIR / log_name).read_text(encoding="utf-8").splitlines():
        if raw.startswith("#@ "):
            current = sections.setdefault(raw[3:].strip(), [])
        elif raw.startswith("#") or current is None:
            continue
        else:
            current.append(raw)
    return sections


# --- printing ---------------------------------------------------------------------------------

_STAMP = re.compile(r"^(\x1b\[\d+m)?\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_RANK = re.compile(r"^(?:\x1b\[\d+m)?\[[^\]]*?\bTP(\d+)\b[^\]]*\]")


def select_ranks(lines: Iterable[str], tp_size: int) -> list[str]:
    """Keep the lines of ranks below tp_size; unprefixed lines follow the rank above them."""
    kept, keep = [], True
    for line in lines:
        match = _RANK.match(line)
        if match:
            keep = int(match.group(1)) < tp_size
            if keep and tp_size == 1:
                line = line.replace(" TP0]", "]", 1)  # single GPU: SGLang prints no rank tag
        elif _STAMP.match(line):
            keep = True  # a launcher line ends any rank's traceback
        if keep:
            kept.append(line)
    return kept


def render(line: str, values: dict[str, object]) -> str:
    """Today's time in the prefix (as a live log has it) and the launch's own values."""
    line = _STAMP.sub(lambda m: (m.group(1) or "") + "[" + time.strftime("%Y-%m-%d %H:%M:%S"), line)
    return string.Template(line).safe_substitute({k: str(v) for k, v in values.items()})


def play(lines: Iterable[str], values: dict[str, object], stream=None) -> None:
    """Print lines at the scenario's pace, flushing each like a logging handler does."""
    stream = stream or sys.stderr
    delay = line_delay()
    for line in lines:
        stream.write(render(line, values) + "\n")
        stream.flush()
        if delay:
            time.sleep(delay)


# --- SGLang's memory arithmetic ----------------------------------------------------------------

_BEGIN = re.compile(r"Load weight begin\. avail mem=(\d+\.?\d*) GB")
_END = re.compile(r"Load weight end\..*?avail mem=(\d+\.?\d*) GB")


def memory_numbers(scheduler_lines: list[str]) -> tuple[float, float]:
    """(total, available after weights) from the lines this launch printed, lowest rank value:
    SGLang takes the minimum over ranks of both (get_available_gpu_memory(distributed=True))."""
    total = min(float(m.group(1)) for m in map(_BEGIN.search, scheduler_lines) if m)
    available = min(float(m.group(1)) for m in map(_END.search, scheduler_lines) if m)
    return total, available


def capture_sizes(max_bs: int) -> list[int]:
    """SGLang's default CUDA-graph batch sizes up to --cuda-graph-max-bs (52 sizes for 512, as
    the 'Capture cuda graph bs' line of sgl-project/sglang PR #11830 shows)."""
    sizes = [1, 2, 4, 8, 12, 16] + list(range(24, 257, 8)) + list(range(272, 513, 16))
    return [s for s in sizes if s <= max_bs] or [1]


def kv_pool(total_gb: float, available_gb: float, fraction: float, max_bs: int) -> dict[str, object] | None:
    """profile_max_num_token: rest = available - total * (1 - fraction); tokens = rest // cell.
    None when the pool gets no token, which SGLang turns into 'Not enough memory'."""
    rest_gb = available_gb - total_gb * (1 - fraction)
    tokens = int(rest_gb * (1 << 30) // KV_CELL_BYTES)
    if tokens <= 0:
        return None
    kv_gb = tokens * KV_CELL_BYTES / (1 << 30)
    sizes = capture_sizes(max_bs)
    graph_gb = GRAPH_MEM_PER_BS_GB * len(sizes)
    pool_end = available_gb - kv_gb
    return {
        "kv_tokens": tokens,
        "kv_size_gb": f"{kv_gb:.2f}",
        "pool_end_gb": f"{pool_end:.2f}",
        "graph_begin_gb": f"{pool_end - 0.55:.2f}",
        "graph_end_gb": f"{pool_end - 0.55 - graph_gb:.2f}",
        "graph_mem_gb": f"{graph_gb:.2f}",
        "cuda_graph_bs": str(sizes),
        "cuda_graph_n": len(sizes),
        "cuda_graph_it_s": f"{len(sizes) / 11.35:.2f}",
        # scheduler.py: min(max(int(tokens / context_len * 512), 2048), 4096)
        "max_running_requests": min(max(int(tokens / CONTEXT_LEN * 512), 2048), 4096),
    }
