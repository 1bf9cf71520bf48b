"""The launcher against the SGLang TEST DOUBLE (tests/doubles/sglang_double): real processes,
real HTTP, real SGLang log sequences replayed. Ready detection, crash detection within 5 s of
the fatal line (the scenario waited 600 s), and teardown that leaves no process behind."""

from __future__ import annotations

import socket
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from ports import free_port

from envmgr.bench.command import ServerCommand
from envmgr.bench.launch import LaunchError, Limits, RunningServer
from envmgr.targets.base import Target
from envmgr.targets.local import LocalTarget
from envmgr.targets.service import group_members

DOUBLE = Path(__file__).resolve().parents[1] / "doubles" / "sglang_double"
FAST = Limits(startup_s=60, stall_s=3, grace_s=5, settle_s=1.0)


def command(scenario: str, *flags: str, port: int | None = None) -> ServerCommand:
    port = port or free_port()
    argv = (sys.executable, "-m", "sglang.launch_server", "--model-path", "/models/Kimi-K2.5-INT4",
            "--tp-size", "8", "--host", "127.0.0.1", "--port", str(port), *flags)
    env = {"PYTHONPATH": str(DOUBLE), "SGLANG_DOUBLE_SCENARIO": scenario, "SGLANG_DOUBLE_DELAY": "0.02"}
    return ServerCommand("test", argv, env, "127.0.0.1", port)


def launch(tmp_path: Path, cmd: ServerCommand, limits: Limits = FAST) -> RunningServer:
    return RunningServer(LocalTarget(), cmd, tmp_path / "server.log", limits, progress=lambda line: None)


def assert_torn_down(server: RunningServer) -> None:
    assert server.stopped_cleanly is True
    assert server.leftovers == []
    assert group_members(server.service.pgid) == []


def test_ready_server_is_detected_serves_and_is_torn_down(tmp_path):
    cmd = command("ready")
    with launch(tmp_path, cmd) as server:
        result = server.wait_ready()
        assert result.status == "ready", result
        assert result.findings == []
        with urllib.request.urlopen(cmd.base_url + "/health", timeout=5) as response:
            assert response.status == 200
        assert len(group_members(server.service.pgid)) >= 1
    assert_torn_down(server)
    assert "Load weight end" in (tmp_path / "server.log").read_text()


def test_kv_pool_oom_is_caught_within_seconds_with_the_fix(tmp_path):
    with launch(tmp_path, command("kv_pool_oom")) as server:
        result = server.wait_ready()
    assert result.status == "crashed", result
    root = result.findings[0]
    assert root.id == "kv_pool_oom"
    assert root.values["mem_fraction_static"] == pytest.approx(0.778734296875)
    assert "suggested_mem_fraction_static" in root.values or "mem_fraction" in root.fix
    assert result.detected_after_s is not None  # by the finding, not by a limit (times: benchmarks/launch.py)
    assert_torn_down(server)


def test_suggested_mem_fraction_gets_the_server_up(tmp_path):
    """Triage's number is not decoration: the double sizes the KV pool with SGLang's arithmetic."""
    with launch(tmp_path / "first", command("kv_pool_oom")) as server:
        first = server.wait_ready()
    suggested = first.findings[0].values["suggested_mem_fraction_static"]
    with launch(tmp_path / "second", command("kv_pool_oom", "--mem-fraction-static", str(suggested))) as server:
        second = server.wait_ready()
    assert second.status == "ready", second
    assert_torn_down(server)


def test_assertion_after_weights_with_the_process_still_up_is_a_crash(tmp_path):
    with launch(tmp_path, command("assert_after_weights")) as server:
        result = server.wait_ready()
        assert server.service.poll() is None  # only the log says it is dead
    assert result.status == "crashed", result
    assert result.findings[0].id == "ep_expert_location_assert"
    assert result.detected_after_s is not None and result.detected_after_s <= 5.0
    assert_torn_down(server)


def test_a_silent_server_is_hung_after_the_stall_limit(tmp_path):
    started = time.monotonic()
    with launch(tmp_path, command("hang")) as server:
        result = server.wait_ready()
    assert result.status == "hung", result
    assert FAST.stall_s <= time.monotonic() - started < FAST.stall_s + 10
    assert_torn_down(server)


def test_our_own_health_polls_in_the_log_do_not_keep_a_hung_server_alive(tmp_path):
    """The real 0.5.11 server logs an access line for each /health_generate 503; before, those
    lines reset the stall timer and a warmup that never finished became a 300 s timeout."""
    limits = Limits(startup_s=40, stall_s=4, grace_s=5, settle_s=1.0, poll_max_s=0.5)
    started = time.monotonic()
    with launch(tmp_path, command("warmup_hang"), limits) as server:
        result = server.wait_ready()
    assert result.status == "hung", result
    assert time.monotonic() - started < 25  # the stall limit after the last real line, not 40 s
    log = (tmp_path / "server.log").read_text()
    assert log.count('"GET /health_generate HTTP/1.1" 503') >= 3  # the polls went on meanwhile
    assert "/health_generate" not in result.reason  # the last REAL line is named
    assert "model_info" in result.reason or "Uvicorn" in result.reason, result.reason
    assert_torn_down(server)


def test_a_taken_zmq_port_is_named_on_the_live_log(tmp_path):
    # the double's crash_exit replays SGLang's detokenizer ZMQError (a port another process holds)
    with launch(tmp_path, command("crash_exit")) as server:
        result = server.wait_ready()
    assert result.status == "crashed"
    assert "port_in_use" in result.reason, result
    [finding] = [f for f in result.findings if f.fatal]
    assert finding.id == "port_in_use" and "--port" in finding.fix
    assert_torn_down(server)


def test_a_crash_no_signature_knows_reports_the_real_exit_code_and_where_it_failed(tmp_path):
    """A real process that prints an exception no signature knows and is SIGKILLed: the verdict
    waits for the exit code, and the finding (at the end of the log) is where it failed."""
    port = free_port()
    script = ("import os, sys, time; print('Loading weights', flush=True); "
              "print('Traceback (most recent call last):', file=sys.stderr, flush=True); "
              "print('KeyError: ' + repr('model.layers.0.mlp.gate_up_proj'), file=sys.stderr, flush=True); "
              "time.sleep(0.3); os.kill(os.getpid(), 9)")
    cmd = ServerCommand("test", (sys.executable, "-c", script), {}, "127.0.0.1", port)
    with launch(tmp_path, cmd) as server:
        result = server.wait_ready()
    assert result.status == "crashed"
    assert result.returncode == -9, result
    assert "killed by SIGKILL" in result.reason and "None" not in result.reason
    assert result.last_line and result.last_line != "nothing"
    assert [(f.id, f.text) for f in result.findings] == [
        ("unclassified_failure", "KeyError: 'model.layers.0.mlp.gate_up_proj'")]


def test_startup_limit_is_a_timeout(tmp_path):
    limits = Limits(startup_s=1.5, stall_s=60, grace_s=5)
    with launch(tmp_path, command("hang"), limits) as server:
        result = server.wait_ready()
    assert result.status == "timeout"
    assert_torn_down(server)


def test_a_taken_port_is_refused_before_anything_starts(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LaunchError, match=f"port {port}"):
            launch(tmp_path, command("ready", port=port))
    assert not (tmp_path / "server.log").exists()


def test_sigterm_ignoring_children_are_killed(tmp_path):
    """A child that ignores TERM still goes: the group gets KILL after the grace period."""
    script = ("import signal, subprocess, sys, time\n"
              "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "subprocess.Popen([sys.executable, '-c', 'import signal,time; "
              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
              "print('started', flush=True); time.sleep(600)\n")
    cmd = ServerCommand("test", (sys.executable, "-c", script), {}, "127.0.0.1", free_port())
    with launch(tmp_path, cmd, Limits(startup_s=1, stall_s=60, grace_s=1)) as server:
        deadline = time.monotonic() + 10
        while len(group_members(server.service.pgid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(group_members(server.service.pgid)) == 2
    assert_torn_down(server)


def test_health_polling_falls_back_to_the_endpoint_the_server_has(tmp_path):
    """A server without /health_generate (404) that never logs the ready line is ready by /health."""
    script = (
        "import http.server, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200 if self.path == '/health' else 404); self.end_headers()\n"
        "    def log_message(self, *a): pass\n"
        "print('INFO:     Uvicorn running', flush=True)\n"
        "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n")
    port = free_port()
    cmd = ServerCommand("test", (sys.executable, "-c", script, str(port)), {}, "127.0.0.1", port)
    with launch(tmp_path, cmd) as server:
        result = server.wait_ready()
    assert (result.status, result.health_path) == ("ready", "/health"), result
    assert_torn_down(server)


def test_a_backend_that_cannot_host_a_server_is_a_usage_error(tmp_path):
    from envmgr.errors import UsageError

    class RunOnly(Target):  # like ansible://: runs commands, hosts no server
        url = "ansible://gpu"

    with pytest.raises(UsageError, match="cannot host a benchmark server"):
        RunningServer(RunOnly(), command("ready"), tmp_path / "server.log")


def test_venv_target_starts_the_server_with_the_venvs_environment(tmp_path):
    import subprocess

    from envmgr.targets.venv import VenvTarget

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    cmd = command("ready")
    cmd = ServerCommand("test", (str(venv / "bin" / "python"), *cmd.argv[1:]), cmd.env, cmd.host, cmd.port)
    server = RunningServer(VenvTarget(str(venv)), cmd, tmp_path / "server.log", FAST)
    with server:
        assert server.wait_ready().status == "ready"
    assert_torn_down(server)
