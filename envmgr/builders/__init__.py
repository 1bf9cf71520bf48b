"""Builders: how an environment is made from a spec, chosen by the same URLs as targets
(``envmgr.backends`` lists the schemes and the builder of each).

``builder.steps(loaded, actions)`` is the plan; ``builders.base.execute`` applies the same
list into a new generation and returns what was ``Realized`` (the URL of the target that
runs in it). ``local://`` builds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envmgr import backends
from envmgr.errors import UsageError
from envmgr.targets.urls import split_url

if TYPE_CHECKING:
    from envmgr.builders.base import Builder


def open_builder(url: str) -> Builder:
    scheme = split_url(url)[0]
    builder = backends.builder_class(scheme)
    if builder is None:
        raise UsageError(f"{url} cannot build an environment: it is this host as it is",
                         hint=f"apply with {backends.forms(only_buildable=True)}")
    return builder(url)
