"""Builders: how an environment is made from a spec, chosen by the same URLs as targets, or by
the spec's ``realize.backend`` (``envmgr.backends`` lists the schemes and the builder of each).
``open_builder`` binds the builder to the spec: its settings are resolved once, there.

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
    from envmgr.lockfile import Locked
    from envmgr.spec.load import LoadedSpec


def open_builder(loaded: LoadedSpec, url: str | None = None, lock: Locked | None = None) -> Builder:
    """The builder of ``url``, else of the spec's ``realize.backend``, bound to ``loaded`` (and
    to the committed ``lock`` it installs, if one is given)."""
    scheme = split_url(url)[0] if url else loaded.spec.realize.backend
    builder = backends.builder_class(scheme)
    if builder is None:
        raise UsageError(f"{url or scheme + '://'} cannot build an environment: it is this host as it is",
                         hint=f"apply with {backends.forms(only_buildable=True)}")
    return builder.from_spec(loaded, url, lock)
