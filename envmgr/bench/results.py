"""What one benchmark cell (environment x config) produced, as plain data.

A cell is written to ``generations/N/bench/<config>/result.json`` (atomically, last) beside
its ``server.log`` and ``load.log``; a cell directory without ``result.json`` is one an
interrupted ``envmgr bench`` left behind and is run again. ``envmgr report`` reads only
these files, so a report can be made from recorded results anywhere.

Outcomes:
    ok          the server got ready and the load completed: ``load`` holds the numbers
    crashed     the server died (process exit or a fatal log signature) before it was ready
    timeout     not ready within the startup limit
    hung        not ready, and no log line for the stall limit
    load_failed the server was ready, the load did not complete
    skipped     not launched (an error finding from the flag check or the compat rules)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from envmgr.findings import Finding

Outcome = Literal["ok", "crashed", "timeout", "hung", "load_failed", "skipped"]
OUTCOMES: tuple[str, ...] = ("ok", "crashed", "timeout", "hung", "load_failed", "skipped")
RESULT_FILE = "result.json"


@dataclass(frozen=True)
class LoadResult:
    """bench_serving's summary (its JSONL line), in its own units."""

    output_throughput: float  # tok/s
    total_throughput: float  # tok/s, input + output
    request_throughput: float  # req/s
    completed: int
    duration_s: float
    mean_ttft_ms: float
    median_ttft_ms: float
    p99_ttft_ms: float
    mean_tpot_ms: float
    median_tpot_ms: float
    p99_tpot_ms: float
    mean_itl_ms: float
    median_itl_ms: float
    p99_itl_ms: float

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadResult:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class EnvInfo:
    """The environment a cell ran in: which generation, and what it holds."""

    label: str  # what a report column is called, e.g. "gen 3 cuda13"
    generation: int | None
    spec: str  # the spec's metadata.name
    backend: str  # the backend URL
    versions: dict[str, str] = field(default_factory=dict)  # sglang, torch, flashinfer, cuda


@dataclass(frozen=True)
class ServedBy:
    """What really served a cell: the server's own version (its /server_info), whether it was
    envmgr's SGLang test double, the GPU(s) nvidia-smi named in the environment, the host."""

    server_version: str | None = None
    test_double: bool = False
    gpu: str | None = None
    host: str = ""

    @property
    def label(self) -> str:
        server = ("envmgr's SGLang TEST DOUBLE (no model ran)" if self.test_double
                  else f"sglang {self.server_version}" if self.server_version else "server version unknown")
        return f"{server} on {self.gpu or 'an unnamed GPU'} ({self.host or 'unknown host'})"

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ServedBy | None:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data}) if data else None


def relative_spread(runs: tuple[LoadResult, ...], median: LoadResult | None) -> float | None:
    """(max - min) / median of the runs' output throughput; None with fewer than two runs."""
    values = sorted(r.output_throughput for r in runs)
    if len(values) < 2 or median is None or not median.output_throughput:
        return None
    return (values[-1] - values[0]) / median.output_throughput


@dataclass(frozen=True)
class CellResult:
    env: EnvInfo
    config: str
    outcome: Outcome
    summary: str  # one line: "89.5 tok/s" or the root cause
    argv: tuple[str, ...] = ()
    server_env: dict[str, str] = field(default_factory=dict)  # the config's env vars
    load_argv: tuple[str, ...] = ()
    startup_s: float | None = None  # launch to ready (or to the crash)
    verdict_after_line_s: float | None = None  # the deciding log line's arrival to the verdict
    load: LoadResult | None = None
    findings: tuple[Finding, ...] = ()  # triage findings, root cause first
    server_log: str = ""  # relative to the cell directory
    started: float = 0.0  # epoch seconds
    finished: float = 0.0
    served_by: ServedBy | None = None  # None: not launched, or recorded before envmgr kept it
    load_params: dict[str, Any] = field(default_factory=dict)  # benchmarks.load as run
    # features the config asked for that the server turned off: its throughput is not theirs
    ran_without: tuple[str, ...] = ()
    log_tail: tuple[str, ...] = ()  # a failed cell's last meaningful server.log lines (redacted)
    runs: tuple[LoadResult, ...] = ()  # every measured load run; ``load`` is the median one
    order: int = 0  # the config's place in its bench spec (reports keep the spec's order)
    warmup: bool = False  # a warm-up run came first, not counted

    @property
    def spread(self) -> float | None:
        return relative_spread(self.runs, self.load)

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    def same_run(self, argv: tuple[str, ...], server_env: dict[str, str], load_argv: tuple[str, ...]) -> bool:
        """Whether this result is of exactly that server command, env and load (resume)."""
        return (self.argv, self.server_env, self.load_argv) == (tuple(argv), dict(server_env), tuple(load_argv))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        data["load_argv"] = list(self.load_argv)
        data["findings"] = [f.to_dict() for f in self.findings]
        data["ran_without"] = list(self.ran_without)
        data["log_tail"] = list(self.log_tail)
        data["runs"] = [asdict(r) for r in self.runs]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        load = data.get("load")
        return cls(
            env=EnvInfo(**data["env"]),
            config=data["config"],
            outcome=data["outcome"],
            summary=data.get("summary", ""),
            argv=tuple(data.get("argv", ())),
            server_env=dict(data.get("server_env", {})),
            load_argv=tuple(data.get("load_argv", ())),
            startup_s=data.get("startup_s"),
            verdict_after_line_s=data.get("verdict_after_line_s"),
            load=LoadResult.from_dict(load) if load else None,
            findings=tuple(Finding.from_dict(f) for f in data.get("findings", ())),
            server_log=data.get("server_log", ""),
            started=data.get("started", 0.0),
            finished=data.get("finished", 0.0),
            served_by=ServedBy.from_dict(data.get("served_by")),
            load_params=dict(data.get("load_params") or {}),
            ran_without=tuple(data.get("ran_without") or ()),
            log_tail=tuple(data.get("log_tail") or ()),
            runs=tuple(LoadResult.from_dict(r) for r in data.get("runs") or ()),
            warmup=bool(data.get("warmup", False)),
            order=int(data.get("order") or 0),
        )


def write_result(cell_dir: Path, result: CellResult) -> Path:
    """Write result.json last and atomically: its presence marks the cell done."""
    from envmgr.state import write_atomic

    cell_dir.mkdir(parents=True, exist_ok=True)
    path = cell_dir / RESULT_FILE
    write_atomic(path, json.dumps(result.to_dict(), indent=2))
    return path


def read_result(cell_dir: Path) -> CellResult | None:
    """The cell's recorded result, or None when it never finished (or the file is damaged)."""
    try:
        return CellResult.from_dict(json.loads((cell_dir / RESULT_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
