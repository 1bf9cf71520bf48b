"""Builders: how an environment is made from a spec, chosen by the same URLs as targets.

    venv://[PATH][?installer=pip]          a venv per generation on this host   builders/venv.py
    docker://REPOSITORY[?base=IMAGE&wheelhouse=1]   an image in the local engine  builders/image.py
    ansible://GROUP?inventory=FILE         hosts provisioned by Ansible         builders/fleet.py

``builder.steps(loaded, actions)`` is the plan; ``builders.base.execute`` applies the same
list into a new generation and returns what was ``Realized`` (the URL of the target that
runs in it). ``local://`` builds nothing.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from envmgr.errors import UsageError
from envmgr.targets.urls import split_url

if TYPE_CHECKING:
    from envmgr.builders.base import Builder

REGISTRY = {
    "venv": ("envmgr.builders.venv", "VenvBuilder"),
    "docker": ("envmgr.builders.image", "ImageBuilder"),
    "ansible": ("envmgr.builders.fleet", "FleetBuilder"),
}


def open_builder(url: str) -> Builder:
    scheme = split_url(url)[0]
    if scheme not in REGISTRY:
        raise UsageError(f"{url} cannot build an environment: it is this host as it is",
                         hint="apply with venv://, docker://REPOSITORY or ansible://GROUP?inventory=FILE")
    module, name = REGISTRY[scheme]
    return getattr(import_module(module), name)(url)
