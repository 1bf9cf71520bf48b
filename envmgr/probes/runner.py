"""Run probe scripts inside an environment through its target's ``run``.

Independent probes run in parallel; timing-sensitive GPU probes (``exclusive``) run
after them, one at a time, so a JIT compile does not distort an NCCL latency. Each
probe has a timeout; the target kills the probe's whole process group (or container)
when it passes, and the result says so, while the other probes still complete.
"""

from __future__ import annotations

import json
import re
import tempfile
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

from envmgr.errors import BackendError, CommandTimeout, UsageError
from envmgr.probes.contract import MARKER, STATUSES, WRAPPER
from envmgr.targets import inflight
from envmgr.targets.base import Runner, Target


@dataclass(frozen=True)
class ProbeInfo:
    timeout_s: float
    exclusive: bool  # timing-sensitive on the GPU: takes its turn on the GPU alone
    what: str
    default: bool = True  # part of a plain `envmgr probe`; others run when named (--only)


# The probes, in the order they are reported. Data, not code: add a script and a line.
PROBES: dict[str, ProbeInfo] = {
    "gpu": ProbeInfo(60, False, "NVML inventory: GPUs, capability, memory, driver, topology, P2P"),
    "toolchain_arch": ProbeInfo(120, False, "can nvcc/ptxas build for the target arch"),
    "torch_cuda": ProbeInfo(120, False, "torch's CUDA build covers the GPU and runs a kernel"),
    "flashinfer_jit": ProbeInfo(600, False, "FlashInfer JIT compiles and runs silu_and_mul"),
    "flashinfer_allreduce_fusion": ProbeInfo(300, False, "FlashInfer all-reduce fusion's arch gate"),
    "p2p": ProbeInfo(120, False, "peer access between every pair of GPUs"),
    # functional (allocation, rendezvous, peer reads); its one small timing is informative only
    "symm_mem": ProbeInfo(300, False, "torch symmetric memory: allocation and rendezvous"),
    "nccl_allreduce": ProbeInfo(600, True, "NCCL all-reduce: correctness, latency, CUDA graphs"),
    "nccl_alltoall": ProbeInfo(600, True, "NCCL all-to-all at EP dispatch sizes"),
    "comm_bench": ProbeInfo(300, True, "verify-step comm: 122 TP all-reduces vs EP dispatch+combine, "
                                       "eager and graph", default=False),
}

# What every probe process needs: its result line as soon as it is printed. Site policy (e.g.
# NVLink multicast off on a lent machine) is the spec's `env`, which the session passes on.
PROBE_ENV = {"PYTHONUNBUFFERED": "1"}


@dataclass
class ProbeResult:
    probe: str
    status: str
    summary: str
    details: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    wall_s: float = 0.0  # including interpreter start and imports
    stderr_tail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def script_source(probe_id: str) -> str:
    """What is sent to the interpreter: the probe with its libraries and the wrapper."""
    return assemble(probe_id) + WRAPPER


def assemble(probe_id: str) -> str:
    """A probe script with the shared libraries it names (``# probe-uses: _comm, ...``)
    placed before it, as one module. ``from __future__`` lines move to the top."""
    scripts = resources.files("envmgr.probes.scripts")
    text = scripts.joinpath(f"{probe_id}.py").read_text(encoding="utf-8")
    uses = re.search(r"^# probe-uses: (.+)$", text, re.MULTILINE)
    parts = [scripts.joinpath(f"{lib.strip()}.py").read_text(encoding="utf-8")
             for lib in (uses.group(1).split(",") if uses else [])] + [text]
    future = "from __future__ import annotations\n"
    body = "".join(part.replace(future, "") + "\n" for part in parts)
    return (future if future in "".join(parts) else "") + body


def load_module(probe_id: str) -> types.ModuleType:
    """The assembled probe as a module, for tests of its pure functions."""
    module = types.ModuleType(f"envmgr_probe_{probe_id}")
    exec(compile(assemble(probe_id), f"<probe {probe_id}>", "exec"), module.__dict__)  # noqa: S102 - our own scripts
    return module


def parse_output(probe_id: str, stdout: str, stderr: str, returncode: int) -> ProbeResult:
    """The marked JSON line of a probe run, or an ``error`` saying why there is none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER):])
            except ValueError as exc:
                return ProbeResult(probe_id, "error", f"unreadable result line: {exc}")
            status = data.get("status")
            if status not in STATUSES:
                return ProbeResult(probe_id, "error", f"unknown status {status!r}", data.get("details", {}))
            return ProbeResult(probe_id, status, str(data.get("summary", "")),
                               dict(data.get("details") or {}), float(data.get("duration_s", 0.0)),
                               stderr_tail=_tail(stderr))
    why = f"the probe printed no result (exit {returncode})"
    return ProbeResult(probe_id, "error", f"{why}: {_tail(stderr or stdout, 1)}", stderr_tail=_tail(stderr))


def run_probe(runner: Runner, python: str, probe_id: str, args: dict[str, Any],
              timeout_s: float | None = None, env: dict[str, str] | None = None) -> ProbeResult:
    info = PROBES[probe_id]
    timeout = timeout_s or info.timeout_s
    argv = [python, "-c", script_source(probe_id), json.dumps(args)]
    try:
        result = runner.run(argv, timeout=timeout, env={**PROBE_ENV, **(env or {})})
    except CommandTimeout:
        return ProbeResult(probe_id, "error", f"timed out after {timeout:g}s; its processes were killed",
                           wall_s=timeout)
    except BackendError as exc:
        return ProbeResult(probe_id, "error", f"could not run: {exc.message}")
    parsed = parse_output(probe_id, result.stdout, result.stderr, result.returncode)
    parsed.wall_s = round(result.duration_s, 3)
    return parsed


def select(only: Sequence[str] | None) -> list[str]:
    if not only:
        return [p for p, info in PROBES.items() if info.default]
    unknown = [p for p in only if p not in PROBES]
    if unknown:
        raise UsageError(f"unknown probe(s): {', '.join(unknown)}", hint=f"known: {', '.join(PROBES)}")
    return [p for p in PROBES if p in only]


def run_probes(runner: Target, python: str, ids: Sequence[str], args: dict[str, dict[str, Any]],
               progress: Callable[[str], None] = lambda line: None, parallel: int = 4,
               timeout_s: float | None = None, env: dict[str, str] | None = None) -> list[ProbeResult]:
    """Run ``ids``. Where every probe sees this host's files (local, venv), all start at once
    and the exclusive ones take turns on the GPU through a lock file (ENVMGR_GPU_LOCK), so
    their interpreter start and imports overlap; elsewhere (a container per command) the
    parallel ones run together first, then the exclusive ones one by one."""
    def one(probe_id: str, extra: dict[str, str] | None = None) -> ProbeResult:
        progress(f"probe {probe_id}: running")
        result = run_probe(runner, python, probe_id, args.get(probe_id, {}), timeout_s, {**(env or {}), **(extra or {})})
        progress(f"probe {probe_id}: {result.status} ({result.wall_s:.1f}s) {result.summary}")
        return result

    free = [p for p in ids if not PROBES[p].exclusive]
    alone = [p for p in ids if PROBES[p].exclusive]
    results: dict[str, ProbeResult] = {}
    if alone and runner.runs_here:  # the lock file is visible to every probe
        with tempfile.NamedTemporaryFile(prefix="envmgr-gpu-", suffix=".lock") as lock:
            turn = {"ENVMGR_GPU_LOCK": lock.name}
            with ThreadPoolExecutor(max_workers=len(ids)) as pool, _stopped_on_interrupt():
                futures = [pool.submit(one, p) for p in free] + [pool.submit(one, p, turn) for p in alone]
                for future in futures:
                    result = future.result()
                    results[result.probe] = result
        return [results[p] for p in ids]
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool, _stopped_on_interrupt():
        for result in pool.map(one, free):
            results[result.probe] = result
    for probe_id in alone:
        results[probe_id] = one(probe_id)
    return [results[p] for p in ids]


@contextmanager
def _stopped_on_interrupt() -> Iterator[None]:
    """Ctrl-C or SIGTERM while worker threads wait on probes: kill those probes, so the pool's
    shutdown (which runs right after this) does not wait for each one to finish."""
    try:
        yield
    except BaseException:
        inflight.kill_all()
        raise


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
