"""What one benchmark cell (environment x config) produced, as plain data.

A cell is written to ``generations/N/bench/<config>/result.json`` (or, for an environment
named by URL, ``bench/targets/<target_folder(url)>/<config>/``) atomically and last, beside its
``server.log`` and ``load.log``; a cell directory without ``result.json`` is one an interrupted
``envmgr bench`` left behind and is run again. ``envmgr report`` reads only these files, so a
report can be made from recorded results anywhere; ``load_result`` checks each one first (its
size, its nesting, the type of every field) and names the file and the field it cannot use.

Outcomes:
    ok          the server got ready and the load completed: ``load`` holds the numbers
    crashed     the server died (process exit or a fatal log signature) before it was ready
    timeout     not ready within the startup limit
    hung        not ready, and no log line for the stall limit
    load_failed the server was ready, the load did not complete
    skipped     not launched (an error finding from the flag check or the compat rules)
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from envmgr.compat.outcome import STATES, measured
from envmgr.compat.outcome import Outcome as ConfigOutcome
from envmgr.errors import EnvmgrError
from envmgr.findings import Finding, root_cause
from envmgr.records import DamagedRecord, read_json
from envmgr.severity import ORDER

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
    spread = (values[-1] - values[0]) / median.output_throughput
    return spread if math.isfinite(spread) else None  # absurd recorded numbers: no spread to show


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
    # validate's judgement before the launch (runs / runs without FEATURE / blocked): the report
    # puts it beside what happened; None in a record from before envmgr kept it
    expected: ConfigOutcome | None = None

    @property
    def measured(self) -> ConfigOutcome:
        """What the cell showed, in the same three outcomes: served its load (without the features
        the server turned off), or not."""
        root = root_cause(self.findings)
        return measured(self.ok, self.ran_without, (root.id,) if root and not self.ok else ())

    @property
    def surprise(self) -> bool:
        """Whether what happened is not what validate expected (a rule is wrong, or the
        environment is not what its spec says); False for a record that kept no expectation."""
        return self.expected is not None and self.expected.state != self.measured.state

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
        data["expected"] = self.expected.to_dict() if self.expected else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CellResult:
        load = data.get("load")
        env = data["env"]  # keys a newer envmgr may add are ignored, as everywhere in the file
        return cls(
            env=EnvInfo(**{k: env[k] for k in EnvInfo.__dataclass_fields__ if k in env}),
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
            expected=ConfigOutcome.from_dict(data["expected"]) if data.get("expected") else None,
        )


def write_result(cell_dir: Path, result: CellResult) -> Path:
    """Write result.json last and atomically: its presence marks the cell done."""
    from envmgr.state import write_atomic

    cell_dir.mkdir(parents=True, exist_ok=True)
    path = cell_dir / RESULT_FILE
    write_atomic(path, json.dumps(result.to_dict(), indent=2))
    return path


def read_result(cell_dir: Path) -> CellResult | None:
    """The cell's recorded result, or None when it never finished or its file is damaged: either
    way ``envmgr bench`` runs the cell again (and the new file replaces the damaged one)."""
    try:
        return load_result(cell_dir / RESULT_FILE)
    except DamagedResult:
        return None


# --- where a URL environment's results go -------------------------------------------------------


def target_folder(url: str) -> str:
    """The results folder of an environment named by URL: readable, and unique to the exact URL
    (``venv:///x/a_b`` and ``venv:///x/a/b`` read alike but never share one)."""
    digest = hashlib.sha256(url.encode("utf-8")).hexdigest()[:12]
    return f"{legacy_target_folder(url)[:80]}-{digest}"  # short enough for any file system


def legacy_target_folder(url: str) -> str:
    """The folder envmgr used before ``target_folder``: URLs that differ only where the slug has
    ``_`` share it, so what it holds counts only where its result.json names the same URL."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", url).strip("_")


# --- reading result.json: nothing in it is trusted until checked -------------------------------

MAX_RESULT_BYTES = 4 << 20  # a real one is a few KiB: findings and log_tail are short
MAX_NAME = 4096  # a label, config, version or id: what heads a column or a row
MAX_NUMBER = 1e15  # past any throughput, latency or count: sums, ratios and chart axes stay finite
LATEST_TIME = 253402300800.0  # 10000-01-01: later than any date time.gmtime can write


class DamagedResult(EnvmgrError):
    """A result.json the report cannot use: which file, what is wrong with it, what to do."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}", hint=(
            f"rerun that cell (`envmgr bench SPEC --env ENV --config {path.parent.name} --rerun`) "
            "or delete the file"))

    @property
    def warning(self) -> str:
        """One line: skipped what, why, what to do."""
        return f"skipped {self.message}; {self.hint}"


def load_result(path: Path) -> CellResult:
    """The result recorded in ``path``, once its size, nesting and every field the report reads
    have been checked; ``DamagedResult`` (naming the file and the field) for anything else."""
    data = _read_json(path)
    try:
        _CELL(data, "")
    except _Wrong as wrong:
        raise DamagedResult(path, str(wrong)) from None
    return CellResult.from_dict(data)


def _read_json(path: Path) -> Any:
    """The file's JSON value, read the way every recorded file is (``envmgr.records``): a regular
    file only, at most MAX_RESULT_BYTES, nested at most its MAX_DEPTH."""
    try:
        data = read_json(path, MAX_RESULT_BYTES)
    except DamagedRecord as damaged:
        raise DamagedResult(path, damaged.why) from None
    if data is None:
        raise DamagedResult(path, "is missing")
    return data


class _Wrong(Exception):
    """A field that is not what the reader needs; its text is the message ("field 'a.b' is ...",
    or "holds ..." where the whole file is wrong)."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"field '{where}' {problem}" if where else "holds " + problem.removeprefix("is "))


Check = Callable[[Any, str], None]  # (value, its field path): raises _Wrong


def _shown(value: Any) -> str:
    """A JSON value as a message names it: its kind, and the value itself where it is short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        text = repr(value)
        return f"a number ({text})" if len(text) <= 24 else "a number"
    if isinstance(value, str):
        return f"a string ({value!r})" if len(value) <= 40 else f"a string of {len(value)} characters"
    return "a list" if isinstance(value, list) else "an object"


def _is(expected: str, test: Callable[[Any], bool]) -> Check:
    def check(value: Any, where: str) -> None:
        if not test(value):
            raise _Wrong(where, f"is {_shown(value)}, expected {expected}")
    return check


def _finite(value: Any) -> bool:
    """A JSON number (not true/false) no bigger than MAX_NUMBER: NaN and the infinities are not."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and -MAX_NUMBER <= value <= MAX_NUMBER


def _optional(check: Check) -> Check:
    def optional(value: Any, where: str) -> None:
        if value is not None:
            check(value, where)
    return optional


def _list(item: Check) -> Check:
    def each(value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise _Wrong(where, f"is {_shown(value)}, expected a list")
        for index, element in enumerate(value):
            item(element, f"{where}[{index}]")
    return each


def _map(item: Check) -> Check:
    def each(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _Wrong(where, f"is {_shown(value)}, expected an object")
        for key, element in value.items():
            item(element, f"{where}.{key}")
    return each


def _object(fields: dict[str, Check], required: tuple[str, ...] = ()) -> Check:
    """An object with these fields (others are ignored: a newer envmgr may add some)."""
    def each(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _Wrong(where, f"is {_shown(value)}, expected an object")
        prefix = f"{where}." if where else ""
        for name in required:
            if name not in value:
                raise _Wrong(prefix + name, "is missing")
        for name, check in fields.items():
            if name in value:
                check(value[name], prefix + name)
    return each


def _one_of(choices: tuple[str, ...]) -> Check:
    return _is("one of " + ", ".join(choices), lambda v: isinstance(v, str) and v in choices)


_NUMBER = _is(f"a number between -{MAX_NUMBER:g} and {MAX_NUMBER:g}", _finite)
_INTEGER = _is("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
_BOOLEAN = _is("true or false", lambda v: isinstance(v, bool))
_TEXT = _is("a string", lambda v: isinstance(v, str))
_NAME = _is(f"a string of at most {MAX_NAME} characters", lambda v: isinstance(v, str) and len(v) <= MAX_NAME)
_TIME = _is("seconds since 1970 (a date before the year 10000)",
            lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and 0 <= v < LATEST_TIME)
_SCALAR = _is("a string, a number, true/false or null",
              lambda v: v is None or isinstance(v, (str, bool)) or _finite(v))
_ANY: Check = lambda value, where: None  # noqa: E731  # kept, never read by the report

# result.json's shape, field by field. Where CellResult.from_dict takes null for "none", so do these.
_LOAD = _object({name: _INTEGER if name == "completed" else _NUMBER for name in LoadResult.__dataclass_fields__},
                required=tuple(LoadResult.__dataclass_fields__))
_ENV = _object({"label": _NAME, "generation": _optional(_INTEGER), "spec": _NAME, "backend": _NAME,
                "versions": _map(_NAME)}, required=("label", "generation", "spec", "backend"))
_SERVED_BY = _object({"server_version": _optional(_NAME), "test_double": _BOOLEAN, "gpu": _optional(_NAME),
                      "host": _NAME})
_FINDING = _object({  # "rule" and "source": the shape before one Finding (Finding.from_dict)
    "id": _NAME, "rule": _NAME, "severity": _one_of(tuple(ORDER)), "message": _TEXT, "fix": _TEXT,
    "sources": _optional(_list(_TEXT)), "source": _optional(_TEXT), "field": _TEXT, "where": _optional(_TEXT),
    "configs": _optional(_list(_NAME)), "flag": _TEXT, "edit": _optional(_map(_ANY)), "title": _TEXT,
    "line": _INTEGER, "text": _TEXT, "values": _map(_ANY), "rank": _optional(_NAME), "ranks": _optional(_list(_NAME)),
    "count": _INTEGER, "priority": _INTEGER, "feature": _optional(_NAME), "stops": _optional(_BOOLEAN)})
_OUTCOME = _object({"state": _one_of(STATES), "features": _optional(_list(_NAME)), "why": _optional(_list(_NAME)),
                    "outcome": _NAME}, required=("state",))
_CELL = _object({
    "env": _ENV, "config": _NAME, "outcome": _one_of(OUTCOMES), "summary": _TEXT, "argv": _list(_TEXT),
    "server_env": _map(_TEXT), "load_argv": _list(_TEXT), "startup_s": _optional(_NUMBER),
    "verdict_after_line_s": _optional(_NUMBER), "load": _optional(_LOAD), "findings": _list(_FINDING),
    "server_log": _TEXT, "started": _TIME, "finished": _TIME, "served_by": _optional(_SERVED_BY),
    "load_params": _optional(_map(_SCALAR)), "ran_without": _optional(_list(_NAME)),
    "log_tail": _optional(_list(_TEXT)), "runs": _optional(_list(_LOAD)), "order": _optional(_INTEGER),
    "warmup": _optional(_BOOLEAN), "expected": _optional(_OUTCOME)}, required=("env", "config", "outcome"))
