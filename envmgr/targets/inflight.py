"""Commands in flight, so that an interrupt stops all of them, not only the main thread's.

A command that runs in a worker thread (parallel probes, verify on several hosts) blocks in
that thread; a Ctrl-C or SIGTERM reaches only the main thread, and the pool would then wait
for every probe to finish or time out. Each target registers how to kill the command it is
waiting on (``running``), and whoever catches the interrupt calls ``kill_all``: the blocked
calls return at once, their threads end, and nothing is left running.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from envmgr.errors import EnvmgrError

_lock = threading.Lock()
_kills: dict[int, Callable[[], None]] = {}


@contextmanager
def running(kill: Callable[[], None]) -> Iterator[None]:
    """While the block runs, ``kill_all`` calls ``kill`` (which must not raise)."""
    key = id(kill)
    with _lock:
        _kills[key] = kill
    try:
        yield
    finally:
        with _lock:
            _kills.pop(key, None)


def kill_all() -> int:
    """Kill every command in flight; how many there were."""
    with _lock:
        kills = list(_kills.values())
    for kill in kills:
        try:
            kill()
        except (OSError, EnvmgrError):  # one that already ended must not keep the others alive
            pass
    return len(kills)
