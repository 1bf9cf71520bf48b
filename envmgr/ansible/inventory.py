"""Which hosts an ``ansible://`` URL names: its inventory and group, else the spec's
``realize.ansible`` (an inventory there is relative to the spec file), parsed by ansible's own
inventory manager, in process."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envmgr.errors import BackendError, UsageError
from envmgr.targets.urls import GROUP_RE

if TYPE_CHECKING:
    from envmgr.spec.load import LoadedSpec
    from envmgr.targets.urls import AnsibleURL


@dataclass(frozen=True)
class Fleet:
    """An inventory file (absolute) and a group in it."""

    inventory: Path
    group: str


def resolve_fleet(url: AnsibleURL, loaded: LoadedSpec | None = None) -> Fleet:
    options = loaded.spec.realize.ansible if loaded is not None else None
    group = url.group or (options.group if options else "") or "all"
    if not GROUP_RE.fullmatch(group):
        raise UsageError(f"{group!r} is not an inventory group name",
                         hint="letters, digits, '_', '-', '.'; like gpu_hosts or all")
    if url.inventory:
        path = Path(url.inventory).expanduser()
    elif loaded is not None and options is not None and options.inventory:
        path = loaded.path.parent / Path(options.inventory).expanduser()
    else:
        raise UsageError("no inventory for the ansible backend",
                         hint="add ?inventory=FILE to the ansible:// URL, or set realize.ansible.inventory")
    path = path.resolve()
    if not path.exists():
        raise UsageError(f"inventory {path} does not exist",
                         hint="give an inventory file that exists: ?inventory=FILE or realize.ansible.inventory")
    return Fleet(path, group)


def fleet_url(url: AnsibleURL, fleet: Fleet) -> str:
    """The URL with the inventory made absolute: it reopens the same hosts from anywhere."""
    params = [f"inventory={fleet.inventory}"]
    if not url.apt_online:
        params.append("apt=offline")
    if url.host_kind != "auto":
        params.append(f"host_kind={url.host_kind}")
    if not url.reboot:
        params.append("reboot=0")
    if url.probe != "changed":
        params.append(f"probe={url.probe}")
    return f"ansible://{fleet.group}?{'&'.join(params)}"


# collect_facts runs commands from several threads, and ansible's plugin loader is not
# thread-safe (a half-loaded inventory plugin): one parse at a time.
_INVENTORY_LOCK = threading.Lock()


def fleet_hosts(fleet: Fleet) -> list[str]:
    """The group's hosts in inventory order."""
    with _INVENTORY_LOCK:
        return inventory_hosts(fleet.inventory, fleet.group)


def inventory_hosts(inventory: Path, group: str) -> list[str]:
    try:
        from ansible.errors import AnsibleError
        from ansible.inventory.manager import InventoryManager
        from ansible.parsing.dataloader import DataLoader
    except ImportError as exc:
        raise BackendError("ansible-core is not installed", hint="pip install ansible") from exc
    try:
        manager = InventoryManager(loader=DataLoader(), sources=[str(inventory)])
        hosts = [host.name for host in manager.get_hosts(pattern=group)]
    except (AnsibleError, OSError) as exc:
        raise BackendError(f"cannot read inventory {inventory}: {exc}") from exc
    if not hosts:
        raise BackendError(f"group {group!r} has no hosts in {inventory}",
                           hint="check the group name and the inventory")
    return hosts
