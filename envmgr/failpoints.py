"""Named points where envmgr can be made to kill itself, to prove crash safety.

``ENVMGR_FAILPOINT=installing envmgr apply ...`` sends SIGKILL to the process when
the apply reaches ``installing``: nothing runs after it (no finally, no atexit), as
with an operator's ``kill -9`` or a power cut. ``ENVMGR_FAILPOINT=installing:wait``
stops there instead, until a signal arrives (a test of SIGTERM mid-apply). Unset,
``reach`` costs one lookup.
"""

from __future__ import annotations

import os
import signal
import sys

# Every point, in the order an apply reaches them (the crash tests walk this list).
POINTS = (
    "locked", "generation-created", "spec-recorded", "resolve", "resolved", "venv-created",
    "installing", "installed", "lock-written", "committed", "gated", "link-made", "switched",
)


def reach(name: str) -> None:
    point = os.environ.get("ENVMGR_FAILPOINT")
    if point == name:
        os.kill(os.getpid(), signal.SIGKILL)
    elif point == f"{name}:wait":
        print(f"failpoint {name}: waiting for a signal", file=sys.stderr, flush=True)
        while True:
            signal.pause()
