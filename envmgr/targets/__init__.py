"""Targets: where commands run, chosen by a URL (``envmgr.targets.urls`` parses them).

    local://                  this host, as it is                      targets/local.py
    venv://PATH               a venv on this host, with its recorded env  targets/venv.py
    docker://REPOSITORY:TAG   throwaway containers of an image         targets/container.py
    ansible://GROUP?inventory=FILE   every host of a group (Ansible)   targets/hosts.py

Each has ``run(argv, timeout, env)``, ``start(argv, env)`` where ``can_start``, its
``interpreter`` and ``environment()``; capabilities are class flags. Modules are imported
only when a target of their kind is opened (docker and ansible are heavy).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from envmgr.targets.urls import split_url

if TYPE_CHECKING:
    from envmgr.targets.base import Target

REGISTRY = {
    "local": ("envmgr.targets.local", "LocalTarget"),
    "venv": ("envmgr.targets.venv", "VenvTarget"),
    "docker": ("envmgr.targets.container", "ContainerTarget"),
    "ansible": ("envmgr.targets.hosts", "HostsTarget"),
}


def open_target(url: str) -> Target:
    scheme, path, _ = split_url(url)
    module, name = REGISTRY[scheme]
    cls = getattr(import_module(module), name)
    if scheme == "local":
        return cls()
    return cls(path if scheme == "venv" else url)
