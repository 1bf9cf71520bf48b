"""Start an SGLang server in an environment and know, within seconds, whether it is ready or dead.

The scenario's loop was ``nohup ... &``, ``sleep 600``, grep. Here:
- the server starts through ``target.start`` (its own process group, or its own container);
- a reader thread copies every log line to the cell's ``server.log`` and feeds it to the
  same ``Triage`` that ``envmgr triage`` uses, and watches for the ready line;
- the main thread waits on that thread's news and, with backoff, polls ``/health_generate``
  (``/health``, ``/ready`` where the first is missing);
- it is ready at the ready line or a 200; crashed at the process's exit or at the first
  triage finding (a process that stays up after a fatal error is still dead for us); hung
  when nothing was logged for the stall limit; timed out at the startup limit;
- whatever happens, ``stop`` takes the whole tree down and checks nothing is left, so no
  GPU memory stays held by a half-dead server.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.request
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from envmgr.bench.command import ServerCommand
from envmgr.bench.preflight import port_taken
from envmgr.bench.triage import Triage, clean_line, signal_name
from envmgr.errors import BackendError, LaunchError, UsageError
from envmgr.findings import Finding
from envmgr.targets.base import Target

READY_LINE = "The server is fired up and ready to roll!"
HEALTH_PATHS = ("/health_generate", "/health", "/ready")
# Log lines worth showing as progress while a server starts, each once (every rank prints
# them); the rest only go to the log, and a crash is shown by its triage finding.
MILESTONES = ("Load weight begin", "Load weight end", "KV Cache is allocated", "Memory pool end",
              "Capture cuda graph begin", "Capture cuda graph end", "Uvicorn running", READY_LINE)

# The access-log lines our own health polls make the server print (uvicorn, every 2 s, for as
# long as the server is not ready): they are not progress, so they neither reset the stall timer
# nor count as the last real line. Seen on sglang 0.5.11:
#   INFO:     127.0.0.1:45202 - "GET /health_generate HTTP/1.1" 503 Service Unavailable
OWN_POLL = re.compile(r'"GET (?:' + "|".join(re.escape(p) for p in HEALTH_PATHS) + r') HTTP/[\d.]+" \d{3}')
EXIT_WAIT_S = 5.0  # the output can end a moment before the process has an exit code

Status = Literal["ready", "crashed", "timeout", "hung"]


@dataclass(frozen=True)
class Limits:
    startup_s: float = 1800.0
    stall_s: float = 600.0
    grace_s: float = 15.0  # TERM -> KILL
    settle_s: float = 1.0  # a held finding is released when the log has been quiet this long
    poll_first_s: float = 0.25  # health polling backoff: 0.25, 0.5, 1, 2, 2, ...
    poll_max_s: float = 2.0


@dataclass
class Launch:
    """How a start went: status, when, why, and the findings of its log so far."""

    status: Status
    seconds: float
    reason: str
    findings: list[Finding] = field(default_factory=list)
    returncode: int | None = None
    health_path: str | None = None
    # Seconds from the deciding log line (the root cause, or the ready line) reaching us to
    # this verdict; None when no log line decided it (exit code, health, limits).
    detected_after_s: float | None = None
    last_line: str = ""  # the last real log line (cleaned), the evidence when nothing matched


def log_tail(path: Path, lines: int = 8) -> tuple[str, ...]:
    """The last meaningful lines of a server log: not blank, not the access lines of our own
    health polls (the evidence a failed cell shows beside its server.log path)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()
    kept = [line.rstrip() for line in text.splitlines() if line.strip() and not OWN_POLL.search(line)]
    return tuple(kept[-lines:])


def exit_text(code: int | None) -> str:
    """How the server ended, in words: "exited with code 1", "was killed by SIGKILL"."""
    if code is None:
        return "the server closed its output but is still running"
    name = signal_name(code)
    if name is not None:
        why = (" (SGLang kills its own process tree with SIGKILL when a child process fails)"
               if name == "SIGKILL" else "")
        return f"the server was killed by {name} (exit code {code}){why}"
    return f"the server exited with code {code}"


class RunningServer:
    """A started server: wait until it is ready or dead, use it, stop it (a context manager)."""

    def __init__(self, target: Target, command: ServerCommand, log_path: Path,
                 limits: Limits = Limits(), progress: Callable[[str], None] = lambda line: None,
                 redact: Callable[[str], str] = lambda line: line) -> None:
        if not target.can_start:
            raise UsageError(f"{target.url} cannot host a benchmark server",
                             hint="run `envmgr bench` on the host itself (local:// or venv://), or use docker://")
        self.command = command
        self.log_path = log_path
        self.limits = limits
        self.progress = progress
        self.redact = redact  # server.log and progress never show a secret the server prints
        self.triage = Triage()
        self._news = threading.Event()  # set by the reader: a line, a finding, or the end
        self._lock = threading.Lock()
        self._first_fatal: Finding | None = None  # the first finding the live triage released
        self._ready_line = False
        self._ready_at: float | None = None
        self._eof = False
        self._last_line_at = time.monotonic()  # the last real line (not our own polls' echo)
        self._last_line = ""
        self._shown: set[str] = set()  # milestones already shown
        self._arrivals = array("d")  # monotonic arrival time of each log line, by line number - 1
        self.stopped_cleanly: bool | None = None
        self.leftovers: list[str] = []
        _require_free_port(command)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "w", encoding="utf-8")
        self.started_at = time.monotonic()
        try:
            self.service = target.start(list(command.argv), dict(command.env))
        except BaseException:
            self._log.close()
            raise
        self._reader = threading.Thread(target=self._read, name="server-log", daemon=True)
        self._reader.start()

    # --- the reader thread -------------------------------------------------------------

    def _read(self) -> None:
        try:
            for line in self.service.lines():
                line = self.redact(line)
                self._log.write(line + "\n")
                self._log.flush()
                with self._lock:  # the main thread reads the same Triage
                    found = self.triage.feed(line)
                    now = time.monotonic()
                    self._arrivals.append(now)
                    if not OWN_POLL.search(line):
                        self._last_line, self._last_line_at = line, now
                    fatal = [f for f in found if f.fatal]  # a feature-off warning is not a crash
                    self._first_fatal = self._first_fatal or (fatal[0] if fatal else None)
                    if READY_LINE in line and not self._ready_line:
                        self._ready_line, self._ready_at = True, self._last_line_at
                milestone = next((m for m in MILESTONES if m in line), None)
                if milestone and milestone not in self._shown:
                    self._shown.add(milestone)
                    self.progress(f"  [{self.command.config}] {line.strip()[:200]}")
                self._news.set()
        except BackendError as exc:  # the daemon went away: the server is lost all the same
            self._log.write(f"envmgr: lost the server's output: {exc}\n")
        finally:
            with self._lock:
                self._eof = True
            self._news.set()

    # --- waiting -----------------------------------------------------------------------

    def wait_ready(self) -> Launch:
        """Block until ready, crashed, hung or timed out; never longer than the limits."""
        interval = self.limits.poll_first_s
        next_poll = time.monotonic()
        health = HealthProbe(self.command.base_url)
        while True:
            verdict = self._verdict()
            if verdict is not None:
                return verdict
            now = time.monotonic()
            if now >= next_poll:
                if health.ready():
                    return self._launch("ready", f"GET {health.path} returned 200", health_path=health.path)
                interval = min(interval * 2, self.limits.poll_max_s)
                next_poll = time.monotonic() + interval
            self._news.wait(timeout=max(0.01, min(next_poll - time.monotonic(), self.limits.settle_s)))
            self._news.clear()

    def _verdict(self) -> Launch | None:
        with self._lock:
            first, ready_line, eof, last = self._first_fatal, self._ready_line, self._eof, self._last_line_at
            pending = self.triage.pending()
        now = time.monotonic()
        if first is not None:
            return self._launch("crashed", f"fatal log line {first.line}: {first.id}")
        if ready_line:
            return self._launch("ready", "ready line in the log")
        code = self.service.poll()
        if code is not None or eof:
            self._reader.join(timeout=5)  # the last lines carry the cause
            with self._lock:
                released = [f for f in self.triage.close() if f.fatal]  # held for a recovery line that never came
            code = self._exit_code(code)
            reason = exit_text(code)
            if released:
                reason += f"; fatal log line {released[0].line}: {released[0].id}"
            return self._launch("crashed", reason, returncode=code)
        if pending and now - last >= self.limits.settle_s:
            with self._lock:
                self.triage.close()  # silent after a generic error: nothing better is coming
            return self._launch("crashed", "fatal log lines, then silence")
        if now - self.started_at >= self.limits.startup_s:
            return self._launch("timeout", f"not ready after {self.limits.startup_s:g}s")
        if now - last >= self.limits.stall_s:
            return self._launch("hung", f"no log line (other than our health polls) and no health for "
                                        f"{self.limits.stall_s:g}s; last line: {self.last_line_text}")
        return None

    @property
    def last_line_text(self) -> str:
        """The last real log line, cleaned of timestamps and rank prefixes."""
        with self._lock:
            return clean_line(self._last_line).text.strip()[:200] or "nothing"

    def _exit_code(self, code: int | None) -> int | None:
        """Wait a moment for the exit code: the kernel closes a process's pipes before it
        becomes a zombie, so the end of the output can come first (0.5.11 showed "code None")."""
        deadline = time.monotonic() + EXIT_WAIT_S
        while code is None and time.monotonic() < deadline:
            time.sleep(0.02)
            code = self.service.poll()
        return code

    def _launch(self, status: Status, reason: str, *, returncode: int | None = None,
                health_path: str | None = None) -> Launch:
        now = time.monotonic()
        arrived = None
        with self._lock:
            findings = self.triage.findings()
            fatal = [f for f in findings if f.fatal]
            if fatal and status == "crashed" and fatal[0].line <= len(self._arrivals):
                arrived = self._arrivals[fatal[0].line - 1]
            elif status == "ready" and health_path is None:
                arrived = self._ready_at
        detected_after = None if arrived is None else round(now - arrived, 3)
        return Launch(status, round(now - self.started_at, 3), reason, findings, returncode, health_path,
                      detected_after, self.last_line_text)

    # --- stopping ----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the whole tree; record whether anything survived (it should not)."""
        try:
            self.service.stop(self.limits.grace_s)
            self.leftovers = self.service.leftovers()
        finally:
            self._reader.join(timeout=5)
            self._log.close()
        self.stopped_cleanly = not self.leftovers
        if self.leftovers:
            self.progress(f"  [{self.command.config}] WARNING: still running after stop: "
                          f"{', '.join(self.leftovers)}")

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HealthProbe:
    """GET the first health endpoint the server has; 200 means ready (503 while starting)."""

    def __init__(self, base_url: str, timeout_s: float = 5.0) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.paths = list(HEALTH_PATHS)
        self.path: str | None = None

    def ready(self) -> bool:
        for path in list(self.paths):
            status = http_status(self.base_url + path, self.timeout_s)
            if status == 404:  # an older or newer server without this endpoint: try the next
                if len(self.paths) > 1:
                    self.paths.remove(path)
                continue
            self.path = path
            return status == 200
        return False


def http_status(url: str, timeout_s: float) -> int | None:
    """The HTTP status of GET url, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - our own URL
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _require_free_port(command: ServerCommand) -> None:
    """Something already answering on the port would be measured instead of our server (the
    bench's pre-flight skips such a cell; this guards every other caller)."""
    if port_taken(command.client_host, command.port):
        raise LaunchError(f"port {command.port} on {command.client_host} is already in use: another server is running",
                          hint="stop it, or give this config another --port")
