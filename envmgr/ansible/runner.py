"""ansible-runner's Python API, in a private data dir: a playbook run with progress from its
events and its artifacts kept (events, stdout, status). Every ansible-runner failure
becomes a ``BackendError`` here, chained with ``from exc``."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envmgr.ansible.events import RunReport, host_results, progress_line
from envmgr.ansible.extravars import extravars_file
from envmgr.ansible.probes import probe_outputs_and_reused
from envmgr.errors import BackendError
from envmgr.progress import Progress

SITE_PLAYBOOK = "site.yml"
COMMAND_PLAYBOOK = "command.yml"
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


def run_playbook(data: Path, playbook: str, inventory: Path, extravars: Mapping[str, Any],
                 hosts: Sequence[str], progress: Progress, *, ident: str, check: bool) -> RunReport:
    """Run ``playbook`` with progress from its events; per-host results from the same events."""
    events: list[dict[str, Any]] = []

    def on_event(event: dict[str, Any]) -> None:
        events.append(event)
        line = progress_line(event)
        if line:
            progress(line)

    runner = run_runner(data, playbook, inventory, extravars, on_event, ident=ident, check=check)
    artifacts = str(data / "artifacts" / ident)
    probe, reused = probe_outputs_and_reused(events, ((extravars.get("envmgr") or {}).get("probe") or {}).get("key"))
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


def run_runner(data: Path, playbook: str, inventory: Path, extravars: Mapping[str, Any],
                on_event: Callable[[dict[str, Any]], None], *, ident: str, check: bool):
    try:
        import ansible_runner
        from ansible_runner.exceptions import AnsibleRunnerException
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

    with extravars_file(data, extravars):  # read by runner as `-e @env/extravars`; gone after the run
        try:
            return ansible_runner.run(
                private_data_dir=str(data), project_dir=str(playbook_dir()), playbook=playbook,
                inventory=str(inventory), ident=ident,
                envvars={**ANSIBLE_ENV, "ANSIBLE_LOCAL_TEMP": str(data / "tmp")},
                cmdline="--check --diff" if check else None,
                event_handler=handler, quiet=True, rotate_artifacts=0, suppress_env_files=True,
            )
        except (AnsibleRunnerException, OSError, ValueError) as exc:  # ConfigurationError; pexpect's OSError
            raise BackendError(f"ansible-runner could not run {playbook}: {exc}",
                               hint="is ansible installed (pip install ansible) and the inventory readable?") from exc


def _stdout_tail(runner: Any) -> str:
    from ansible_runner.exceptions import AnsibleRunnerException

    try:
        with runner.stdout as stdout:
            text = stdout.read()
    except (AnsibleRunnerException, OSError):  # no stdout artifact (the run did not start)
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-8:])
