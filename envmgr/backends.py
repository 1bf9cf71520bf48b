"""Backends: the one list of the environments envmgr knows. A backend is a URL scheme (and the
value of a spec's ``realize.backend``), the target that runs commands in such an environment and,
where one can be made, the builder that makes it:

    local://                        this host, as it is           targets/local.py
    venv://[PATH][?installer=pip]   a venv on this host           targets/venv.py       builders/venv.py
    docker://REPOSITORY[:TAG]       an image; throwaway containers targets/container.py builders/image.py
    ansible://GROUP?inventory=FILE  hosts provisioned by Ansible  targets/hosts.py      builders/fleet.py

Everything that differs by backend is a method or a capability flag of its target or builder
(``envmgr.targets.base.Target``, ``envmgr.builders.base.Builder``); nothing else compares a
backend's name. Adding one is a module for its target (and builder) and one ``register`` line:
``tests/unit/test_new_backend.py`` does that and runs plan, apply, run and gc on it. Modules are
imported only when a backend of theirs is opened (docker and ansible are heavy).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any

from envmgr.errors import UsageError


@dataclass(frozen=True)
class Backend:
    scheme: str  # its URLs' scheme and the spec's realize.backend
    target: str  # "module:Class" of its Target
    builder: str | None  # "module:Class" of its Builder; None: nothing to build (this host as it is)
    form: str  # its URL as help and errors show it


_REGISTRY: dict[str, Backend] = {}


def register(backend: Backend) -> None:
    """Make a backend known (the shipped ones below; a test or an extension, one line)."""
    _REGISTRY[backend.scheme] = backend


def unregister(scheme: str) -> None:
    _REGISTRY.pop(scheme, None)


register(Backend("local", "envmgr.targets.local:LocalTarget", None, "local://"))
register(Backend("venv", "envmgr.targets.venv:VenvTarget", "envmgr.builders.venv:VenvBuilder",
                 "venv://[PATH][?installer=pip]"))
register(Backend("docker", "envmgr.targets.container:ContainerTarget", "envmgr.builders.image:ImageBuilder",
                 "docker://REPOSITORY[:TAG][?base=IMAGE&wheelhouse=1]"))
register(Backend("ansible", "envmgr.targets.hosts:HostsTarget", "envmgr.builders.fleet:FleetBuilder",
                 "ansible://GROUP?inventory=FILE"))


def schemes() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def forms(only_buildable: bool = False) -> str:
    """``local://, venv://[PATH]..., ...``: the URL forms, for help and errors."""
    return ", ".join(b.form for b in _REGISTRY.values() if b.builder or not only_buildable)


def backend(scheme: str) -> Backend:
    try:
        return _REGISTRY[scheme]
    except KeyError:
        raise UsageError(f"{scheme!r} is no backend envmgr knows", hint=f"use one of {forms()}") from None


def _load(ref: str) -> Any:
    module, _, name = ref.partition(":")
    return getattr(import_module(module), name)


def target_class(scheme: str) -> Any:
    """The Target class of a scheme (``envmgr.targets.base.Target`` subclass)."""
    return _load(backend(scheme).target)


def builder_class(scheme: str) -> Any | None:
    """The Builder class of a scheme, None where it builds nothing."""
    ref = backend(scheme).builder
    return _load(ref) if ref else None


def recorded_target(kind: object) -> Any | None:
    """The Target class of the backend a generation records (``meta.json`` backend_kind): None
    for a kind this envmgr does not know (a damaged or foreign record is input, not an order)."""
    return target_class(kind) if isinstance(kind, str) and kind in _REGISTRY else None
