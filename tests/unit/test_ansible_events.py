"""Runner events -> progress lines, per-host results, command results and the rollout error,
on events recorded from a real run (tests/fixtures/ansible) and on small hand-made ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envmgr.ansible.events import (
    HostResult,
    RunReport,
    host_results,
    progress_line,
    result_message,
    rollout_failed,
    task_name,
)
from envmgr.errors import BackendError, CommandNotFound, CommandTimeout, RolloutFailed
from envmgr.targets.hosts import command_results

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ansible"
BROKEN_TASK = "python_env : python | create the venv with python3.11"


@pytest.fixture(scope="module")
def rollout_events() -> list[dict]:
    return json.loads((FIXTURES / "rollout_failed_events.json").read_text(encoding="utf-8"))


def test_recorded_rollout_names_the_failing_host_and_task(rollout_events):
    results = host_results(rollout_events, ["h1", "h2", "h3"])
    assert list(results) == ["h1", "h2", "h3"]
    h1, h2, h3 = results.values()
    assert (h1.state, h2.state, h3.state) == ("changed", "failed", "not run")
    assert h2.failed_task == BROKEN_TASK
    assert "No module named venv" in h2.message
    assert h1.failed_task is None and h1.failures == 0 and h1.changed == len(h1.changed_tasks) > 0
    assert (h3.ok, h3.changed, h3.failures) == (0, 0, 0)


def test_recorded_rollout_keeps_the_skip_reasons(rollout_events):
    h1 = host_results(rollout_events, ["h1", "h2", "h3"])["h1"]
    reasons = " ".join(h1.skip_reasons)
    for step in ("installing nvidia-open", "holding the driver packages", "DKMS", "reboot"):
        assert "skipped on a container: " in reasons and step in reasons


def test_progress_is_one_line_per_task_start_and_host_result(rollout_events):
    lines = [line for line in map(progress_line, rollout_events) if line is not None]
    starts = sum(e["event"] == "playbook_on_task_start" for e in rollout_events)
    results = sum(e["event"].startswith("runner_on_") for e in rollout_events)
    plays = sum(e["event"] == "playbook_on_play_start" for e in rollout_events)
    assert len(lines) == starts + results + plays
    assert f"TASK {BROKEN_TASK}" in lines
    assert any(line.startswith("  h2: FAILED: ") and "No module named venv" in line for line in lines)
    assert all("\n" not in line for line in lines)


def test_rollout_failed_message(rollout_events):
    report = RunReport("failed", 2, host_results(rollout_events, ["h1", "h2", "h3"]))
    error = rollout_failed(report)
    assert isinstance(error, RolloutFailed) and isinstance(error, BackendError)
    text = str(error)
    assert text.startswith(f"the rollout stopped: h2 at task '{BROKEN_TASK}'")
    assert "not touched: h3" in text and "h1: changed" in text
    assert error.report is report and "fix h2" in error.hint


def test_stats_alone_give_states():
    events = [{"event": "playbook_on_stats", "event_data": {
        "ok": {"a": 5, "b": 3}, "changed": {"a": 2}, "failures": {}, "dark": {"b": 1}, "skipped": {"a": 1}}}]
    results = host_results(events, ["a", "b", "c"])
    assert [r.state for r in results.values()] == ["changed", "unreachable", "not run"]
    assert (results["a"].ok, results["a"].changed, results["a"].skipped) == (5, 2, 1)


def test_ignored_failures_do_not_fail_the_host():
    events = [
        {"event": "runner_on_failed", "event_data": {"host": "a", "task": "t", "ignore_errors": True,
                                                     "res": {"msg": "boom"}}},
        {"event": "playbook_on_stats", "event_data": {"ok": {"a": 1}}},
    ]
    result = host_results(events, ["a"])["a"]
    assert (result.state, result.failed_task) == ("ok", None)
    assert progress_line(events[0]) == "  a: failed (ignored)"


def test_check_mode_changes_and_diffs():
    events = [
        {"event": "runner_on_ok", "event_data": {"host": "a", "task": "pin", "role": "nvidia_driver", "res": {
            "changed": True, "diff": [{"before": "", "after": "Pin: version 580.*\n",
                                       "after_header": "/etc/apt/preferences.d/x"}]}}},
        {"event": "playbook_on_stats", "event_data": {"ok": {"a": 1}, "changed": {"a": 1}}},
    ]
    report = RunReport("successful", 0, host_results(events, ["a"]))
    assert report.changed_hosts[0].changed_tasks == ["nvidia_driver : pin"]
    assert report.changed_hosts[0].diffs == [{"task": "nvidia_driver : pin", "before": "",
                                              "after": "Pin: version 580.*\n",
                                              "after_header": "/etc/apt/preferences.d/x"}]
    assert report.changes_text() == "a: 1 change(s)\n  ~ nvidia_driver : pin"
    assert RunReport("successful", 0, {"a": HostResult("a", "ok")}).changes_text() == "a: no changes"


def test_task_name_and_result_message():
    assert task_name({"task": "x", "role": "r"}) == "r : x"
    assert task_name({"task": "x"}) == "x"
    assert result_message({"msg": "non-zero return code", "stderr": "E: no venv"}) == "non-zero return code: E: no venv"
    assert result_message({"msg": "One or more items failed", "results": [
        {"failed": True, "msg": "Specified path /usr/local/cuda-13.0 does not exist"}]}) == (
        "One or more items failed: Specified path /usr/local/cuda-13.0 does not exist")
    assert result_message({}) == "failed (no message)"


def ok(host: str, res: dict) -> dict:
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": "envmgr | command", "res": res}}


def test_a_command_that_runs_and_fails_is_a_result():
    res = {"rc": 2, "stdout": "", "stderr": "usage: ...", "msg": "non-zero return code", "delta": "0:00:00.01",
           "failed_when_result": False, "failed_when_suppressed_exception": "(traceback unavailable)"}
    assert command_results([ok("a", res)], ["a"], ["ls", "-Z"], 0.1)["a"].returncode == 2


def test_command_results_in_inventory_order():
    events = [ok("b", {"rc": 1, "stdout": "B", "stderr": "e"}), ok("a", {"rc": 0, "stdout": "A", "stderr": ""})]
    results = command_results(events, ["a", "b"], ["true"], 1.5)
    assert list(results) == ["a", "b"]
    assert (results["a"].returncode, results["a"].stdout) == (0, "A")
    assert (results["b"].returncode, results["b"].stderr, results["b"].argv) == (1, "e", ("true",))


@pytest.mark.parametrize("res, error", [
    ({"rc": 2, "msg": "[Errno 2] No such file or directory: b'nvcc'"}, CommandNotFound),
    # ansible-core 2.19, recorded: failed_when: false hides the exception but marks it
    ({"rc": 2, "stdout": "", "stderr": "", "cmd": "nvcc", "msg": "Error executing command.",
      "failed_when_result": False, "failed_when_suppressed_exception": "(traceback unavailable)"},
     CommandNotFound),
    ({"rc": 13, "msg": "Error executing command.", "failed_when_suppressed_exception": "x"}, BackendError),
    ({"msg": "The command action failed to execute in the expected time frame (5) and was terminated"},
     CommandTimeout),
    ({"msg": "module failure"}, BackendError),
])
def test_command_failures_become_backend_errors(res, error):
    with pytest.raises(error):
        command_results([ok("a", res)], ["a"], ["nvcc"], 0.1)


def test_command_on_an_unreachable_or_silent_host():
    unreachable = {"event": "runner_on_unreachable", "event_data": {"host": "a", "res": {"msg": "no route"}}}
    with pytest.raises(BackendError, match="a is unreachable: no route"):
        command_results([unreachable], ["a"], ["true"], 0.1)
    with pytest.raises(BackendError, match="no result from b"):
        command_results([ok("a", {"rc": 0})], ["a", "b"], ["true"], 0.1)


def probe_events(role_task: str, host: str, res: dict, kind: str = "runner_on_ok") -> dict:
    role, _, task = role_task.partition(" : ")
    return {"event": kind, "event_data": {"host": host, "role": role, "task": task, "res": res}}


def test_probe_results_are_taken_from_the_drivers_output(tmp_path):
    from envmgr.ansible.probes import PROBE_TASK, probe_outputs, save_probe_outputs
    from envmgr.probes.contract import MARKER

    line = MARKER + json.dumps({"probe": "gpu", "status": "skip", "summary": "no GPU", "details": {}})
    runs = [{"probe": "gpu", "rc": 0, "stdout": "noise\n" + line, "stderr": "", "wall_s": 0.2},
            {"probe": "torch_cuda", "rc": -11, "stdout": "", "stderr": "Segmentation fault"},
            {"probe": "nccl_allreduce", "rc": -9, "stdout": "", "stderr": "", "wall_s": 600.1,
             "timed_out": True, "timeout_s": 600}]
    events = [probe_events(PROBE_TASK, "h1", {"rc": 0, "stdout": json.dumps(runs), "stderr": ""}),
              probe_events(PROBE_TASK, "h2", {}, kind="runner_on_skipped")]
    report = RunReport("successful", 0, {}, probe=probe_outputs(events))
    assert [(r["probe"], r["status"]) for r in report.probe["h1"]] == [
        ("gpu", "skip"), ("torch_cuda", "error"), ("nccl_allreduce", "error")]
    assert "Segmentation fault" in report.probe["h1"][1]["summary"]
    assert report.probe["h1"][2]["summary"] == "timed out after 600s; its processes were killed"
    assert report.probe["h1"][0]["wall_s"] == 0.2
    assert list(report.probe) == ["h1"]
    assert save_probe_outputs(report, tmp_path / "probe") == [str(tmp_path / "probe" / "h1.probes.json")]
    saved = json.loads((tmp_path / "probe" / "h1.probes.json").read_text())
    assert saved[0]["summary"] == "no GPU"


def test_a_driver_that_did_not_print_its_runs_is_one_error():
    from envmgr.ansible.probes import PROBE_TASK, probe_outputs

    events = [probe_events(PROBE_TASK, "h1", {"rc": 2, "stdout": "", "msg": "[Errno 2] No such file",
                                              "stderr": ""})]
    (result,) = probe_outputs(events)["h1"]
    assert result["status"] == "error" and "No such file" in result["summary"]


def test_a_hosts_record_of_this_environment_is_reused_and_only_that():
    import base64

    from envmgr.ansible.probes import PROBE_RECORD_TASK, PROBE_TASK, probe_outputs_and_reused
    from envmgr.probes.contract import MARKER

    line = MARKER + json.dumps({"probe": "gpu", "status": "pass", "summary": "8 GPUs", "details": {}})
    run = {"probe": "gpu", "rc": 0, "stdout": line, "stderr": ""}

    def slurped(host: str, record: object) -> dict:
        content = base64.b64encode(json.dumps(record).encode()).decode()
        return probe_events(PROBE_RECORD_TASK, host, {"content": content, "encoding": "base64"})

    events = [
        slurped("h1", {"key": "k1", "runs": [run]}),       # this environment's: reused
        slurped("h2", {"key": "old", "runs": [run]}),      # another environment's: ignored
        probe_events(PROBE_RECORD_TASK, "h3", {"msg": "file not found"}),  # none yet
        probe_events(PROBE_RECORD_TASK, "h4", {"content": "bm90IGpzb24=", "encoding": "base64"}),  # garbage
        slurped("h5", {"key": "k1", "runs": [run]}),       # recorded, but probed again (probe=always)
        probe_events(PROBE_TASK, "h5", {"rc": 0, "stdout": json.dumps([run])}),
    ]
    outputs, reused = probe_outputs_and_reused(events, "k1")
    assert sorted(outputs) == ["h1", "h5"] and reused == ["h1"]
    assert outputs["h1"][0]["summary"] == "8 GPUs"
    assert probe_outputs_and_reused(events, None) == ({"h5": outputs["h5"]}, [])  # no key: nothing is reused


def test_probe_scripts_are_assembled_for_the_hosts(tmp_path):
    from envmgr.ansible.probes import prepare_probes
    from envmgr.probes.contract import MARKER
    from envmgr.spec import Spec

    spec = Spec.model_validate({"apiVersion": "envmgr/v1", "metadata": {"name": "x"},
                                "hardware": {"gpu": {"arch": "sm_120", "count": 2}},
                                "env": {"NCCL_NVLS_ENABLE": "0"}})  # a site's policy, in its spec
    probes = prepare_probes(spec, tmp_path / "probes")
    assert "gpu" in probes["ids"] and "comm_bench" not in probes["ids"]  # the default set
    assert probes["args"]["toolchain_arch"] == {"archs": ["sm_120"]}
    assert probes["args"]["nccl_allreduce"]["world_size"] == 2
    text = (tmp_path / "probes" / "nccl_allreduce.py").read_text()
    assert "def run_workers" in text and MARKER in text  # shared library and wrapper included
    # the batch the driver gets on stdin: each assembled source with its args, timeout, env
    batch = json.loads((tmp_path / "probes" / "probes.json").read_text())
    assert [p["id"] for p in batch["probes"]] == probes["ids"]
    assert batch["probes"][probes["ids"].index("nccl_allreduce")]["source"] == text
    assert batch["probes"][0]["timeout_s"] == 60
    assert batch["env"] == {"PYTHONUNBUFFERED": "1", "NCCL_NVLS_ENABLE": "0"}  # the spec's env, nothing forced
    assert "def run_one" in (tmp_path / "probes" / "run_probes.py").read_text()
    # the digest follows what the hosts would run
    other = spec.model_copy(update={"hardware": spec.hardware.model_copy(update={
        "gpu": spec.hardware.gpu.model_copy(update={"count": 4})})})
    assert prepare_probes(spec, tmp_path / "again")["digest"] == probes["digest"]
    assert prepare_probes(other, tmp_path / "other")["digest"] != probes["digest"]

