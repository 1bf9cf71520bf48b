"""``envmgr bench``: every environment x config, one server launch each, resumable.

An environment is a generation (its number, or ``current``: its backend, spec and lock) or a
backend URL (``docker://envmgr/cuda13:abc``, ``venv:///opt/envs/x``: the bench spec is taken
as what it realizes). The configs and the load come from the bench spec; the flags of each
cell are checked against the environment's sglang version and its compat rules before
anything starts, and a cell with an error there is recorded as ``skipped`` with the reason.

Results live beside the environment: ``generations/N/bench/<config>/`` (or
``$ENVMGR_HOME/bench/targets/<url-slug>-<hash of the URL>/<config>/``) with ``server.log``,
``load.log`` and, written last, ``result.json``. A rerun skips cells whose ``result.json``
matches the command it would run now: an interrupted matrix resumes where it stopped (also
from a folder named the way envmgr did before the hash, where its result names the same URL).
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envmgr.bench import preflight
from envmgr.bench.command import ServerCommand, server_command
from envmgr.bench.launch import Launch, Limits, RunningServer, log_tail
from envmgr.bench.load import LoadParseError, load_argv, parse_output
from envmgr.bench.results import (
    CellResult,
    EnvInfo,
    LoadResult,
    ServedBy,
    legacy_target_folder,
    read_result,
    relative_spread,
    target_folder,
    write_result,
)
from envmgr.bench.results import Outcome as CellOutcome  # ok, crashed, ... (not compat's three)
from envmgr.bench.triage import load_signatures, triage_file
from envmgr.compat.outcome import RUNS, Outcome, expected
from envmgr.errors import BackendError, UsageError
from envmgr.findings import Finding, root_cause
from envmgr.lock import locked_versions
from envmgr.secrets import Redactor
from envmgr.spec.models import Spec, canonical_name
from envmgr.targets import open_target
from envmgr.targets.urls import split_url
from envmgr.versions import exact_pin

Progress = Callable[[str], None]
VERSION_PACKAGES = ("sglang", "torch", "flashinfer-python")
LOAD_TICK_S = 15.0


@dataclass(frozen=True)
class Env:
    info: EnvInfo
    url: str
    spec: Spec  # the stack this environment holds (rules are evaluated against it)
    results_dir: Path
    legacy_dir: Path | None = None  # where results of a URL went before folders were keyed by it

    @property
    def sglang(self) -> str | None:
        return self.info.versions.get("sglang")


@dataclass(frozen=True)
class Cell:
    env: Env
    config: str
    command: ServerCommand
    load_argv: tuple[str, ...]
    problems: tuple[Finding, ...] = ()  # flag problems and compat findings, errors first
    limits: Limits = Limits()
    load_timeout_s: float = 3600.0
    load_summary: str = ""
    repeats: int = 1  # measured load runs (benchmarks.load.repeats)
    warmup: bool = False  # one uncounted run first
    order: int = 0  # the config's place in the bench spec: reports keep it
    redact: Redactor = Redactor()  # the bench spec's secrets: never shown or recorded
    load_params: tuple[tuple[str, Any], ...] = ()  # benchmarks.load, recorded with the result
    gpus: int = 1  # the GPUs its launch takes (tp x pp x replicas)
    expected: Outcome = RUNS  # validate's judgement of the config on the env's stack

    @property
    def shown_env(self) -> dict[str, str]:
        """The server's env as it may be shown and recorded."""
        return self.redact.env(self.command.env)

    @property
    def dir(self) -> Path:
        return self.env.results_dir / self.config

    @property
    def blocked(self) -> bool:
        return any(p.fatal for p in self.problems)

    def recorded(self) -> CellResult | None:
        """This cell's result from an earlier run: in its folder, else in the folder envmgr used
        before, but only where that result says it is of this very URL (others shared it)."""
        done = read_result(self.dir)
        if done is not None or self.env.legacy_dir is None:
            return done
        old_dir = self.env.legacy_dir / self.config
        old = read_result(old_dir)
        if old is None or old.env.backend != self.env.url:
            return None
        return replace(old, server_log=str(old_dir / (old.server_log or "server.log")))  # where it really is


@dataclass
class MatrixRun:
    cells: list[Cell]
    results: list[CellResult] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)  # "env/config" taken from an earlier run


# --- environments -------------------------------------------------------------------------


def resolve_envs(names: Sequence[str], bench_spec: Spec, home: Path | None) -> list[Env]:
    """``--env`` values (generation numbers, ``current``, backend URLs) as environments."""
    from envmgr.state import Store

    store = Store(home)
    envs = []
    for name in names or ["current"]:
        if "://" in name:
            split_url(name)  # a clear error for a bad URL, before anything runs
            envs.append(_target_env(name, bench_spec, store.home))
        else:
            envs.append(_generation_env(store, name))
    labels = [e.info.label for e in envs]
    if len(set(labels)) != len(labels):
        raise UsageError(f"an environment is named twice: {', '.join(labels)}")
    return envs


def _generation_env(store, name: str) -> Env:
    from envmgr.state import current_spec

    gen = store.named(name)
    spec = current_spec(gen).spec
    locked = locked_versions(gen.lock)
    versions = {p: locked[p] for p in VERSION_PACKAGES if p in locked}
    versions.update(_cuda_version(spec))
    info = EnvInfo(label=f"gen {gen.number} {spec.metadata.name}", generation=gen.number,
                   spec=spec.metadata.name, backend=gen.backend, versions=versions)
    return Env(info, gen.backend, spec, gen.path / "bench")


def _target_env(url: str, spec: Spec, home: Path) -> Env:
    versions = {}
    for name, specifier in spec.python.packages.items():
        pin = exact_pin(specifier)
        if canonical_name(name) in VERSION_PACKAGES and pin:
            versions[canonical_name(name)] = pin
    versions.update(_cuda_version(spec))
    info = EnvInfo(label=f"{spec.metadata.name} @ {url}", generation=None, spec=spec.metadata.name,
                   backend=url, versions=versions)
    targets = home / "bench" / "targets"
    return Env(info, url, spec, targets / target_folder(url), legacy_dir=targets / legacy_target_folder(url))


def _cuda_version(spec: Spec) -> dict[str, str]:
    return {"cuda": spec.cuda.selected.version} if spec.cuda else {}


# --- cells --------------------------------------------------------------------------------


ModulesOf = Callable[[Env, str, Sequence[str]], "frozenset[str] | None"]


def plan_cells(bench_spec: Spec, envs: Sequence[Env], configs: Sequence[str],
               python_of: Callable[[Env], str],
               modules_of: ModulesOf = lambda env, python, modules: None) -> list[Cell]:
    """Every env x config with its command and what the checks say about it. ``modules_of``
    asks the environment which of the feature modules (DeepEP, ...) it can import."""
    bench = bench_spec.benchmarks
    if bench is None or not bench.configs:
        raise UsageError("the spec has no benchmarks.configs to run",
                         hint="add a benchmarks: section (see specs/cuda128.yaml)")
    names = list(configs) or list(bench.configs)
    limits = Limits(startup_s=bench.startup_timeout_s, stall_s=bench.stall_timeout_s)
    redact = Redactor.for_spec(bench_spec)
    stack_secrets = {n: str(v) for n, v in bench_spec.env.items() if n in redact.names}
    cells = []
    for env in envs:
        python = python_of(env)
        installed = modules_of(env, python, ["sglang", *feature_modules()])
        findings = env_findings(bench_spec, env, installed)  # every config at once: one evaluation per env
        if installed is not None and "sglang" not in installed:  # pre-flight: no server could start
            findings.insert(0, Finding(
                "sglang-not-importable", "error",
                f"{python} in {env.info.label} cannot import sglang: every server would exit at once",
                "install sglang in that environment (python.packages, then `envmgr apply`), or give --env "
                "an environment that has it", field="python.packages", configs=tuple(names)))
        for config in names:
            command = server_command(bench, config, python)
            # the stack's secrets reach the server through its environment (images never hold them)
            command = replace(command, env={**stack_secrets, **command.env})
            load = load_argv(python, bench.load, command, env.sglang)
            problems = [f for f in findings
                        if config in f.configs or (f.field.startswith("benchmarks.") and not f.configs)]
            cells.append(Cell(env, config, command, tuple(load), tuple(problems), limits=limits,
                              load_timeout_s=bench.load.timeout_s, load_summary=_load_summary(bench.load),
                              repeats=bench.load.repeats, warmup=bench.load.warmup,
                              order=list(bench.configs).index(config), redact=redact,
                              load_params=tuple(bench.load.model_dump().items()),
                              gpus=gpus_needed(bench.flags_of(config)), expected=expected(findings, config)))
    return cells


def gpus_needed(flags: dict[str, Any]) -> int:
    """The GPUs a launch with these flags takes, as the compat rules count them."""
    from envmgr.compat.context import parallel_of

    return int(parallel_of(flags)["gpus_needed"])


def _load_summary(load) -> str:
    return (f"{load.num_prompts} {load.dataset} prompts, {load.input_len} -> {load.output_len} tokens, "
            f"concurrency {load.max_concurrency}")


def env_findings(bench_spec: Spec, env: Env, installed_modules: frozenset[str] | None = None) -> list[Finding]:
    """What validate says of the bench configs on the env's stack: the rules, and each config's
    flags against the env's sglang release (errors first)."""
    from envmgr.compat import evaluate

    return evaluate(_as_installed(env).model_copy(update={"benchmarks": bench_spec.benchmarks}),
                    installed_modules=installed_modules)


def feature_modules() -> list[str]:
    """Every module a flag value makes SGLang import (the knowledge base's feature_modules)."""
    from envmgr.compat.kb import default_knowledge_base

    table = default_knowledge_base().tables.get("feature_modules", {})
    return sorted({need["module"] for by_value in table.values() for need in by_value.values()})


def _as_installed(env: Env) -> Spec:
    """The env's spec with the versions it really has (a generation's lock) pinned exactly, so
    that flags are checked against the sglang that will run, not a range in the spec."""
    packages = dict(env.spec.python.packages)
    for name in list(packages):
        if canonical_name(name) in env.info.versions:
            packages[name] = "==" + env.info.versions[canonical_name(name)]
    python = env.spec.python.model_copy(update={"packages": packages})
    return env.spec.model_copy(update={"python": python})


# --- running ------------------------------------------------------------------------------


def run_matrix(cells: Sequence[Cell], *, rerun: bool = False, limits: Limits | None = None,
               progress: Progress = lambda line: None) -> MatrixRun:
    run = MatrixRun(list(cells))
    for index, cell in enumerate(cells, 1):
        name = f"{cell.env.info.label} x {cell.config}"
        done = None if rerun else cell.recorded()
        if done is not None and done.same_run(cell.command.argv, cell.shown_env, cell.load_argv):
            progress(f"[{index}/{len(cells)}] {name}: done earlier ({done.summary}); --rerun repeats it")
            run.results.append(done)
            run.reused.append(name)
            continue
        progress(f"[{index}/{len(cells)}] {name}")
        try:
            result = run_cell(cell, progress, limits)
        except KeyboardInterrupt:
            progress(f"interrupted in {name}: its server is stopped and nothing was recorded for it; "
                     "run the same command again to resume from this cell")
            raise
        write_result(cell.dir, result)
        progress(f"=> {name}: {result.outcome}: {result.summary}"  # a milestone, shown everywhere
                 + (f" (validate expected: {result.expected.because})" if result.surprise and result.expected else ""))
        run.results.append(result)
    return run


def run_cell(cell: Cell, progress: Progress, limits: Limits | None = None) -> CellResult:
    """Launch, wait, load, stop: one cell. An interrupt stops the server and writes nothing."""
    limits = limits or cell.limits
    started = time.time()
    base: dict[str, Any] = dict(env=cell.env.info, config=cell.config, argv=cell.command.argv,
                server_env=cell.shown_env, load_argv=cell.load_argv, started=started,
                load_params=dict(cell.load_params), order=cell.order, expected=cell.expected)
    if cell.blocked:
        errors = tuple(p for p in cell.problems if p.fatal)
        first = errors[0]
        return CellResult(**base, outcome="skipped", summary=f"not launched: {first.id}: {first.message}; fix: {first.fix}",
                          findings=errors, finished=time.time())
    for problem in cell.problems:
        progress(f"  {problem.severity}: {problem.id}: {problem.message}")
    if cell.expected.state != "runs":
        progress(f"  expected: {cell.expected.because}")
    with open_target(cell.env.url) as backend:
        checks = host_checks(backend, cell)
        for check in checks:
            progress(f"  {check.severity}: {check.id}: {check.message}; fix: {check.fix}")
        blocking = [c for c in checks if c.fatal]
        if blocking:
            return CellResult(**base, outcome="skipped", findings=tuple(checks), finished=time.time(),
                              summary=f"not launched: {blocking[0].id}: {blocking[0].message}; fix: {blocking[0].fix}")
        _fresh(cell.dir)
        log = cell.dir / "server.log"
        gpu = gpu_names(backend)
        with RunningServer(backend, cell.command, log, limits, progress, redact=cell.redact.text) as server:
            launch = server.wait_ready()
            progress(f"  server {launch.status} after {launch.seconds:.1f} s ({launch.reason})")
            load = outcome_text = None
            version, double = server_identity(cell.command.base_url) if launch.status == "ready" else (None, False)
            served = ServedBy(version, double, gpu, socket.gethostname())
            runs: tuple[LoadResult, ...] = ()
            if launch.status == "ready":
                progress(f"  served by {served.label}")
                load, outcome_text, runs = _run_loads(backend, cell, progress)
    findings = tuple(triage_file(log))  # the whole log, after stop
    without = ran_without(findings, cell.command.argv)
    outcome, summary = _outcome(launch, load, outcome_text, findings)
    spread = relative_spread(runs, load) if outcome == "ok" else None
    if spread is not None:
        summary += (f" (median of {len(runs)} runs{' after a warm-up' if cell.warmup else ''}, "
                    f"spread {spread:.1%})")
    if without and outcome == "ok":
        summary += "; RAN WITHOUT " + ", ".join(without) + " (the server turned it off: see findings)"
    if server.leftovers:
        summary += f" (WARNING: still running after stop: {', '.join(server.leftovers)})"
    tail: tuple[str, ...] = ()
    if outcome != "ok":  # the evidence: where the log is and what it said last
        tail = tuple(cell.redact.text(line) for line in log_tail(log))
        progress(f"  {outcome}: see {log}" + ("; its last lines:" if tail else " (empty)"))
        for line in tail:
            progress(f"    | {line}")
    return CellResult(**base, outcome=outcome, summary=summary, startup_s=launch.seconds, load=load,
                      findings=findings, server_log=log.name, finished=time.time(), served_by=served,
                      verdict_after_line_s=launch.detected_after_s, ran_without=without, log_tail=tail,
                      runs=runs, warmup=cell.warmup and bool(runs))


def host_checks(backend, cell: Cell) -> list[Finding]:
    """The pre-launch checks of the environment (envmgr.bench.preflight): port, fabric,
    /dev/shm, cache disks."""
    facts = preflight.gather(backend, cell.command.argv[0], cell.command.env)
    busy = preflight.port_taken(cell.command.client_host, cell.command.port)
    return preflight.host_findings(facts, cell.gpus, cell.command.port, busy, (cell.config,))


def ran_without(findings, argv) -> tuple[str, ...]:
    """The features this command asked for that the server's log says it turned off."""
    signatures = load_signatures().by_id()
    out: list[str] = []
    for f in findings:
        off = signatures[f.id].feature_off if f.id in signatures else None
        if off is not None and off.asked(argv) and off.feature not in out:
            out.append(off.feature)
    return tuple(out)


def server_identity(base_url: str) -> tuple[str | None, bool]:
    """The version a ready server reports (/server_info; /get_server_info before 0.5.10), and
    whether it says it is envmgr's test double. (None, False) when it does not answer."""
    for path in ("/server_info", "/get_server_info"):
        try:
            with urllib.request.urlopen(base_url + path, timeout=10) as response:  # noqa: S310 - our server
                info = json.loads(response.read(4 << 20))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict):
            version = info.get("version")
            return (str(version) if version is not None else None), bool(info.get("envmgr_test_double"))
    return None, False


def gpu_names(backend) -> str | None:
    """The GPUs nvidia-smi lists in the environment ("NVIDIA H200", "8 x NVIDIA RTX PRO 6000 ...")."""
    try:
        result = backend.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], timeout=30)
    except BackendError:
        return None
    names = [n.strip() for n in result.stdout.splitlines() if n.strip()] if result.ok else []
    if not names:
        return None
    kinds = sorted(set(names))
    return ", ".join(f"{names.count(k)} x {k}" if names.count(k) > 1 else k for k in kinds)


def _run_loads(backend, cell: Cell, progress: Progress) -> tuple[LoadResult | None, str, tuple[LoadResult, ...]]:
    """The warm-up run (not counted), then ``repeats`` measured runs: (the median run, why it
    failed, every measured run). A failed run ends the cell: its numbers would mislead."""
    names = (["warmup"] if cell.warmup else []) + [f"run {i}" for i in range(1, cell.repeats + 1)]
    runs: list[LoadResult] = []
    for name in names:
        counted = name != "warmup"
        label = f"{name}/{cell.repeats}" if counted else "warm-up (not counted)"
        load, error = _run_load(backend, cell, progress, label, cell.dir / f"load-{name.replace(' ', '')}.log")
        if load is None:
            return None, f"{label}: {error}", tuple(runs)
        if counted:
            runs.append(load)
        progress(f"  {label}: {load.output_throughput:.1f} tok/s output")
    ranked = sorted(runs, key=lambda r: r.output_throughput)
    return ranked[(len(ranked) - 1) // 2], "", tuple(runs)  # the lower median: a run that happened


def _run_load(backend, cell: Cell, progress: Progress, label: str, log: Path) -> tuple[LoadResult | None, str]:
    timeout_s = cell.load_timeout_s
    progress(f"  load {label}: {cell.load_summary} (limit {timeout_s:g} s)")
    with _ticker(progress, "  load running"):
        result = backend.run(list(cell.load_argv), timeout=timeout_s, env=dict(cell.command.env))
    log.write_text(result.stdout + ("\n" + result.stderr if result.stderr else ""), encoding="utf-8")
    if not result.ok:
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        return None, f"bench_serving exited {result.returncode}: {tail}"
    try:
        return parse_output(result.stdout), ""
    except LoadParseError as exc:
        return None, str(exc)


def _outcome(launch: Launch, load: LoadResult | None, load_error: str | None,
             findings: tuple[Finding, ...]) -> tuple[CellOutcome, str]:
    root = root_cause(findings)
    if launch.status != "ready":
        if root:
            return launch.status, f"{root.id}: {root.fix}"
        evidence = "" if "last line:" in launch.reason else f"; last log line: {launch.last_line}"
        return launch.status, f"{launch.reason}{evidence} (see server.log)"
    if load is None:
        cause = f"{root.id}: {root.fix}" if root else (load_error or "no result")
        return "load_failed", cause
    return "ok", (f"{load.output_throughput:.1f} tok/s output, TTFT median {load.median_ttft_ms:.0f} ms, "
                  f"TPOT median {load.median_tpot_ms:.1f} ms")


def _fresh(cell_dir: Path) -> None:
    """A cell starts clean: an interrupted run's logs would mix with this one's."""
    cell_dir.mkdir(parents=True, exist_ok=True)
    for name in ("server.log", "load.log", "result.json"):
        (cell_dir / name).unlink(missing_ok=True)
    for old in cell_dir.glob("load-*.log"):
        old.unlink()


class _ticker:
    """Print a line every LOAD_TICK_S while a blocking call runs (the load prints nothing)."""

    def __init__(self, progress: Progress, what: str, every_s: float = LOAD_TICK_S) -> None:
        self.progress, self.what, self.every_s = progress, what, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def _tick(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.every_s):
            self.progress(f"{self.what}: {time.monotonic() - started:.0f} s")

    def __enter__(self) -> None:
        self._thread.start()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# --- entry point --------------------------------------------------------------------------


def prepare(spec_path: Path, configs: Sequence[str], env_names: Sequence[str],
            home: Path | None) -> list[Cell]:
    """Load the bench spec, resolve the environments, plan and check every cell."""
    from envmgr.spec import load_spec

    bench_spec = load_spec(spec_path).spec
    envs = resolve_envs(env_names, bench_spec, home)
    return plan_cells(bench_spec, envs, configs, env_python, env_modules)


def env_python(env: Env) -> str:
    with open_target(env.url) as target:
        return target.interpreter


# find_spec finds a module without importing it (importing DeepEP would initialise CUDA).
_FIND_MODULES = ("import importlib.util, json, sys\n"
                 "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is not None]))")


def env_modules(env: Env, python: str, modules: Sequence[str]) -> frozenset[str] | None:
    """Which of ``modules`` the environment's interpreter can import; None when it cannot say."""
    if not modules:
        return frozenset()
    try:
        with open_target(env.url) as backend:
            result = backend.run([python, "-c", _FIND_MODULES, *modules], timeout=60)
    except BackendError:
        return None  # no interpreter there (yet): the spec's package list decides
    if not result.ok:
        return None
    try:
        found = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return frozenset(m for m in found if isinstance(m, str))
