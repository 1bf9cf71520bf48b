"""The probes a rollout runs on every host (the envmgr_probe role): the batch assembled on the
controller, and each host's results read back from the run's events or from its record."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envmgr.ansible.events import RunReport, task_name

if TYPE_CHECKING:
    from envmgr.probes.runner import ProbeResult
    from envmgr.spec.models import Spec

PROBE_TASK = "envmgr_probe : probe | run the probes with the environment's interpreter"
PROBE_RECORD_TASK = "envmgr_probe : probe | results recorded for this environment"
PROBE_DRIVER_FILE = "run_probes.py"  # envmgr/probes/driver.py, in the role's scripts_src
PROBE_BATCH_FILE = "probes.json"  # the driver's stdin


def prepare_probes(spec: Spec, where: Path) -> dict[str, Any]:
    """The default probes, assembled as the runner sends them (``<id>.py``), and the batch
    the role sends on every host in one round trip: envmgr's probe driver runs each as
    ``python -c SOURCE ARGS`` with the new environment's interpreter (no envmgr there),
    with the runner's timeout and environment. ``digest`` covers driver and batch."""
    from importlib import resources

    from envmgr.probes.args import probe_args, probe_env
    from envmgr.probes.runner import PROBE_ENV, PROBES, script_source, select

    where.mkdir(parents=True, exist_ok=True)
    ids = select(None)
    spec_args = probe_args(spec)
    args = {p: spec_args.get(p, {}) for p in ids}
    probes = []
    for probe_id in ids:
        source = script_source(probe_id)
        (where / f"{probe_id}.py").write_text(source, encoding="utf-8")
        probes.append({"id": probe_id, "source": source, "args": args[probe_id],
                       "timeout_s": PROBES[probe_id].timeout_s})
    batch = json.dumps({"env": {**PROBE_ENV, **probe_env(spec)}, "probes": probes}, sort_keys=True)
    driver = resources.files("envmgr.probes").joinpath("driver.py").read_text(encoding="utf-8")
    (where / PROBE_BATCH_FILE).write_text(batch, encoding="utf-8")
    (where / PROBE_DRIVER_FILE).write_text(driver, encoding="utf-8")
    digest = hashlib.sha256(f"{driver}\0{batch}".encode()).hexdigest()
    return {"scripts_src": str(where), "ids": ids, "args": args, "digest": digest}


def probe_outputs(events: Iterable[Mapping[str, Any]], key: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """``{host: [probe result, ...]}`` from what the envmgr_probe role's probe driver printed,
    or, where the probes did not run, from the host's record of this environment (``key``)."""
    return probe_outputs_and_reused(events, key)[0]


def probe_outputs_and_reused(events: Iterable[Mapping[str, Any]], key: str | None) -> tuple[dict[str, list], list[str]]:
    """The outputs and the hosts whose outputs are their record's (not run in this run)."""
    outputs: dict[str, list[dict[str, Any]]] = {}
    reused: set[str] = set()
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") != "runner_on_ok":
            continue
        host, task = str(data.get("host")), task_name(data)
        res = data.get("res") or {}
        if task == PROBE_TASK:
            outputs[host] = [probe_result(run).to_dict() for run in driver_runs(res)]
            reused.discard(host)
        elif task == PROBE_RECORD_TASK and key:
            runs = recorded_runs(res.get("content"), key)
            if runs is not None:
                outputs[host] = [probe_result(run).to_dict() for run in runs]
                reused.add(host)
    return outputs, sorted(reused)


def driver_runs(res: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The runs the probe driver printed (envmgr/probes/driver.py); when it did not get to
    print them (no interpreter, a crash), one ``error`` run saying why."""
    try:
        runs = json.loads(str(res.get("stdout") or ""))
        if isinstance(runs, list) and all(isinstance(run, dict) for run in runs):
            return runs
    except ValueError:
        pass
    return [{"probe": "probe driver", "rc": res.get("rc"), "stdout": "",
             "stderr": str(res.get("stderr") or res.get("msg") or "")}]


def probe_result(run: Mapping[str, Any]) -> ProbeResult:
    """A driver run -> the runner's ProbeResult (the same words for a timeout as the runner)."""
    from envmgr.probes.runner import ProbeResult, parse_output

    probe = str(run.get("probe"))
    wall = float(run.get("wall_s") or 0.0)
    if run.get("timed_out"):
        limit = float(run.get("timeout_s") or wall)
        return ProbeResult(probe, "error", f"timed out after {limit:g}s; its processes were killed", wall_s=wall)
    rc = run.get("rc")
    result = parse_output(probe, str(run.get("stdout") or ""), str(run.get("stderr") or ""),
                          int(rc) if isinstance(rc, int) else -1)
    result.wall_s = wall
    return result


def recorded_runs(content: object, key: str) -> list[dict[str, Any]] | None:
    """The runs in a host's probe record (slurp's base64), or None when there is none, it
    does not parse, or it is another environment's (another ``key``)."""
    import base64
    import binascii

    if not isinstance(content, str) or not content:
        return None
    try:
        record = json.loads(base64.b64decode(content))
        runs = record["runs"] if record.get("key") == key else None
    except (binascii.Error, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not isinstance(runs, list) or not all(isinstance(run, dict) for run in runs):
        return None
    return runs


def save_probe_outputs(report: RunReport, where: Path) -> list[str]:
    """Each host's probe results as ``<host>.probes.json`` in the generation; the files written."""
    where.mkdir(parents=True, exist_ok=True)
    written = []
    for host, results in report.probe.items():
        path = where / f"{host}.probes.json"
        path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        written.append(str(path))
    return written
