"""The CLI end to end: exit codes, JSON output, errors without tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from envmgr.cli import main

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"


def run(capsys, *args: str) -> tuple[int, str, str]:
    rc = main([*args])
    out, err = capsys.readouterr()
    return rc, " ".join(out.split()), " ".join(err.split())  # wrapping is layout, not content


def test_validate_cuda13_names_what_cannot_work(capsys):
    rc, out, _ = run(capsys, "validate", str(SPECS / "cuda13.yaml"))
    assert rc == 1
    # sglang 0.5.15's own gate refuses fusion on SM120 whatever flashinfer offers (read from
    # the wheel): no "upgrade flashinfer" dead end
    assert "allreduce-fusion-sglang-gate" in out and "requires SM90 or SM10X" in out
    assert "allreduce-fusion-sm12x" not in out
    assert "a2a-flashinfer-needs-dp-attention" in out
    assert "torch-symm-mem-unsupported-arch" in out
    assert "cuda13.yaml:" in out and "cuda128.yaml:" in out  # located in the file that says it
    assert "source: sglang layers/flashinfer_comm_fusion.py" in out


def test_validate_reports_torch_symm_mem_keyerror_with_fix(capsys):
    rc = main(["validate", "--json", str(SPECS / "cuda128-dead-ends.yaml")])
    out = capsys.readouterr().out
    assert rc == 1
    report = json.loads(out)
    (finding,) = [f for f in report["findings"] if f["id"] == "torch-symm-mem-keyerror"]
    assert "KeyError: 12" in finding["message"]
    assert "drop --enable-torch-symm-mem" in finding["fix"]
    assert finding["configs"] == ["torch_symm_mem"]
    assert finding["where"].endswith("cuda128-dead-ends.yaml:18")


def test_validate_working_stack_exits_zero(capsys):
    rc = main(["validate", "--json", str(SPECS / "cuda128.yaml")])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert rc == 0 and report["ok"] is True
    assert {f["severity"] for f in report["findings"]} <= {"warning", "info"}


def test_plan_between_specs_exits_2_with_changes(capsys):
    rc, out, _ = run(capsys, "plan", str(SPECS / "cuda13.yaml"), "--from", str(SPECS / "cuda128.yaml"))
    assert rc == 2
    # the spec builds a venv: the driver and the apt toolkit are the host's, listed as prerequisites
    steps, _, prerequisites = out.partition("host prerequisites")
    assert "package.upgrade" in steps and "driver." not in steps and "toolkit.add" not in steps
    assert "venv:// builds no host" in prerequisites
    assert "driver.upgrade nvidia-driver: ==570.124.06 -> ==580.95.05" in " ".join(prerequisites.split())
    assert "toolkit.add" in prerequisites
    # built by a fleet rollout, the same upgrade changes the host itself
    rc, out, _ = run(capsys, "plan", str(SPECS / "cuda13.yaml"), "--from", str(SPECS / "cuda128.yaml"), "--json")
    doc = json.loads(out)
    assert doc["builder"] == "venv" and {a["kind"] for a in doc["host_prerequisites"]} >= {"driver.upgrade", "toolkit.add"}
    # the steps apply would execute, as the venv builder lists them: none for the host
    from envmgr.builders.venv import find_interpreter

    provision = [] if find_interpreter("3.12") else ["python"]  # uv installs a Python 3.12 this host lacks
    steps = [s["step"] for s in doc["steps"]]
    assert steps == [*provision, "resolve", "venv", "install", "env"]
    install = doc["steps"][steps.index("install")]["summary"]
    assert "flashinfer-python ==0.6.3 -> ==0.6.12" in install
    assert "+sglang-kernel ==0.4.4" in install and "-sgl-kernel" in install


def test_plan_without_changes_exits_0(capsys):
    spec = str(SPECS / "cuda13.yaml")
    rc, out, _ = run(capsys, "plan", spec, "--from", spec, "--json")
    assert rc == 0
    assert json.loads(out)["changes"] == 0


def test_plan_from_recorded_facts(capsys, tmp_path):
    facts = tmp_path / "host.json"
    facts.write_text(json.dumps({"driver_version": "570.124.06", "python": {
        "executable": "/usr/bin/python3", "version": "3.11.2", "packages": {"nvidia-cuda-nvcc": "13.0.88"}}}))
    rc, out, _ = run(capsys, "plan", str(SPECS / "demo-cpu.yaml"), "--facts", str(facts), "--json")
    report = json.loads(out)
    assert rc == 2
    assert {a["kind"] for a in report["actions"]} == {"toolkit.add", "toolkit.select", "package.install",
                                                      "env.set"}
    assert "nvidia-cuda-nvcc" not in {a["target"] for a in report["actions"]}  # already there


def test_bad_facts_file_is_a_clear_error(capsys, tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    rc, _, err = run(capsys, "plan", str(SPECS / "demo-cpu.yaml"), "--facts", str(bad))
    assert rc == 1 and "envmgr facts --json" in err and "Traceback" not in err


def test_schema_is_json_schema_with_every_section(capsys):
    rc, out, _ = run(capsys, "schema")
    schema = json.loads(out)
    assert rc == 0
    assert schema["$schema"].endswith("2020-12/schema")
    assert {"apiVersion", "extends", "hardware", "driver", "cuda", "python", "env", "realize",
            "probes", "benchmarks"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False


def test_shipped_schema_is_the_one_the_models_generate():
    from envmgr.spec.schema import json_schema, render, shipped_schema_text

    # if this fails, the models changed: python -m envmgr.spec.schema --write
    assert shipped_schema_text() == render(json_schema())


def test_invalid_spec_prints_location_not_traceback(capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: envmgr/v1\nmetadata: {name: x}\nhardware:\n  gpu: {arch: sm_120, cont: 8}\n")
    rc, out, err = run(capsys, "validate", str(bad))
    assert rc == 1
    assert f"{bad}:4: hardware.gpu.cont: unknown key 'cont'" in err
    assert "did you mean 'count'?" in err
    assert "Traceback" not in err + out


def test_missing_spec_file(capsys, tmp_path):
    rc, _, err = run(capsys, "validate", str(tmp_path / "nope.yaml"))
    assert rc == 1 and "file not found" in err


def test_debug_shows_the_exception(tmp_path):
    from envmgr.errors import SpecError

    with pytest.raises(SpecError):
        main(["--debug", "validate", str(tmp_path / "nope.yaml")])


def test_usage_error_exit_code(capsys):
    """64 (EX_USAGE): never 2, which plan says "changes" with and status "drift" (issue 29)."""
    rc, _, err = run(capsys, "plan")
    assert rc == 64 and "usage: envmgr plan" in err and "SPEC" in err
    rc, _, err = run(capsys, "validate", "--no-such-option", str(SPECS / "cuda13.yaml"))
    assert rc == 64 and "--no-such-option" in err
    rc, _, err = run(capsys)
    assert rc == 64 and "validate" in err  # no command: the list of commands


def test_facts_json_is_a_facts_document(capsys):
    from envmgr.facts.model import Facts

    rc, out, _ = run(capsys, "facts", "--json")
    assert rc == 0
    facts = Facts.model_validate_json(out)
    assert facts.python is not None and facts.python.version.startswith("3.")


def test_console_script_runs():
    """The installed entry point, as a user runs it."""
    proc = subprocess.run([sys.executable, "-m", "envmgr", "--version"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("envmgr ")


def test_apply_with_local_backend_is_a_usage_error(capsys, tmp_path):
    rc, _, err = run(capsys, "apply", str(SPECS / "demo-cpu.yaml"), "--backend", "local://", "--yes",
                     "--home", str(tmp_path))
    assert rc == 1 and "local:// cannot build an environment" in err


def test_unknown_backend_scheme(capsys, tmp_path):
    rc, _, err = run(capsys, "apply", str(SPECS / "demo-cpu.yaml"), "--backend", "conda://x", "--yes",
                     "--home", str(tmp_path))
    assert rc == 1 and "not an environment URL" in err


def test_report_from_recorded_results_writes_html_png_json(capsys, tmp_path):
    results = ROOT / "tests" / "fixtures" / "bench" / "results"
    rc, out, _ = run(capsys, "report", "--results", str(results), "--out", str(tmp_path / "r"))
    assert rc == 0
    assert "89.5 tok/s" in out and "crashed: kv_pool_oom" in out
    assert "raise --mem-fraction-static from 0.7787 to 0.92" in out
    for name in ("report.html", "throughput.png", "report.json"):
        assert (tmp_path / "r" / name).stat().st_size > 0


def test_report_without_results_says_what_to_do(capsys, tmp_path):
    rc, _, err = run(capsys, "report", "--home", str(tmp_path / "empty"), "--out", str(tmp_path / "r"))
    assert rc == 1
    assert "no benchmark results" in err and "envmgr bench SPEC" in err


def test_bench_without_a_current_generation_is_a_usage_error(capsys, tmp_path):
    rc, _, err = run(capsys, "bench", str(SPECS / "cuda128.yaml"), "--home", str(tmp_path), "--dry-run")
    assert rc == 1
    assert "no current generation" in err and "--env" in err
    assert "Traceback" not in err


def test_bench_dry_run_on_a_url_target_shows_the_scenario_commands(capsys, tmp_path):
    rc, out, _ = run(capsys, "bench", str(SPECS / "cuda13.yaml"), "--env", "venv:///opt/envs/cuda13",
                     "--home", str(tmp_path), "--dry-run")
    assert rc == 1  # cuda13's EP config lacks --enable-dp-attention for sglang 0.5.15: not launched
    assert "/opt/envs/cuda13/bin/python -m sglang.launch_server --model-path /models/Kimi-K2.5-INT4" in out
    assert "a2a-flashinfer-needs-dp-attention" in out and "would be skipped" in out
    assert "--dataset-name random-ids" in out
    # each cell says what validate expects of it (issue 26: the three outcomes)
    assert "x torch_symm_mem would launch; expected: runs without torch symmetric memory" in out
    assert "x allreduce_fusion would be skipped; expected: blocked (allreduce-fusion-sglang-gate)" in out
    assert "x baseline would launch; expected: runs" in out


def test_every_cmd_function_is_a_registered_command():
    import envmgr.cli as cli

    defined = sorted(name.removeprefix("cmd_") for name in dir(cli) if name.startswith("cmd_"))
    assert sorted(name for name, _, _ in cli.COMMANDS) == defined
    assert "advise" in defined


def test_every_command_says_its_exit_codes_and_a_whole_summary(capsys):
    import envmgr.cli as cli

    assert sorted(cli.EXIT_CODES) == sorted(name for name, _, _ in cli.COMMANDS)
    for name, _, _ in cli.COMMANDS:
        assert main([name, "--help"]) == 0
        out, _ = capsys.readouterr()
        assert "exit codes: " + " ".join(cli.EXIT_CODES[name].split()) in " ".join(out.split()), name
    assert main(["--help"]) == 0
    listing = " ".join(capsys.readouterr()[0].split())
    # a summary is the docstring's whole first paragraph, not its first line
    assert "lock: exit 0 as locked, 2 on drift, 1 when its environment is missing." in listing
    assert "{" not in listing and "<list" not in listing  # metavars read as words


@pytest.mark.parametrize("args", [
    ("validate", "no-such-spec.yaml", "--json"),
    ("status", "--home", "/nonexistent/envmgr-home", "--json"),
    ("env", "--env", "nope", "--json"),
    ("rollback", "--home", "/nonexistent/envmgr-home", "--json"),
])
def test_json_commands_print_a_json_error_with_the_same_exit_code(capsys, args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert rc == 1 and doc["exit_code"] == 1
    assert doc["error"]["type"] in {"SpecError", "UsageError", "StateError"} and doc["error"]["message"]
    assert "error:" in err  # people still read it on stderr


def test_a_rejected_command_line_is_a_json_error_too(capsys):
    rc = main(["plan", "--json", "--no-such-option", str(SPECS / "cuda13.yaml")])
    out, err = capsys.readouterr()
    assert rc == 64 and json.loads(out)["error"]["type"] == "UsageError"
    assert json.loads(out)["exit_code"] == 64 and "unrecognized arguments" in err  # not plan's "changes"


def test_rollback_reports_in_json(capsys, tmp_path):
    from envmgr.state import Store

    store = Store(tmp_path / "home")
    with store.locked():
        for _ in range(2):
            gen = store.commit(store.begin(), {"spec_name": "s", "spec_digest": "d", "backend": "local://",
                                               "backend_kind": "local"})
            store.record_gate(gen, [], [])
        store.switch(2)
    rc = main(["rollback", "--home", str(store.home), "--json"])
    assert rc == 0 and json.loads(capsys.readouterr()[0]) == {
        "current": 1, "spec": "s", "backend": "local://", "previous": 2, "forced": False}


def test_declining_the_prompt_applies_nothing_and_exits_1(capsys, tmp_path, monkeypatch):
    import io

    spec = tmp_path / "s.yaml"
    spec.write_text("apiVersion: envmgr/v1\nmetadata: {name: s}\nhardware: {gpu: {arch: sm_90}}\n"
                    f"python: {{version: '{sys.version_info.major}.{sys.version_info.minor}', packages: {{six: '1.16.0'}}}}\n")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    rc = main(["apply", str(spec), "--home", str(tmp_path / "home")])
    out, err = capsys.readouterr()
    assert rc == 1 and "nothing applied: declined at the prompt" in out
    assert "[1/4] resolve 1 package pins" in " ".join(err.split())  # the steps were shown before asking
    assert not any((tmp_path / "home" / "generations").iterdir())


@pytest.mark.parametrize("argv", [["validate", str(SPECS / "cuda13.yaml")], ["schema"]])
def test_a_reader_that_goes_away_ends_envmgr_quietly_like_a_unix_tool(argv):
    """`envmgr validate ... | head -1` (issue 29): no "error: Broken pipe", and exit 128+SIGPIPE
    as `yes | head -1` has it, not 1 (which reads as "has errors")."""
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "envmgr", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # before envmgr has written anything: its first write meets no reader
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGPIPE
    assert err == b""


def test_progress_options_go_before_or_after_the_command(capsys):
    """Issue 29: `envmgr -q plan ...` as `envmgr plan -q ...`; -q with -v refused wherever each is."""
    from envmgr.cli import build_parser

    parser = build_parser()
    for argv in (["-q", "validate", "x.yaml"], ["validate", "-q", "x.yaml"]):
        args = parser.parse_args(argv)
        assert (args.quiet, args.verbose) == (True, False), argv
    assert build_parser().parse_args(["validate", "x.yaml"]).quiet is False
    assert main(["-q", "validate", str(SPECS / "cuda128.yaml"), "-v"]) == 64
    assert "not allowed with argument -q/--quiet" in capsys.readouterr().err


def test_a_misspelt_option_gets_a_did_you_mean_from_its_command(capsys):
    assert main(["plan", str(SPECS / "cuda13.yaml"), "--form", str(SPECS / "cuda128.yaml")]) == 64
    err = capsys.readouterr().err
    assert "usage: envmgr plan" in err and "did you mean --from for --form?" in err
