"""``ansible://GROUP?inventory=FILE[&apt=online|offline&host_kind=auto|container|host&reboot=1&probe=changed|always]``:
hosts provisioned by Ansible, driven through ansible-runner's Python API.

``realize`` prepares everything on the controller inside the new generation's directory
(``workdir/ansible/``): the Python lock (uv, with hashes), a lock per pip-sourced CUDA
toolkit, the wheels of each lock (downloaded here: the hosts need no index), and the
extravars. It then runs ``playbooks/site.yml`` with ansible-runner in that private data
dir, so the runner's artifacts (events, stdout, status) stay in the generation. Spec values
reach the playbook only as data in one extra variable, ``envmgr`` (see
``playbooks/README.md`` for the contract), never as shell text.

Rolling upgrades: ``serial`` and ``max_fail_percentage`` come from ``realize.ansible``; the
play stops at the threshold and the hosts after the failing batch are not touched. A failed
or unreachable host makes ``realize`` raise ``RolloutFailed`` (a ``BackendError``) whose
``report`` names each host's state, the failing task and its message.

``check`` runs the same playbook in check mode (``--check --diff``) and returns the changes
each host would get, for ``envmgr plan SPEC --backend ansible://...``.

``run(argv)`` runs one command (the ``command`` module, argv form, no shell) on every host
of the group and returns the FIRST host's result (inventory order); ``run_all`` returns
every host's. ``facts()`` are the first host's, collected over the same connection.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envmgr.backends.base import Closing, CommandResult, Progress, Realized, checked_argv
from envmgr.errors import BackendError, CommandNotFound, CommandTimeout, RolloutFailed, UsageError
from envmgr.secrets import Redactor
from envmgr.state import write_atomic
from envmgr.toolkits import toolkit_home_subdir, toolkit_release, toolkit_requirements

if TYPE_CHECKING:
    from envmgr.facts.model import Facts
    from envmgr.plan import Action
    from envmgr.probes.runner import ProbeResult
    from envmgr.spec.load import LoadedSpec
    from envmgr.spec.models import Spec, Toolkit

EXTRAVARS_CONTRACT = 2  # bump when the shape of the `envmgr` extra variable changes (2: probe.digest, .when, .key)
REMOTE_ROOT = "/opt/envmgr"
CURRENT_ENV = f"{REMOTE_ROOT}/current-env"
DATA_DIR = "ansible"  # under the generation's workdir
SITE_PLAYBOOK = "site.yml"
COMMAND_PLAYBOOK = "command.yml"
DIGEST_HEX = 12
COMPLETE_MARKER = ".envmgr-complete"
ENOENT = 2
GROUP_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
HOST_KINDS = ("auto", "container", "host")
PROBE_WHEN = ("changed", "always")
TAIL_CHARS = 400
# What run() puts in a command's environment before the spec's env: the current env's
# bin first (like an activated venv), then the selected toolkit's, then Debian's default.
RUN_ENV = {
    "VIRTUAL_ENV": CURRENT_ENV,
    "PATH": f"{CURRENT_ENV}/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
}
# Settings for every ansible-playbook run: no colour or retry files in logs, pipelining
# (one exec per task instead of put+exec), the interpreter found without a warning.
ANSIBLE_ENV = {
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_FORCE_COLOR": "0",
    "ANSIBLE_RETRY_FILES_ENABLED": "0",
    "ANSIBLE_PIPELINING": "1",
    "ANSIBLE_HOST_KEY_CHECKING": "0",
    "ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
    "ANSIBLE_DEPRECATION_WARNINGS": "0",
    "ANSIBLE_SYSTEM_WARNINGS": "0",
}


def playbook_dir() -> Path:
    """``playbooks/`` of a source checkout, or ``envmgr/playbooks`` where it ships as package data."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[1] / "playbooks", here.parents[2] / "playbooks"):
        if (candidate / SITE_PLAYBOOK).is_file():
            return candidate
    raise BackendError("the envmgr playbooks are missing (playbooks/site.yml)",
                       hint="reinstall envmgr, or run it from a source checkout")


# --- the URL ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnsibleTarget:
    """What an ``ansible://`` URL names. Empty fields fall back to the spec's ``realize.ansible``."""

    group: str = ""
    inventory: str = ""
    apt_online: bool = True  # apt=offline: NVIDIA's repository and the mirror cannot be reached
    host_kind: str = "auto"  # auto: detect containers from the target's virtualization facts
    reboot: bool = True  # reboot a host whose loaded kernel module is not the installed driver
    probe: str = "changed"  # changed: probe an environment once (its record is reused); always: every run


def parse_ansible_url(url: str) -> AnsibleTarget:
    """``ansible://gpu?inventory=hosts.yml&apt=offline`` -> AnsibleTarget."""
    from envmgr.backends.urls import split_url

    scheme, group, params = split_url(url)
    if scheme != "ansible":
        raise UsageError(f"not an ansible:// URL: {url!r}")
    unknown = sorted(set(params) - {"inventory", "apt", "host_kind", "reboot", "probe"})
    if unknown:
        raise UsageError(f"{url}: unknown parameter(s) {unknown}",
                         hint="ansible:// takes inventory=, apt=online|offline, host_kind=auto|container|host, "
                              "reboot=0|1, probe=changed|always")
    if group and not GROUP_RE.fullmatch(group):
        raise UsageError(f"{url}: {group!r} is not an inventory group name",
                         hint="letters, digits, '_', '-', '.'; like gpu_hosts or all")
    apt = params.get("apt", "online")
    if apt not in ("online", "offline"):
        raise UsageError(f"{url}: apt={apt!r}", hint="use apt=online or apt=offline")
    host_kind = params.get("host_kind", "auto")
    if host_kind not in HOST_KINDS:
        raise UsageError(f"{url}: host_kind={host_kind!r}", hint=f"use one of {', '.join(HOST_KINDS)}")
    reboot = params.get("reboot", "1")
    if reboot not in ("0", "1"):
        raise UsageError(f"{url}: reboot={reboot!r}", hint="use reboot=1 or reboot=0")
    probe = params.get("probe", "changed")
    if probe not in PROBE_WHEN:
        raise UsageError(f"{url}: probe={probe!r}",
                         hint="use probe=changed (probe a new environment once) or probe=always (on every run)")
    return AnsibleTarget(group, params.get("inventory", ""), apt == "online", host_kind, reboot == "1", probe)


# --- extravars (pure) ---------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedLock:
    """A lock on the controller and the wheels it names, ready to copy to the hosts."""

    id: str  # <name>-<digest>: names the host's wheelhouse, lock and install directory
    digest: str
    lock_file: Path
    wheels_dir: Path


def lock_digest(lock_text: str, python_version: str) -> str:
    return hashlib.sha256(f"envmgr-lock/1\0{python_version}\0{lock_text}".encode()).hexdigest()


def toolkit_link(toolkit: Toolkit) -> str:
    major, minor = toolkit_release(toolkit.version)
    return toolkit.prefix or f"/usr/local/cuda-{major}.{minor}"


def driver_choice(spec: Spec, reboot: bool) -> dict[str, Any] | None:
    """The driver branch and the apt version pattern that pins it, from ``driver.version``.

    ``==580.95.05`` pins that exact version (``580.95.05-*``); a range like ``>=580,<581``
    pins its lowest branch (``580.*``)."""
    from packaging.specifiers import SpecifierSet

    if spec.driver is None:
        return None
    specifiers = list(SpecifierSet(spec.driver.version))
    exact = [s.version for s in specifiers if s.operator in ("==", "===") and "*" not in s.version]
    lower = [s.version for s in specifiers if s.operator in (">=", "~=", "==")]
    if exact:
        version = exact[0]
        branch, apt_version = version.split(".")[0], f"{version}-*"
    elif lower:
        branch = lower[0].split(".")[0]
        apt_version = f"{branch}.*"
    else:
        raise UsageError(f"driver.version {spec.driver.version!r} names no driver branch",
                         hint="write an exact version ('580.95.05') or a range with a lower bound ('>=580,<581')")
    if not branch.isdigit():
        raise UsageError(f"driver.version {spec.driver.version!r}: {branch!r} is not a driver branch")
    return {"requested": spec.driver.version, "branch": branch, "apt_version": apt_version,
            "forward_compat": spec.driver.forward_compat, "kernel_modules": spec.driver.kernel_modules,
            "reboot": reboot}


def toolkit_vars(spec: Spec, toolkit_locks: Mapping[str, PreparedLock]) -> list[dict[str, Any]]:
    if spec.cuda is None:
        return []
    selected = spec.cuda.selected.version
    toolkits = []
    for toolkit in spec.cuda.toolkits:
        major, minor = toolkit_release(toolkit.version)
        entry: dict[str, Any] = {
            "version": toolkit.version, "release": f"{major}.{minor}", "source": toolkit.source,
            "link": toolkit_link(toolkit), "priority": major * 100 + minor,
            "selected": toolkit.version == selected,
            "apt_package": f"cuda-toolkit-{major}-{minor}",
        }
        prepared = toolkit_locks.get(toolkit.version)
        if prepared is not None:
            entry.update(id=prepared.id, lock_digest=prepared.digest, lock_src=str(prepared.lock_file),
                         wheels_src=str(prepared.wheels_dir), dir=f"{REMOTE_ROOT}/toolkits/{prepared.id}",
                         home_subdir=toolkit_home_subdir(toolkit.version))
        toolkits.append(entry)
    return toolkits


def render_extravars(spec: Spec, spec_digest: str, target: AnsibleTarget, group: str,
                     python_lock: PreparedLock, toolkit_locks: Mapping[str, PreparedLock],
                     probes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The one extra variable the playbooks read (plain data; contract in playbooks/README.md)."""
    options = spec.realize.ansible
    extravars = {
        "envmgr_group": group,
        "envmgr": {
            "contract": EXTRAVARS_CONTRACT,
            "spec": {"name": spec.metadata.name, "digest": spec_digest},
            "root": REMOTE_ROOT,
            "apt_online": target.apt_online,
            "host_kind": target.host_kind,
            "rollout": {"serial": options.serial, "max_fail_percentage": options.max_fail_percentage},
            "driver": driver_choice(spec, target.reboot),
            "toolkits": toolkit_vars(spec, toolkit_locks),
            "python": {
                "version": spec.python.version, "env_id": python_lock.id,
                "dir": f"{REMOTE_ROOT}/envs/{python_lock.id}", "lock_digest": python_lock.digest,
                "lock_src": str(python_lock.lock_file), "wheels_src": str(python_lock.wheels_dir),
            },
            "env": {name: _env_text(value) for name, value in spec.env.items()},
            "probe": {**(probes or {"scripts_src": "", "ids": [], "args": {}, "digest": ""}), "when": target.probe},
        },
    }
    extravars["envmgr"]["probe"]["key"] = probe_key(extravars["envmgr"])
    return extravars


def unsafe(value: Any) -> Any:
    """Plain data with every string marked as Ansible's never-template data
    (``{"__ansible_unsafe": ...}``, which ansible-core's JSON loader reads for extra-vars files
    in every release): a spec's ``{{ lookup('pipe', ...) }}`` is then just text, in a real
    run and in check mode alike, and a ``{{`` in a probe's source is not a template error."""
    if isinstance(value, str):
        return {"__ansible_unsafe": value}
    if isinstance(value, Mapping):
        return {k: unsafe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [unsafe(v) for v in value]
    return value


def write_extravars(data: Path, extravars: Mapping[str, Any]) -> Path:
    """The extra variables as the file ansible-runner passes with ``-e @file``: all strings
    unsafe, mode 0600 (it holds the spec's secrets), so nothing is on a command line."""
    path = data / "env" / "extravars"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(unsafe(extravars)), mode=0o600)
    return path


def probe_key(envmgr: Mapping[str, Any]) -> str:
    """The digest of what the probes' results depend on: the Python lock and its venv, the
    toolkits (locks, prefixes, the selected one), the driver choice, the spec's env, and the
    probe sources and arguments. Controller paths (``*_src``, different for every generation)
    and how the rollout runs (reboot, serial, apt) are left out: a re-provision of the same
    environment has the same key, and the host's record of it is reused (envmgr_probe role)."""
    def data(entry: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in entry.items() if not k.endswith("_src")}

    probe = envmgr["probe"]
    driver = envmgr["driver"]
    basis = {
        "python": data(envmgr["python"]),
        "toolkits": [data(t) for t in envmgr["toolkits"]],
        "driver": {k: v for k, v in driver.items() if k != "reboot"} if driver else None,
        "env": envmgr["env"],
        "probe": {"ids": probe.get("ids", []), "args": probe.get("args", {}), "digest": probe.get("digest", "")},
    }
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()


def _env_text(value: object) -> str:
    return str(value)  # as the planner, the venv and the image builder write it


# --- runner events -> per-host results (pure) ---------------------------------------------


@dataclass
class HostResult:
    """One host's part in a run: counts from the final stats, what changed, where it failed."""

    host: str
    state: str = "not run"  # ok | changed | failed | unreachable | not run
    ok: int = 0
    changed: int = 0
    failures: int = 0
    unreachable: int = 0
    skipped: int = 0
    changed_tasks: list[str] = field(default_factory=list)
    failed_task: str | None = None
    message: str | None = None
    skip_reasons: list[str] = field(default_factory=list)  # debug lines that say what was skipped
    diffs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunReport:
    """What one ansible-playbook run did on each host of the group (inventory order)."""

    status: str  # ansible-runner's: successful | failed | timeout | canceled
    rc: int
    hosts: dict[str, HostResult]
    artifacts: str = ""
    probe: dict[str, list] = field(default_factory=dict)  # host -> its probe results
    probe_reused: list[str] = field(default_factory=list)  # hosts whose results are their record's

    @property
    def failed_hosts(self) -> list[HostResult]:
        return [h for h in self.hosts.values() if h.state in ("failed", "unreachable")]

    @property
    def changed_hosts(self) -> list[HostResult]:
        return [h for h in self.hosts.values() if h.changed_tasks or h.changed]

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "rc": self.rc, "artifacts": self.artifacts,
                "hosts": {name: h.to_dict() for name, h in self.hosts.items()},
                "probe": sorted(self.probe),  # hosts whose probe results are in ansible/probe/
                "probe_reused": sorted(self.probe_reused)}  # ... read from the host's record, not run

    def changes_text(self) -> str:
        """For ``envmgr plan --backend ansible://``: each host and the tasks that would change."""
        lines = []
        for h in self.hosts.values():
            lines.append(f"{h.host}: {len(h.changed_tasks)} change(s)" if h.changed_tasks else f"{h.host}: no changes")
            lines += [f"  ~ {task}" for task in h.changed_tasks]
        return "\n".join(lines)

    def summary(self) -> str:
        """One line per host: ``h1: changed (ok=12 changed=5 failed=0 unreachable=0)``."""
        lines = []
        for h in self.hosts.values():
            line = (f"{h.host}: {h.state} (ok={h.ok} changed={h.changed} failed={h.failures} "
                    f"unreachable={h.unreachable} skipped={h.skipped})")
            if h.failed_task:
                line += f" at task {h.failed_task!r}: {h.message}"
            lines.append(line)
        return "\n".join(lines)


RESULT_EVENTS = {
    "runner_on_ok": "ok", "runner_on_failed": "failed", "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
}


def task_name(event_data: Mapping[str, Any]) -> str:
    """``python_env : python | create the venv`` (role, then the task's own name)."""
    name = str(event_data.get("task") or event_data.get("task_action") or "?")
    role = event_data.get("role")
    return f"{role} : {name}" if role and not name.startswith(f"{role} :") else name


def result_message(res: Mapping[str, Any]) -> str:
    """The most telling text of a failed result: msg, then stderr's tail, then stdout's."""
    parts = []
    msg = res.get("msg")
    if msg:
        parts.append(str(msg).strip())
    stderr = str(res.get("stderr") or "").strip()
    if stderr:
        parts.append(stderr[-TAIL_CHARS:])
    elif not parts:
        stdout = str(res.get("stdout") or "").strip()
        if stdout:
            parts.append(stdout[-TAIL_CHARS:])
    failed_items = [r for r in res.get("results") or () if isinstance(r, Mapping) and r.get("failed")]
    if failed_items and not stderr:
        parts.append(result_message(failed_items[0]))
    return ": ".join(p for p in parts if p) or "failed (no message)"


def progress_line(event: Mapping[str, Any]) -> str | None:
    """One line for a task start or a host result; None for every other event."""
    kind = event.get("event")
    data = event.get("event_data") or {}
    if kind == "playbook_on_task_start":
        return f"TASK {task_name(data)}"
    if kind == "playbook_on_play_start":
        return f"PLAY {data.get('play') or data.get('name') or ''}".rstrip()
    outcome = RESULT_EVENTS.get(str(kind))
    if outcome is None:
        return None
    host = data.get("host", "?")
    res = data.get("res") or {}
    if outcome == "failed" and data.get("ignore_errors"):
        return f"  {host}: failed (ignored)"
    if outcome in ("failed", "unreachable"):
        return f"  {host}: {outcome.upper()}: {result_message(res)}"
    if outcome == "ok" and res.get("changed"):
        outcome = "changed"
    text = f"  {host}: {outcome}"
    lines = _debug_lines(res)
    return text + (": " + " | ".join(lines) if lines else "")


def _debug_lines(res: Mapping[str, Any]) -> list[str]:
    """The messages of a debug task (a skipped step's reason); loops give one per item."""
    if "msg" in res and res.get("_ansible_verbose_always"):
        return [str(res["msg"])]
    return [str(item["msg"]) for item in res.get("results") or ()
            if isinstance(item, Mapping) and item.get("_ansible_verbose_always") and "msg" in item]


def host_results(events: Iterable[Mapping[str, Any]], hosts: Sequence[str]) -> dict[str, HostResult]:
    """Per-host results from a run's events; hosts never reached stay ``not run``."""
    results = {host: HostResult(host) for host in hosts}
    for event in events:
        kind = event.get("event")
        data = event.get("event_data") or {}
        if kind == "playbook_on_stats":
            _apply_stats(results, data)
            continue
        outcome = RESULT_EVENTS.get(str(kind))
        if outcome is None:
            continue
        host = str(data.get("host", "?"))
        result = results.setdefault(host, HostResult(host))
        res = data.get("res") or {}
        task = task_name(data)
        if outcome in ("failed", "unreachable") and not data.get("ignore_errors"):
            result.failed_task = task
            result.message = result_message(res)
            result.state = outcome
        elif outcome == "ok" and res.get("changed"):
            result.changed_tasks.append(task)
            result.diffs += _diffs(task, res)
        elif outcome == "ok":
            result.skip_reasons += [line for line in _debug_lines(res) if line.startswith("skipped")]
    for result in results.values():
        if result.state == "not run" and (result.ok or result.changed or result.skipped):
            result.state = "changed" if result.changed else "ok"
    return results


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

    from envmgr.probes.runner import PROBE_ENV, PROBES, script_source, select
    from envmgr.probes.args import probe_args, probe_env

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
    return _probe_outputs(events, key)[0]


def _probe_outputs(events: Iterable[Mapping[str, Any]], key: str | None) -> tuple[dict[str, list], list[str]]:
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


def _apply_stats(results: dict[str, HostResult], stats: Mapping[str, Any]) -> None:
    for key, attribute in (("ok", "ok"), ("changed", "changed"), ("failures", "failures"),
                           ("dark", "unreachable"), ("skipped", "skipped")):
        for host, count in (stats.get(key) or {}).items():
            result = results.setdefault(host, HostResult(host))
            setattr(result, attribute, int(count))
    for result in results.values():
        if result.failures and result.state == "not run":
            result.state = "failed"
        if result.unreachable:
            result.state = "unreachable"


def _diffs(task: str, res: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = res.get("diff")
    items = list(found) if isinstance(found, list) else [found] if found else []
    for item in res.get("results") or ():
        if isinstance(item, Mapping) and item.get("changed") and item.get("diff"):
            more = item["diff"]
            items += more if isinstance(more, list) else [more]
    return [{"task": task, **{k: v for k, v in d.items() if k in ("before_header", "after_header", "before", "after")}}
            for d in items if isinstance(d, Mapping)]


def rollout_failed(report: RunReport) -> RolloutFailed:
    """The error for a rollout a host failed: where it stopped, every host's result, what to do."""
    failed = report.failed_hosts
    first = failed[0] if failed else None
    where = f"{first.host} at task {first.failed_task!r}: {first.message}" if first else report.status
    not_run = [h.host for h in report.hosts.values() if h.state == "not run"]
    text = f"the rollout stopped: {where}\n" + report.summary()
    if not_run:
        text += f"\nnot touched: {', '.join(not_run)}"
    return RolloutFailed(text, report, hint=f"fix {first.host if first else 'the failing host'} and re-run: hosts "
                                            "already provisioned are left as they are (nothing changes there)")


# --- the backend --------------------------------------------------------------------------


class AnsibleBackend(Closing):
    """Provisions a group of hosts from a spec with ansible-runner; runs commands there."""

    def __init__(self, url: str) -> None:
        self.target = parse_ansible_url(url)
        self._env: dict[str, str] = {}  # the spec's env, known after realize (for run)
        self._where: tuple[Path, str] | None = None  # inventory and group, once resolved
        self._hosts: dict[tuple[Path, str], list[str]] = {}

    @property
    def url(self) -> str:
        """This backend's URL with the inventory made absolute: it reopens the same hosts."""
        inventory, group = self._where or (self.target.inventory, self.target.group or "all")
        params = [f"inventory={inventory}"]
        if not self.target.apt_online:
            params.append("apt=offline")
        if self.target.host_kind != "auto":
            params.append(f"host_kind={self.target.host_kind}")
        if not self.target.reboot:
            params.append("reboot=0")
        if self.target.probe != "changed":
            params.append(f"probe={self.target.probe}")
        return f"ansible://{group}?{'&'.join(params)}"

    # --- provisioning -------------------------------------------------------------------

    def realize(self, loaded: LoadedSpec, actions: Sequence[Action], progress: Progress,
                workdir: Path) -> Realized:
        """Provision every host of the group (``actions`` are not needed: the roles converge)."""
        data = workdir / DATA_DIR
        extravars, lock = self._prepare(loaded, data, progress)
        report = self._run_site(data, extravars, progress, check=False)
        (data / "report.json").write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
        save_probe_outputs(report, data / "probe")
        if report.failed_hosts or report.rc != 0:
            raise rollout_failed(report)
        python = extravars["envmgr"]["python"]
        self._env = dict(extravars["envmgr"]["env"])
        progress(report.summary())
        return Realized(backend=self.url, location=python["dir"], lock=lock,
                        details={"env_id": python["env_id"], "env_dir": python["dir"],
                                 "current_env": CURRENT_ENV, **report.to_dict()})

    def check(self, loaded: LoadedSpec, progress: Progress, workdir: Path | None = None) -> RunReport:
        """Check mode (``--check --diff``): what each host would change; nothing changes.
        Raises ``RolloutFailed`` when a host fails or cannot be reached even in check mode."""
        with _scratch(workdir) as where:
            data = where / DATA_DIR
            extravars, _ = self._prepare(loaded, data, progress)
            report = self._run_site(data, extravars, progress, check=True)
        if report.failed_hosts or report.rc != 0:
            raise rollout_failed(report)
        return report

    def _prepare(self, loaded: LoadedSpec, data: Path, progress: Progress) -> tuple[dict[str, Any], str]:
        spec = loaded.spec
        inventory, group = self._resolve(loaded)  # before any download: a wrong URL fails fast
        files = data / "files"
        python_lock, lock = prepare_python_lock(spec, files, progress)
        toolkit_locks = prepare_toolkit_locks(spec, files, progress)
        probes = prepare_probes(spec, files / "probes")
        extravars = render_extravars(spec, loaded.digest, self.target, group, python_lock, toolkit_locks,
                                     probes)
        # for people reading the generation: secrets redacted (the run's own copy is 0600)
        (data / "extravars.json").write_text(
            json.dumps(Redactor.for_spec(spec).data(extravars), indent=2), encoding="utf-8")
        return extravars, lock

    def _run_site(self, data: Path, extravars: dict[str, Any], progress: Progress, *,
                  check: bool) -> RunReport:
        inventory, group = self._resolve(None)
        hosts = self.hosts()
        rollout = extravars["envmgr"]["rollout"]
        progress(f"{'check mode' if check else 'provisioning'}: {len(hosts)} host(s) of {group} "
                 f"({', '.join(hosts)}), serial {rollout['serial']}, "
                 f"max_fail_percentage {rollout['max_fail_percentage']}")
        return run_playbook(data, SITE_PLAYBOOK, inventory, extravars, hosts, progress,
                            ident="check" if check else "apply", check=check)

    # --- running commands ---------------------------------------------------------------

    def run(self, argv: Sequence[str], timeout: float = 60.0,
            env: Mapping[str, str] | None = None) -> CommandResult:
        """The first host's result (inventory order); every host of the group runs it."""
        results = self.run_all(argv, timeout=timeout, env=env)
        return next(iter(results.values()))

    def run_all(self, argv: Sequence[str], timeout: float = 60.0,
                env: Mapping[str, str] | None = None) -> dict[str, CommandResult]:
        """``{host: CommandResult}`` for every host of the group, in inventory order.

        The command sees the current env first on PATH (then /usr/local/cuda/bin), the
        spec's env when this backend realized it, and ``env`` over both."""
        args = checked_argv(argv)
        inventory, group = self._resolve(None)
        hosts = self.hosts()
        extravars = {"envmgr_group": group, "envmgr_argv": args, "envmgr_root": REMOTE_ROOT,
                     "envmgr_env": {**RUN_ENV, **self._env, **dict(env or {})},
                     "envmgr_timeout": max(1, int(timeout))}
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="envmgr-ansible-run-") as scratch:
            events: list[dict[str, Any]] = []
            runner = _run_runner(Path(scratch), COMMAND_PLAYBOOK, inventory, extravars,
                                 events.append, ident="run", check=False)
        elapsed = time.monotonic() - started
        return command_results(events, hosts, args, elapsed, runner_status=runner.status)

    def facts(self) -> Facts:
        from envmgr.facts.collect import collect_facts  # facts imports backends: avoid a cycle

        return collect_facts(self, python=f"{CURRENT_ENV}/bin/python")

    def close(self) -> None:
        pass

    # --- inventory ----------------------------------------------------------------------

    def _resolve(self, loaded: LoadedSpec | None) -> tuple[Path, str]:
        """Inventory and group: the URL's, else the spec's ``realize.ansible`` (an inventory
        there is relative to the spec file). Remembered for run() and the URL."""
        if self._where is not None and loaded is None:
            return self._where
        options = loaded.spec.realize.ansible if loaded is not None else None
        group = self.target.group or (options.group if options else "") or "all"
        if not GROUP_RE.fullmatch(group):
            raise UsageError(f"{group!r} is not an inventory group name",
                             hint="letters, digits, '_', '-', '.'; like gpu_hosts or all")
        if self.target.inventory:
            path = Path(self.target.inventory).expanduser()
        elif options is not None and options.inventory:
            path = loaded.path.parent / Path(options.inventory).expanduser()
        else:
            raise UsageError("no inventory for the ansible backend",
                             hint="add ?inventory=FILE to the ansible:// URL, or set realize.ansible.inventory")
        path = path.resolve()
        if not path.exists():
            raise UsageError(f"inventory {path} does not exist")
        self._where = (path, group)
        return self._where

    def hosts(self) -> list[str]:
        """The group's hosts in inventory order (ansible's own inventory parser, in process)."""
        where = self._resolve(None)
        # collect_facts runs commands from several threads, and ansible's plugin loader is not
        # thread-safe (a half-loaded inventory plugin): parse once, under a lock.
        with _INVENTORY_LOCK:
            if where not in self._hosts:
                self._hosts[where] = inventory_hosts(*where)
        return self._hosts[where]


_INVENTORY_LOCK = threading.Lock()


def inventory_hosts(inventory: Path, group: str) -> list[str]:
    try:
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
    except ImportError as exc:
        raise BackendError("ansible-core is not installed", hint="pip install ansible") from exc
    try:
        manager = InventoryManager(loader=DataLoader(), sources=[str(inventory)])
        hosts = [host.name for host in manager.get_hosts(pattern=group)]
    except Exception as exc:  # ansible raises its own error types for unreadable inventories
        raise BackendError(f"cannot read inventory {inventory}: {exc}") from exc
    if not hosts:
        raise BackendError(f"group {group!r} has no hosts in {inventory}",
                           hint="check the group name and the inventory")
    return hosts


# --- preparing inputs on the controller ---------------------------------------------------


def prepare_python_lock(spec: Spec, files: Path, progress: Progress) -> tuple[PreparedLock, str]:
    """Resolve the spec's packages (uv, hashes) and download their wheels for the hosts."""
    from envmgr.backends.docker import image_lock
    from envmgr.lock import resolve

    progress(f"resolving {len(spec.python.packages)} package pins for Python {spec.python.version}")
    lock = resolve(spec, files / "python", spec.python.version, _prefixed(progress, "uv"))
    prepared = _prepare_lock(spec, files / "python", spec.metadata.name, image_lock(lock), progress)
    return prepared, lock


def prepare_toolkit_locks(spec: Spec, files: Path, progress: Progress) -> dict[str, PreparedLock]:
    """A lock and wheels for each toolkit with ``source: pip`` (held to its X.Y series)."""
    from envmgr.backends.docker import image_lock
    from envmgr.lock import resolve

    prepared = {}
    for toolkit in spec.cuda.toolkits if spec.cuda else ():
        if toolkit.source != "pip":
            continue
        major, minor = toolkit_release(toolkit.version)
        toolkit_spec = spec.model_copy(update={"python": spec.python.model_copy(update={
            "packages": toolkit_requirements(toolkit.version), "torch_cuda": None, "index_url": None})})
        where = files / f"cuda-{major}.{minor}"
        progress(f"resolving the wheels of CUDA {toolkit.version}")
        lock = resolve(toolkit_spec, where, spec.python.version, _prefixed(progress, "uv"))
        prepared[toolkit.version] = _prepare_lock(toolkit_spec, where, f"cuda-{major}.{minor}",
                                                  image_lock(lock), progress)
    return prepared


def _prepare_lock(spec: Spec, where: Path, name: str, lock_text: str, progress: Progress) -> PreparedLock:
    from envmgr.backends.docker import download_wheelhouse

    digest = lock_digest(lock_text, spec.python.version)
    lock_id = f"{name}-{digest[:DIGEST_HEX]}"
    lock_file = where / "lock.clean.txt"
    lock_file.write_text(lock_text, encoding="utf-8")
    # Wheels are kept per lock digest outside the generation: a re-apply of the same lock
    # downloads nothing, and pip checked every file against the lock's hashes when it came.
    wheels = wheel_cache() / lock_id
    if (wheels / COMPLETE_MARKER).is_file():
        progress(f"wheels of {name} already downloaded ({wheels})")
    else:
        progress(f"downloading the wheels of {name} on this host")
        download_wheelhouse(spec, lock_file, wheels, _prefixed(progress, "pip"))
        (wheels / COMPLETE_MARKER).write_text(digest + "\n", encoding="utf-8")
    return PreparedLock(lock_id, digest, lock_file, wheels)


def wheel_cache() -> Path:
    """``$ENVMGR_CACHE`` or ``$XDG_CACHE_HOME/envmgr`` (``~/.cache/envmgr``), then ``wheels/``."""
    root = os.environ.get("ENVMGR_CACHE") or Path(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "envmgr"
    return Path(root) / "wheels"


# --- ansible-runner -----------------------------------------------------------------------


def run_playbook(data: Path, playbook: str, inventory: Path, extravars: Mapping[str, Any],
                 hosts: Sequence[str], progress: Progress, *, ident: str, check: bool) -> RunReport:
    """Run ``playbook`` with progress from its events; per-host results from the same events."""
    events: list[dict[str, Any]] = []

    def on_event(event: dict[str, Any]) -> None:
        events.append(event)
        line = progress_line(event)
        if line:
            progress(line)

    runner = _run_runner(data, playbook, inventory, extravars, on_event, ident=ident, check=check)
    artifacts = str(data / "artifacts" / ident)
    probe, reused = _probe_outputs(events, ((extravars.get("envmgr") or {}).get("probe") or {}).get("key"))
    report = RunReport(status=str(runner.status), rc=int(runner.rc if runner.rc is not None else -1),
                       hosts=host_results(events, hosts), artifacts=artifacts, probe=probe, probe_reused=reused)
    if runner.status not in ("successful", "failed"):
        tail = _stdout_tail(runner)
        raise BackendError(f"ansible-playbook {playbook} ended {runner.status} (rc {runner.rc}): {tail}",
                           hint=f"the full output is in {artifacts}/stdout")
    if report.rc != 0 and not report.failed_hosts:  # a syntax error, a missing collection...
        raise BackendError(f"ansible-playbook {playbook} failed (rc {report.rc}): {_stdout_tail(runner)}",
                           hint=f"the full output is in {artifacts}/stdout")
    return report


def _run_runner(data: Path, playbook: str, inventory: Path, extravars: Mapping[str, Any],
                on_event: Callable[[dict[str, Any]], None], *, ident: str, check: bool):
    try:
        import ansible_runner
    except ImportError as exc:
        raise BackendError("ansible-runner is not installed", hint="pip install ansible-runner ansible") from exc
    data.mkdir(parents=True, exist_ok=True)
    artifacts = data / "artifacts" / ident
    if artifacts.exists():  # a re-run of check mode in the same place: keep only the latest
        shutil.rmtree(artifacts)
    lock = threading.Lock()

    def handler(event: dict[str, Any]) -> bool:
        with lock:
            on_event(event)
        return True  # keep the event in the artifacts too

    write_extravars(data, extravars)  # read by runner as `-e @env/extravars`
    try:
        return ansible_runner.run(
            private_data_dir=str(data), project_dir=str(playbook_dir()), playbook=playbook,
            inventory=str(inventory), ident=ident,
            envvars={**ANSIBLE_ENV, "ANSIBLE_LOCAL_TEMP": str(data / "tmp")},
            cmdline="--check --diff" if check else None,
            event_handler=handler, quiet=True, rotate_artifacts=0, suppress_env_files=True,
        )
    except Exception as exc:  # ansible-runner's ConfigurationError, OSError from pexpect...
        raise BackendError(f"ansible-runner could not run {playbook}: {exc}",
                           hint="is ansible installed (pip install ansible) and the inventory readable?") from exc


def _stdout_tail(runner: Any) -> str:
    try:
        text = runner.stdout.read()
    except Exception:  # no stdout artifact (the run did not start)
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-8:])


COMMAND_TASK = "envmgr | command"  # command.yml's task whose result is the command's


def command_results(events: Iterable[Mapping[str, Any]], hosts: Sequence[str], argv: Sequence[str],
                    elapsed: float, runner_status: str = "successful") -> dict[str, CommandResult]:
    """``{host: CommandResult}`` from the events of ``command.yml``, in inventory order."""
    found: dict[str, CommandResult] = {}
    for event in events:
        kind = event.get("event")
        data = event.get("event_data") or {}
        if kind not in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
            continue
        if kind != "runner_on_unreachable" and data.get("task", COMMAND_TASK) != COMMAND_TASK:
            continue  # the tasks that read the current env's recorded variables
        host = str(data.get("host"))
        res = data.get("res") or {}
        if kind == "runner_on_unreachable":
            raise BackendError(f"{host} is unreachable: {result_message(res)}",
                               hint="is the host up, and the inventory's connection right?")
        found[host] = _command_result(host, res, argv, elapsed)
    missing = [h for h in hosts if h not in found]
    if missing:
        raise BackendError(f"no result from {', '.join(missing)} for {' '.join(argv)} ({runner_status})")
    return {host: found[host] for host in hosts}


def _command_result(host: str, res: Mapping[str, Any], argv: Sequence[str], elapsed: float) -> CommandResult:
    msg = str(res.get("msg") or "")
    if "timed out" in msg.lower() or "expected time frame" in msg:
        raise CommandTimeout(f"{' '.join(argv)} ran past its time limit on {host}: {msg}")
    if _exec_failed(res, msg):
        if res.get("rc") == ENOENT:
            raise CommandNotFound(f"{argv[0]}: command not found on {host}",
                                  hint="install it on the host (add it to the spec)")
        raise BackendError(f"{host}: cannot run {argv[0]} (errno {res.get('rc')}): {msg}")
    if "rc" not in res:  # the module itself failed (bad interpreter, refused arguments...)
        raise BackendError(f"{host}: cannot run {argv[0]}: {msg or result_message(res)}")
    return CommandResult(tuple(argv), int(res["rc"]), str(res.get("stdout") or ""),
                         str(res.get("stderr") or ""), elapsed)


def _exec_failed(res: Mapping[str, Any], msg: str) -> bool:
    """The command module could not start argv[0]: its rc is then an errno, not an exit code.
    ansible-core < 2.19 says '[Errno 2] ...'; 2.19 says 'Error executing command.' (a command
    that ran and failed says 'non-zero return code' and carries start/end/delta)."""
    return msg.startswith("[Errno ") or (msg == "Error executing command." and "delta" not in res)


# --- small helpers ------------------------------------------------------------------------


class _scratch:
    """``workdir`` when given, else a temporary directory removed afterwards."""

    def __init__(self, workdir: Path | None) -> None:
        self._given = workdir
        self._temp: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> Path:
        if self._given is not None:
            self._given.mkdir(parents=True, exist_ok=True)
            return self._given
        self._temp = tempfile.TemporaryDirectory(prefix="envmgr-ansible-check-")
        return Path(self._temp.name)

    def __exit__(self, *exc: object) -> None:
        if self._temp is not None:
            self._temp.cleanup()


def _prefixed(progress: Progress, tag: str) -> Callable[[str], None]:
    def emit(line: str) -> None:
        if line.strip():
            progress(f"  [{tag}] {line}")

    return emit
