"""The fleet builder: hosts provisioned by Ansible (``playbooks/site.yml``, ansible-runner).

Steps prepare everything on the controller inside the new generation (``workdir/ansible/``):
the Python lock (uv, hashes), a lock per pip-sourced CUDA toolkit, the wheels of each lock
(downloaded here: the hosts need no index), the probe batch and the extravars; the last step
runs the playbook there, so the runner's artifacts stay in the generation.

Rolling upgrades: ``serial`` and ``max_fail_percentage`` come from ``realize.ansible``; the
play stops at the threshold and the hosts after the failing batch are not touched. A failed
or unreachable host raises ``RolloutFailed`` whose ``report`` names each host's state, the
failing task and its message.

``check`` is the same steps with the playbook in check mode (``--check --diff``): what each
host would change, for ``envmgr plan SPEC --backend ansible://...``; nothing changes.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envmgr.ansible.events import RunReport, rollout_failed
from envmgr.ansible.extravars import CURRENT_ENV, render_extravars
from envmgr.ansible.inventory import Fleet, fleet_hosts, fleet_url, resolve_fleet
from envmgr.ansible.probes import prepare_probes, save_probe_outputs
from envmgr.ansible.runner import SITE_PLAYBOOK, run_playbook
from envmgr.builders.base import Build, Builder, Realized, Step, execute
from envmgr.secrets import Redactor
from envmgr.targets.urls import parse_ansible_url
from envmgr.wheelhouse import prepare_python_lock, prepare_toolkit_locks

if TYPE_CHECKING:
    from envmgr.plan import Action
    from envmgr.progress import Progress
    from envmgr.spec.load import LoadedSpec

DATA_DIR = "ansible"  # under the generation's workdir


class FleetBuilder(Builder):
    kind = "ansible"
    can_check = True
    changes_host = True

    def __init__(self, url: str = "ansible://") -> None:
        self.parts = parse_ansible_url(url)
        self.fleet: Fleet | None = None

    def _resolve(self, loaded: LoadedSpec) -> None:
        # the URL's inventory and group, else the spec's (its inventory relative to the spec file)
        self.fleet = resolve_fleet(self.parts, loaded)  # before any download: a wrong URL fails fast

    def steps(self, loaded: LoadedSpec, actions: Sequence[Action], *, check: bool = False) -> list[Step]:
        spec = loaded.spec
        self.bind(loaded)
        fleet = self.fleet
        assert fleet is not None
        hosts = fleet_hosts(fleet)
        state: dict[str, Any] = {}
        pip_toolkits = [t.version for t in (spec.cuda.toolkits if spec.cuda else ()) if t.source == "pip"]
        host_changes = [a.summary() for a in actions if a.scope == "host"]
        options = spec.realize.ansible
        steps = [
            Step("resolve", (f"take the committed lock {self.lock.path} ({self.lock.packages} packages)" if self.lock
                             else f"resolve {len(spec.python.packages)} package pins for Python {spec.python.version}")
                            + " and download their wheels here (the hosts need no index)",
                 lambda build: state.update(zip(("python_lock", "lock"),
                                                prepare_python_lock(spec, _data(build) / "files", build.progress,
                                                                    self.lock.text if self.lock else None),
                                                strict=True))),
        ]
        if pip_toolkits:
            steps.append(Step("toolkits", f"lock and download the wheels of CUDA {', '.join(pip_toolkits)}",
                              lambda build: state.update(toolkits=prepare_toolkit_locks(
                                  spec, _data(build) / "files", build.progress))))
        steps.append(Step("probes", "assemble the probe batch every host runs after provisioning",
                          lambda build: state.update(probes=prepare_probes(spec, _data(build) / "files" / "probes"))))
        verb = "check (--check --diff) what" if check else "provision"
        steps.append(Step(
            "provision",
            f"{verb} {len(hosts)} host(s) of {fleet.group} ({', '.join(hosts)}) with {SITE_PLAYBOOK}, "
            f"serial {options.serial}, max_fail_percentage {options.max_fail_percentage}"
            + (f": {'; '.join(host_changes)}" if host_changes else ""),
            lambda build: self._provision(build, fleet, hosts, state, check)))
        return steps

    def preflight(self, loaded: LoadedSpec) -> None:
        self.bind(loaded)
        assert self.fleet is not None
        fleet_hosts(self.fleet)  # the inventory exists, parses and has the group

    def check(self, loaded: LoadedSpec, progress: Progress) -> tuple[str, RunReport]:
        """Check mode on the hosts: (the fleet's URL, what each host would change). Raises
        ``RolloutFailed`` when a host fails or cannot be reached even in check mode."""
        with tempfile.TemporaryDirectory(prefix="envmgr-ansible-check-") as scratch:
            realized = execute(self.steps(loaded, [], check=True), Build(loaded, Path(scratch), progress))
        return realized.target, realized.details["report"]

    def _provision(self, build: Build, fleet: Fleet, hosts: list[str], state: dict[str, Any], check: bool) -> None:
        spec = build.loaded.spec
        data = _data(build)
        extravars = render_extravars(spec, build.loaded.digest, self.parts, fleet.group, state["python_lock"],
                                     state.get("toolkits", {}), state["probes"])
        # for people reading the generation: secrets redacted (the run's own copy is 0600)
        (data / "extravars.json").write_text(json.dumps(Redactor.for_spec(spec).data(extravars), indent=2),
                                             encoding="utf-8")
        report = run_playbook(data, SITE_PLAYBOOK, fleet.inventory, extravars, hosts, build.progress,
                              ident="check" if check else "apply", check=check)
        if not check:
            (data / "report.json").write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
            save_probe_outputs(report, data / "probe")
        if report.failed_hosts or report.rc != 0:
            raise rollout_failed(report)
        python = extravars["envmgr"]["python"]
        if check:
            build.realized = Realized(fleet_url(self.parts, fleet), python["dir"], state["lock"], {"report": report})
            return
        build.progress(report.summary())
        build.realized = Realized(fleet_url(self.parts, fleet), python["dir"], state["lock"],
                                  {"env_id": python["env_id"], "env_dir": python["dir"],
                                   "current_env": CURRENT_ENV, **report.to_dict()})


def _data(build: Build) -> Path:
    return build.workdir / DATA_DIR
