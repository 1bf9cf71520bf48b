"""ansible-runner events -> what happened on each host (pure): per-host results from the final
stats and the task results, one progress line per task and host result, and the error a
failed rollout raises."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from envmgr.errors import RolloutFailed

TAIL_CHARS = 400



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
