"""The probe runner: output parsing, parallel and exclusive runs, timeouts that kill."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid

import pytest

from envmgr.probes import runner
from envmgr.probes.contract import MARKER, WRAPPER
from envmgr.probes.runner import ProbeInfo, parse_output, run_probe, run_probes
from envmgr.targets.base import Target
from envmgr.targets.local import LocalTarget

OK_LINE = MARKER + '{"probe": "x", "status": "pass", "summary": "fine", "details": {"n": 1}, "duration_s": 0.5}'


def test_parse_takes_the_marked_line_among_library_noise():
    result = parse_output("x", f"loading...\n{{\"status\": \"fail\"}}\n{OK_LINE}\n", "warning: x", 0)
    assert (result.status, result.summary, result.details, result.duration_s) == ("pass", "fine", {"n": 1}, 0.5)
    assert result.stderr_tail == "warning: x"


@pytest.mark.parametrize("stdout, stderr, summary", [
    ("", "Segmentation fault (core dumped)", "the probe printed no result (exit -11): Segmentation fault"),
    (MARKER + "{not json", "", "unreadable result line"),
    (MARKER + '{"status": "maybe"}', "", "unknown status 'maybe'"),
])
def test_parse_without_a_good_result_is_an_error(stdout, stderr, summary):
    result = parse_output("x", stdout, stderr, -11)
    assert result.status == "error" and summary in result.summary


def add_probe(monkeypatch, probe_id: str, body: str, timeout: float = 30, exclusive: bool = False) -> None:
    source = f"PROBE = {probe_id!r}\n{body}\n"
    monkeypatch.setitem(runner.PROBES, probe_id, ProbeInfo(timeout, exclusive, "test probe"))
    original = runner.script_source
    monkeypatch.setattr(runner, "script_source",
                        lambda pid: source + WRAPPER if pid == probe_id else original(pid))


def test_a_probe_that_raises_is_an_error_with_its_traceback(monkeypatch):
    add_probe(monkeypatch, "boom", "def probe(args):\n    raise ValueError('bad ' + args['why'])")
    result = run_probe(LocalTarget(), sys.executable, "boom", {"why": "input"})
    assert result.status == "error" and result.summary == "ValueError: bad input"
    assert "Traceback" in result.details["traceback"]


@pytest.mark.slow
def test_a_hanging_probe_is_killed_with_its_children_and_the_others_complete(monkeypatch):
    marker = f"envmgr-hang-{uuid.uuid4().hex}"
    add_probe(monkeypatch, "hang", (
        "import subprocess, time\n"
        "def probe(args):\n"
        f"    subprocess.Popen(['sh', '-c', 'sleep 300; echo {marker}'])\n"
        "    time.sleep(300)\n"), timeout=2)
    add_probe(monkeypatch, "quick", "def probe(args):\n    return {'status': 'pass', 'summary': 'done'}")
    started = time.monotonic()
    results = run_probes(LocalTarget(), sys.executable, ["hang", "quick"], {})
    elapsed = time.monotonic() - started
    by_id = {r.probe: r for r in results}
    assert by_id["hang"].status == "error" and "timed out after 2s" in by_id["hang"].summary
    assert by_id["quick"].status == "pass"
    assert elapsed < 30
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == "", f"processes left behind: {left.stdout}"


@pytest.mark.parametrize("exclusive", [False, True], ids=["parallel", "gpu-turns"])
def test_sigterm_while_probes_run_stops_them_all_at_once(monkeypatch, exclusive):
    """Issue 12: SIGTERM (as the CLI turns it into an interrupt) reaches only the main thread;
    the probes its worker threads wait on are killed at once, not waited for."""
    import os
    import signal
    import threading

    from envmgr.commandline import Terminated, terminate

    marker = f"envmgr-term-{uuid.uuid4().hex}"
    body = ("import subprocess, time\n"
            "def probe(args):\n"
            f"    subprocess.Popen(['sh', '-c', 'sleep 300; echo {marker}'])\n"
            "    time.sleep(300)\n")
    add_probe(monkeypatch, "slow_a", body, timeout=300, exclusive=exclusive)
    add_probe(monkeypatch, "slow_b", body, timeout=300)
    old = signal.signal(signal.SIGTERM, terminate)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    started = time.monotonic()
    try:
        timer.start()
        with pytest.raises(Terminated):
            run_probes(LocalTarget(), sys.executable, ["slow_a", "slow_b"], {})
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, old)
    assert time.monotonic() - started < 10
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == "", f"processes left behind: {left.stdout}"


TIMED = ("import fcntl, os, time\n"
         "def probe(args):\n"
         "    lock = os.environ.get('ENVMGR_GPU_LOCK')\n"
         "    handle = open(lock, 'a') if lock else None\n"
         "    if handle: fcntl.flock(handle, fcntl.LOCK_EX)\n"
         "    start = time.time(); time.sleep(0.3); end = time.time()\n"
         "    return {'status': 'pass', 'summary': '', 'details': {'start': start, 'end': end, 'lock': lock}}")


def timed_probes(monkeypatch) -> None:
    for pid, exclusive in (("a", False), ("b", False), ("c", True), ("d", True)):
        add_probe(monkeypatch, pid, TIMED, exclusive=exclusive)


def overlap(x: dict, y: dict) -> bool:
    return x["start"] < y["end"] and y["start"] < x["end"]


def test_on_host_files_all_start_together_and_exclusive_ones_take_turns(monkeypatch):
    timed_probes(monkeypatch)
    r = {p.probe: p.details for p in run_probes(LocalTarget(), sys.executable, ["a", "b", "c", "d"], {})}
    assert overlap(r["a"], r["b"])
    assert r["c"]["lock"] and r["c"]["lock"] == r["d"]["lock"] and r["a"]["lock"] is None
    assert not overlap(r["c"], r["d"])  # the GPU lock made them take turns


class ContainerLike(Target):
    """A target whose commands do not share this host's files (like docker://: runs_here False)."""

    url = "docker://example"

    def __init__(self) -> None:
        self.local = LocalTarget()

    def run(self, argv, timeout=60.0, env=None):
        return self.local.run(argv, timeout=timeout, env=env)


@pytest.mark.slow
def test_elsewhere_exclusive_probes_run_after_and_alone(monkeypatch):
    timed_probes(monkeypatch)
    r = {p.probe: p.details for p in run_probes(ContainerLike(), sys.executable, ["a", "b", "c", "d"], {})}
    assert overlap(r["a"], r["b"])  # together
    assert r["c"]["start"] >= max(r["a"]["end"], r["b"]["end"])  # after the parallel ones
    assert r["d"]["start"] >= r["c"]["end"]  # one at a time
    assert r["c"]["lock"] is None


def test_unknown_probe_is_a_usage_error():
    from envmgr.errors import UsageError

    with pytest.raises(UsageError, match="unknown probe"):
        runner.select(["gpu", "nope"])


def test_a_run_where_every_probe_skipped_is_no_pass():
    """Issue 29: "ok" needs something tested; every probe skipped is no answer (the apply gate
    fails a skipped required probe too)."""
    from envmgr.probes.runner import ProbeResult
    from envmgr.probes.session import ProbeReport

    skipped = ProbeReport("local://", "python3", None, [ProbeResult("gpu", "skip", "no NVIDIA driver here")])
    assert not skipped.tested and not skipped.ok and skipped.to_dict()["tested"] is False
    tested = ProbeReport("local://", "python3", None, [ProbeResult("gpu", "skip", "no driver"),
                                                       ProbeResult("toolchain_arch", "pass", "sm_90 in nvcc")])
    assert tested.tested and tested.ok


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU here: the gpu probe tests something")
def test_envmgr_probe_says_when_nothing_was_tested_and_exits_1(capsys):
    from envmgr.cli import main

    assert main(["probe", "--target", "local://", "--only", "gpu"]) == 1
    assert "nothing tested: every probe skipped" in capsys.readouterr().out
