"""A free local TCP port for a test server (every suite that starts one takes it from here)."""

from __future__ import annotations

import random
import socket

# sglang 0.5.11-0.5.18 derive a gRPC port as --port + 10000 and stop at start-up past 65535
# (an OS-chosen 60311 did on the H200, 2026-12-01); `envmgr validate` flags such a port, so a
# test's server port stays at or below this.
HIGHEST = 55535


def free_port() -> int:
    for _ in range(500):
        port = random.randint(20000, HIGHEST)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port between 20000 and {HIGHEST}")
