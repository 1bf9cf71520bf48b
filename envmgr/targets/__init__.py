"""Targets: where commands run, chosen by a URL (``envmgr.backends`` lists the schemes and the
class of each; ``envmgr.targets.urls`` parses them).

Each has ``run(argv, timeout, env)``, ``start(argv, env)`` where ``can_start``, its
``interpreter`` and ``environment()``; what differs by backend is a method or a class flag of
its target (``envmgr.targets.base.Target``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envmgr import backends
from envmgr.targets.urls import split_url

if TYPE_CHECKING:
    from envmgr.targets.base import Target


def open_target(url: str) -> Target:
    scheme = split_url(url)[0]
    return backends.target_class(scheme).from_url(url)
