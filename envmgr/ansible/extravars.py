"""The extra variable ``envmgr`` that ``playbooks/site.yml`` reads: built from the spec and the
prepared locks as plain data (the contract is ``playbooks/README.md``), written with every
string marked unsafe so that no spec value is ever templated."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envmgr.errors import UsageError
from envmgr.state import write_atomic
from envmgr.toolkits import toolkit_home_subdir, toolkit_release

if TYPE_CHECKING:
    from envmgr.spec.models import Spec, Toolkit
    from envmgr.targets.urls import AnsibleURL
    from envmgr.wheelhouse import PreparedLock

EXTRAVARS_CONTRACT = 2  # bump when the shape of the `envmgr` extra variable changes (2: probe.digest, .when, .key)
REMOTE_ROOT = "/opt/envmgr"
CURRENT_ENV = f"{REMOTE_ROOT}/current-env"


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


def render_extravars(spec: Spec, spec_digest: str, target: AnsibleURL, group: str,
                     python_lock: PreparedLock, toolkit_locks: Mapping[str, PreparedLock],
                     probes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The one extra variable the playbooks read (plain data; contract in playbooks/README.md)."""
    options = spec.realize.ansible
    extravars: dict[str, Any] = {
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


@contextmanager
def extravars_file(data: Path, extravars: Mapping[str, Any]) -> Iterator[Path]:
    """``write_extravars`` for the length of one run: the file holds the spec's secrets, and
    ``data`` is kept (in the generation), so it is removed when the run ends, however it ends."""
    path = write_extravars(data, extravars)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


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

