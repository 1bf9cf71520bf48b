"""The load: SGLang's own ``bench_serving`` against a ready server, and what it measured.

Offline by design: the ``random-ids`` dataset needs no download (``random`` and ``sharegpt``
fetch ShareGPT unless given a ``dataset_path``). The client runs inside the environment like
everything else (``backend.run``), and appends its JSON line to ``--output-file``; pointing
that at ``/dev/stdout`` brings the line back through any backend (a container's file would
vanish with it). The printed summary table is the fallback when no JSON line came.
"""

from __future__ import annotations

import json
import re
from typing import Any

from packaging.version import InvalidVersion, Version

from envmgr.bench.command import ServerCommand
from envmgr.bench.results import LoadResult
from envmgr.errors import LoadParseError
from envmgr.spec.models import Load

# sglang 0.5.23 moved the client; the old module name remains as a shim there.
NEW_MODULE_FROM = Version("0.5.23")
OLD_MODULE, NEW_MODULE = "sglang.bench_serving", "sglang.benchmark.serving"

# JSON key -> LoadResult field, where bench_serving's name differs from ours.
RENAMED = {"duration": "duration_s"}
# Lines of the printed table -> LoadResult field (fallback when no JSON line came).
TABLE = {
    "Successful requests": "completed",
    "Benchmark duration (s)": "duration_s",
    "Request throughput (req/s)": "request_throughput",
    "Output token throughput (tok/s)": "output_throughput",
    "Total token throughput (tok/s)": "total_throughput",
    "Mean TTFT (ms)": "mean_ttft_ms", "Median TTFT (ms)": "median_ttft_ms", "P99 TTFT (ms)": "p99_ttft_ms",
    "Mean TPOT (ms)": "mean_tpot_ms", "Median TPOT (ms)": "median_tpot_ms", "P99 TPOT (ms)": "p99_tpot_ms",
    "Mean ITL (ms)": "mean_itl_ms", "Median ITL (ms)": "median_itl_ms", "P99 ITL (ms)": "p99_itl_ms",
}
_TABLE_LINE = re.compile(r"^(?P<name>[A-Za-z0-9 ()/_-]+?):\s+(?P<value>-?\d+(?:\.\d+)?)\s*$")


def client_module(sglang_version: str | None) -> str:
    try:
        if sglang_version and Version(sglang_version) >= NEW_MODULE_FROM:
            return NEW_MODULE
    except InvalidVersion:
        pass
    return OLD_MODULE


def load_argv(python: str, load: Load, server: ServerCommand, sglang_version: str | None) -> list[str]:
    argv = [
        python, "-m", client_module(sglang_version), "--backend", "sglang",
        "--host", server.client_host, "--port", str(server.port),
        "--dataset-name", load.dataset,
        "--random-input-len", str(load.input_len), "--random-output-len", str(load.output_len),
        # The default range ratio draws lengths from [1, N]: fix them, so environments compare.
        "--random-range-ratio", "1.0",
        "--num-prompts", str(load.num_prompts), "--max-concurrency", str(load.max_concurrency),
        "--output-file", "/dev/stdout",
    ]
    if load.dataset_path:
        argv += ["--dataset-path", load.dataset_path]
    return argv


def parse_output(text: str) -> LoadResult:
    """The last JSON result line in the output, else the printed table."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and '"output_throughput"' in line:
            try:
                return from_json(json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise LoadParseError(f"bench_serving's JSON line lacks a field: {exc}") from exc
    return from_table(text)


def from_json(data: dict[str, Any]) -> LoadResult:
    values = {RENAMED.get(k, k): v for k, v in data.items()}
    # Releases before sgl-project/sglang#9790 (2025-08) write no total_throughput; it is
    # input + output throughput.
    if "total_throughput" not in values and {"input_throughput", "output_throughput"} <= values.keys():
        values["total_throughput"] = values["input_throughput"] + values["output_throughput"]
    fields = LoadResult.__dataclass_fields__
    missing = [f for f in fields if f not in values]
    if missing:
        raise KeyError(", ".join(missing))
    return LoadResult(**{f: _number(values[f], f) for f in fields})


def from_table(text: str) -> LoadResult:
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _TABLE_LINE.match(line.strip())
        if match and match["name"].strip() in TABLE:
            values[TABLE[match["name"].strip()]] = float(match["value"])
    missing = [f for f in LoadResult.__dataclass_fields__ if f not in values]
    if missing:
        raise LoadParseError("bench_serving printed no result (no JSON line, and the table lacks "
                             f"{', '.join(missing)})")
    return LoadResult(**{f: _number(values[f], f) for f in LoadResult.__dataclass_fields__})


def _number(value: Any, name: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} is {value!r}, not a number")
    return int(value) if name == "completed" else float(value)
