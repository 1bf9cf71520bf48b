"""``ansible://GROUP?inventory=FILE``: one command on every host of a group, through
ansible-runner (``playbooks/command.yml``: the ``command`` module, argv form, no shell).

The command sees the current env first on PATH (then /usr/local/cuda/bin), the current env's
recorded variables (the spec's env, which the python_env role wrote 0600 on each host), and
the caller's ``env`` over both; so a target opened later runs with the environment that was
provisioned. ``run`` returns the FIRST host's result (inventory order); ``run_all`` every host's.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envmgr.ansible.events import result_message
from envmgr.ansible.extravars import CURRENT_ENV, REMOTE_ROOT
from envmgr.ansible.inventory import Fleet, fleet_hosts, fleet_url, resolve_fleet
from envmgr.ansible.runner import COMMAND_PLAYBOOK, run_runner
from envmgr.errors import BackendError, CommandNotFound, CommandTimeout
from envmgr.targets.base import CommandResult, Target, checked_argv
from envmgr.targets.urls import parse_ansible_url

ENOENT = 2
# Prints the recorded variables of the env current-env points to (the python_env role's JSON).
READ_RECORDED = ("import json, os, sys; name = os.path.basename(os.path.realpath(sys.argv[1])); "
                 "path = os.path.join(sys.argv[2], name + '.json'); "
                 "print(json.dumps(json.load(open(path)) if os.path.exists(path) else {}))")
COMMAND_TASK = "envmgr | command"  # command.yml's task whose result is the command's
# What a command gets before the recorded env: the current env's bin first (like an
# activated venv), then the selected toolkit's, then Debian's default.
RUN_ENV = {
    "VIRTUAL_ENV": CURRENT_ENV,
    "PATH": f"{CURRENT_ENV}/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
}


class HostsTarget(Target):
    """The hosts of one inventory group."""

    scheme = "ansible"
    interpreter = f"{CURRENT_ENV}/bin/python"

    def __init__(self, url: str) -> None:
        self.parts = parse_ansible_url(url)
        self._fleet: Fleet | None = None
        self._hosts: list[str] | None = None

    @property
    def fleet(self) -> Fleet:
        if self._fleet is None:
            self._fleet = resolve_fleet(self.parts)
        return self._fleet

    @property
    def url(self) -> str:
        return fleet_url(self.parts, self.fleet)

    def hosts(self) -> list[str]:
        if self._hosts is None:
            self._hosts = fleet_hosts(self.fleet)
        return list(self._hosts)

    def environment(self) -> dict[str, str]:
        """What command.yml gives a command: the current env's bin first, then its recorded
        variables (read on the first host, as data)."""
        result = self.run([self.interpreter, "-c", READ_RECORDED, CURRENT_ENV, f"{REMOTE_ROOT}/env"], timeout=60)
        if not result.ok:
            raise BackendError(f"{self.hosts()[0]}: cannot read the current env's recorded variables: "
                               f"{(result.stderr or result.stdout).strip()[-300:]}",
                               hint="provision the hosts first (envmgr apply SPEC --backend ansible://...)")
        return {**RUN_ENV, **json.loads(result.stdout)}

    def run(self, argv: Sequence[str], timeout: float = 60.0,
            env: Mapping[str, str] | None = None) -> CommandResult:
        """The first host's result (inventory order); every host of the group runs it."""
        results = self.run_all(argv, timeout=timeout, env=env)
        return next(iter(results.values()))

    def run_all(self, argv: Sequence[str], timeout: float = 60.0,
                env: Mapping[str, str] | None = None) -> dict[str, CommandResult]:
        """``{host: CommandResult}`` for every host of the group, in inventory order."""
        args = checked_argv(argv)
        hosts = self.hosts()
        extravars = {"envmgr_group": self.fleet.group, "envmgr_argv": args, "envmgr_root": REMOTE_ROOT,
                     "envmgr_env": {**RUN_ENV, **dict(env or {})}, "envmgr_timeout": max(1, int(timeout))}
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="envmgr-ansible-run-") as scratch:
            events: list[dict[str, Any]] = []
            runner = run_runner(Path(scratch), COMMAND_PLAYBOOK, self.fleet.inventory, extravars,
                                events.append, ident="run", check=False)
        return command_results(events, hosts, args, time.monotonic() - started, runner_status=runner.status)


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
