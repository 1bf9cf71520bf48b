"""``envmgr bench`` end to end against the SGLang TEST DOUBLE: two generations x the scenario's
configs, real processes, real HTTP load through the bench_serving double, results recorded,
resumed after an interruption, and reported."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ports import free_port

from envmgr.bench.collect import results_in_store
from envmgr.bench.matrix import prepare, run_matrix
from envmgr.bench.results import read_result
from envmgr.spec import load_spec
from envmgr.state import Store

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = ROOT / "tests" / "doubles" / "sglang_double"
BENCH = ROOT / "tests" / "fixtures" / "bench" / "double-bench.yaml"


def make_generation(store: Store, spec_file: Path, sglang: str) -> int:
    """A complete generation whose environment is this host (local://), as apply records one."""
    with store.locked():
        path = store.begin()
        merged = load_spec(spec_file).spec.model_dump(mode="json", exclude={"extends"}, exclude_none=True)
        (path / "spec.yaml").write_text(yaml.safe_dump(merged, sort_keys=False))
        (path / "lock.txt").write_text(f"sglang=={sglang} \\\n    --hash=sha256:{'0' * 64}\n")
        gen = store.commit(path, {"spec_name": "double", "backend": "local://", "backend_kind": "local"})
        store.switch(gen.number)
    return gen.number


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(DOUBLE))  # `python3 -m sglang...` resolves to the double
    monkeypatch.setenv("SGLANG_DOUBLE_DELAY", "0.01")
    spec = tmp_path / "bench.yaml"
    spec.write_text(yaml.safe_dump({
        "apiVersion": "envmgr/v1", "extends": str(BENCH), "metadata": {"name": "double-bench"},
        "benchmarks": {"server_flags": {"--port": free_port()}}}))
    # The generations' own specs: their stacks give the versions the flags are checked against.
    home = tmp_path / "home"
    store = Store(home)
    old = make_generation(store, ROOT / "specs" / "cuda128.yaml", "0.5.9")
    new = make_generation(store, ROOT / "specs" / "cuda13.yaml", "0.5.15")
    return spec, home, store, old, new


@pytest.mark.slow  # about 20 s: a whole matrix with load, resumed and reported
def test_matrix_runs_records_resumes_and_reports(setup, tmp_path):
    spec, home, store, gen, new = setup
    configs = ["baseline", "ep_flashinfer_a2a", "ep_mem092", "eagle3_hang", "typo"]
    envs = [str(gen), str(new)]
    cells = prepare(spec, configs, envs, home)
    lines: list[str] = []
    run = run_matrix(cells, progress=lines.append)
    assert len(run.results) == 2 * len(configs)
    by_config = {r.config: r for r in run.results if r.env.generation == gen}
    on_new = {r.config: r for r in run.results if r.env.generation == new}

    assert by_config["baseline"].outcome == "ok", by_config["baseline"]
    assert by_config["baseline"].load.completed == 8
    assert by_config["baseline"].load.output_throughput > 0
    assert by_config["ep_flashinfer_a2a"].outcome == "crashed"
    assert by_config["ep_flashinfer_a2a"].findings[0].id == "kv_pool_oom"
    assert by_config["ep_flashinfer_a2a"].verdict_after_line_s < 5  # decided by its log line
    # the evidence travels with it: the log's last lines (not our health polls), and where the log is
    crashed = by_config["ep_flashinfer_a2a"]
    assert crashed.log_tail and not any("GET /health" in line for line in crashed.log_tail)
    logged = [line for line in (store.get(gen).path / "bench" / "ep_flashinfer_a2a" / "server.log").read_text()
              .splitlines() if line.strip() and "GET /health" not in line]
    assert list(crashed.log_tail) == logged[-len(crashed.log_tail):] and len(crashed.log_tail) <= 8
    assert any(line.startswith("  crashed: see ") and line.endswith("ep_flashinfer_a2a/server.log; its last lines:")
               for line in lines)
    assert by_config["baseline"].log_tail == ()  # an ok cell carries none
    # a warm-up run, then the spec's two measured runs: the number is their median, with a spread
    baseline = by_config["baseline"]
    assert baseline.warmup and len(baseline.runs) == 2 and baseline.spread is not None
    assert baseline.load in baseline.runs and "median of 2 runs after a warm-up" in baseline.summary
    assert {p.name for p in (store.get(gen).path / "bench" / "baseline").glob("load-*.log")} == {
        "load-warmup.log", "load-run1.log", "load-run2.log"}
    assert any("warm-up (not counted)" in line for line in lines) and any("run 2/2" in line for line in lines)
    assert "0.92" in by_config["ep_flashinfer_a2a"].summary
    assert by_config["ep_mem092"].outcome == "ok", by_config["ep_mem092"]
    assert by_config["eagle3_hang"].outcome == "hung"
    assert by_config["typo"].outcome == "skipped"
    assert "--moe-a2a-backend" in by_config["typo"].summary  # did you mean
    assert any("Load weight end" in line for line in lines)  # progress shows the server's milestones
    # what served it is recorded from the server itself, not from the spec
    served = by_config["baseline"].served_by
    assert served.test_double and served.server_version == "0.5.9" and served.host
    assert by_config["baseline"].load_params["num_prompts"] == 8
    assert by_config["typo"].served_by is None  # never launched
    # the three outcomes (issue 26): what validate expected before each launch, beside what happened
    assert by_config["baseline"].expected.label == by_config["baseline"].measured.label == "runs"
    a2a = by_config["ep_flashinfer_a2a"]
    assert a2a.expected.because == "blocked (a2a-flashinfer-expert-location-assert)"
    assert a2a.measured.state == "blocked" and a2a.measured.why == ("kv_pool_oom",)
    assert (by_config["typo"].expected.state, by_config["typo"].measured.state) == ("blocked", "blocked")
    # the double serves the 0.92 launch, where 0.5.9's model path would stop: a surprise, said so
    assert (by_config["ep_mem092"].expected.state, by_config["ep_mem092"].measured.state) == ("blocked", "runs")
    assert any(line.startswith(f"=> gen {gen} ") and "ep_mem092: ok:" in line and line.endswith(
        "(validate expected: blocked (a2a-flashinfer-expert-location-assert))") for line in lines)

    # sglang 0.5.15 (cuda13.yaml) also wants --enable-dp-attention for FlashInfer A2A: not launched.
    assert on_new["baseline"].outcome == "ok"
    assert on_new["baseline"].env.versions["sglang"] == "0.5.15"
    assert on_new["ep_flashinfer_a2a"].outcome == "skipped"
    assert on_new["ep_flashinfer_a2a"].findings[0].id == "a2a-flashinfer-needs-dp-attention"

    # Recorded beside the generation; a second run reuses every cell.
    cell_dir = store.get(gen).path / "bench" / "baseline"
    assert read_result(cell_dir).outcome == "ok"
    assert "fired up" in (cell_dir / "server.log").read_text()
    again = run_matrix(prepare(spec, configs, envs, home), progress=lines.append)
    assert len(again.reused) == 2 * len(configs)

    # An interrupted cell (no result.json) is the only one run again.
    (store.get(gen).path / "bench" / "ep_mem092" / "result.json").unlink()
    resumed = run_matrix(prepare(spec, configs, envs, home), progress=lines.append)
    assert len(resumed.reused) == 2 * len(configs) - 1

    # A changed load is a different measurement: every cell that ran a load runs again.
    spec_data = yaml.safe_load(spec.read_text())
    spec_data["benchmarks"]["load"] = {"num_prompts": 4}
    spec.write_text(yaml.safe_dump(spec_data))
    changed = run_matrix(prepare(spec, ["baseline"], [str(gen)], home), progress=lines.append)
    assert changed.reused == [] and changed.results[0].load.completed == 4

    recorded = results_in_store(home)
    assert len(recorded) == 2 * len(configs)

    from envmgr.report.bench import write_report

    written = write_report(recorded, tmp_path / "report")
    html = written["html"].read_text() if "html" in written else (tmp_path / "report" / "report.html").read_text()
    assert "kv_pool_oom" in html and "a2a-flashinfer-needs-dp-attention" in html
    # where the outcome is not validate's: the double's served 0.92 launch, and the hangs nobody predicts
    from envmgr.report.bench import comparison

    surprises = {(c.env, c.config) for row in comparison(recorded).rows for c in row.cells if c and c.surprise}
    labels = {r.env.generation: r.env.label for r in run.results}
    assert surprises == {(labels[gen], "ep_mem092"), (labels[gen], "eagle3_hang"), (labels[new], "eagle3_hang")}
    assert html.count('class="surprise"') == 3 and "blocked (a2a-flashinfer-expert-location-assert)" in html
    assert "TEST DOUBLE" in html and "load: 4 random-ids prompts" in html


def test_interrupt_stops_the_server_and_leaves_the_cell_to_redo(setup):
    spec, home, store, gen, _ = setup
    cells = prepare(spec, ["baseline"], [str(gen)], home)

    def interrupt_when_ready(line: str) -> None:
        if "server ready" in line:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_matrix(cells, progress=interrupt_when_ready)
    cell_dir = store.get(gen).path / "bench" / "baseline"
    assert (cell_dir / "server.log").is_file() and read_result(cell_dir) is None
    port = cells[0].command.port
    with socket.socket() as s:  # the server is gone: nothing answers on its port
        assert s.connect_ex(("127.0.0.1", port)) != 0
    resumed = run_matrix(prepare(spec, ["baseline"], [str(gen)], home))
    assert resumed.reused == [] and resumed.results[0].outcome == "ok"


def test_cli_dry_run_shows_commands_and_blocks_the_typo(setup):
    import subprocess

    spec, home, store, gen, _ = setup
    out = subprocess.run([sys.executable, "-m", "envmgr", "bench", str(spec), "--env", str(gen),
                          "--home", str(home), "--dry-run", "--json"], capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    cells = {c["config"]: c for c in json.loads(out.stdout)}
    assert cells["typo"]["would_launch"] is False
    assert cells["baseline"]["would_launch"] is True
    assert cells["ep_flashinfer_a2a"]["argv"][-4:] == ["--moe-a2a-backend", "flashinfer",
                                                      "--moe-runner-backend", "flashinfer_cutlass"]
    assert not (store.get(gen).path / "bench").exists()  # a dry run launches and records nothing
    only = subprocess.run([sys.executable, "-m", "envmgr", "bench", str(spec), "--env", str(gen), "--home", str(home),
                           "--config", "baseline", "--dry-run"], capture_output=True, text=True)
    assert only.returncode == 0, only.stderr  # nothing blocked: every cell would launch


def test_a_secret_in_the_bench_spec_is_not_recorded_and_resuming_still_works(setup, tmp_path):
    """Issue 12: the server gets HF_TOKEN through its environment; result.json, server.log and
    load.log never hold it, and the redacted record still counts as the same run."""
    spec, home, store, gen, _ = setup
    token = "hf_BeNcHsEcReT0123456789abcdefghij"
    data = yaml.safe_load(spec.read_text())
    data["env"] = {"HF_TOKEN": token}
    spec.write_text(yaml.safe_dump(data))
    cells = prepare(spec, ["baseline"], [str(gen)], home)
    assert cells[0].command.env["HF_TOKEN"] == token  # what the server process gets
    run = run_matrix(cells)
    assert run.results[0].outcome == "ok", run.results[0]
    files = [p for p in cells[0].dir.rglob("*") if p.is_file()]
    assert files and not [p for p in files if token.encode() in p.read_bytes()]
    assert json.loads((cells[0].dir / "result.json").read_text())["server_env"]["HF_TOKEN"] == "<redacted>"
    again = run_matrix(prepare(spec, ["baseline"], [str(gen)], home))
    assert again.reused == [f"{cells[0].env.info.label} x baseline"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_ctrl_c_or_a_signal_on_the_cli_stops_the_server_and_a_rerun_resumes(setup, tmp_path, signum):
    """Ctrl-C, and SIGTERM/SIGHUP the same way (issue 12): server stopped, nothing recorded."""
    import os
    import subprocess
    import time

    spec, home, store, gen, _ = setup
    env = {**os.environ, "SGLANG_DOUBLE_DELAY": "0.01", "SGLANG_DOUBLE_TOKEN_S": "0.05"}  # a slow load
    proc = subprocess.Popen([sys.executable, "-m", "envmgr", "bench", str(spec), "--env", str(gen),
                             "--config", "baseline", "--home", str(home)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    log = store.get(gen).path / "bench" / "baseline" / "server.log"
    deadline = time.monotonic() + 30
    while not (log.is_file() and "fired up" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # into the load
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (130 if signum == signal.SIGINT else 128 + signum)
    assert "run the same command again to resume" in err
    assert "Traceback" not in err
    assert read_result(log.parent) is None
    port = prepare(spec, ["baseline"], [str(gen)], home)[0].command.port
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # nothing answers: the server is gone
    again = subprocess.run([sys.executable, "-m", "envmgr", "bench", str(spec), "--env", str(gen),
                            "--config", "baseline", "--home", str(home), "--json"],
                           capture_output=True, text=True, env={**os.environ, "SGLANG_DOUBLE_DELAY": "0.01"})
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)[0]["outcome"] == "ok"


def test_flags_are_checked_against_the_locked_sglang_not_the_spec_range(tmp_path):
    """A generation whose spec asks sglang>=0.5.9 but whose lock has 0.5.23: a flag that 0.5.23
    no longer has is an error for that cell."""
    home = tmp_path / "home"
    store = Store(home)
    spec_file = tmp_path / "ranged.yaml"
    data = yaml.safe_load((ROOT / "specs" / "cuda128.yaml").read_text())
    data["python"]["packages"]["sglang"] = ">=0.5.9"
    spec_file.write_text(yaml.safe_dump(data))
    gen = make_generation(store, spec_file, "0.5.23")
    cells = prepare(ROOT / "specs" / "cuda128.yaml", ["baseline"], [str(gen)], home)
    ids = {p.id for p in cells[0].problems if p.fatal}
    assert "flag-removed" in ids  # --cuda-graph-max-bs is gone from 0.5.20 on
    assert cells[0].env.sglang == "0.5.23"


def test_a_cell_whose_server_turned_the_feature_off_ran_without_it(setup, tmp_path):
    """sglang 0.5.15 on SM120 accepts --enable-torch-symm-mem and logs that it turned it off
    (the double replays that warning): the cell has a number, and it is not symm-mem's."""
    spec, home, store, gen, new = setup
    run = run_matrix(prepare(spec, ["torch_symm_mem"], [str(new)], home), progress=lambda _: None)
    [cell] = run.results
    assert cell.outcome == "ok", cell.summary
    assert cell.ran_without == ("torch symmetric memory",)
    assert "RAN WITHOUT torch symmetric memory" in cell.summary
    assert [f.id for f in cell.findings] == ["symm_mem_off"] and cell.findings[0].severity == "warning"
    recorded = read_result(store.get(new).path / "bench" / "torch_symm_mem")
    assert recorded.ran_without == ("torch symmetric memory",)
    # validate expected it (the rule torch-symm-mem-unsupported-arch) and the log showed it
    assert recorded.expected.because == "runs without torch symmetric memory (torch-symm-mem-unsupported-arch)"
    assert recorded.measured.label == "runs without torch symmetric memory"

    from rich.console import Console

    from envmgr.report.bench import comparison, render_terminal, write_report

    written = write_report(results_in_store(home), tmp_path / "report")
    html = written["html"].read_text()
    assert "ran without torch symmetric memory" in html
    console = Console(record=True, width=200)
    render_terminal(comparison(results_in_store(home)), console)
    assert "RAN WITHOUT TORCH SYMMETRIC MEMORY" in console.export_text()
    # and through the CLI, as an operator reads it
    from envmgr.cli import main

    assert main(["report", "--home", str(home), "--out", str(tmp_path / "cli-report")]) == 0


def test_an_environment_without_sglang_is_refused_before_any_server_starts(setup, tmp_path, monkeypatch):
    """Pre-flight (issue 17): a bench of an environment whose interpreter cannot import sglang
    says so for every cell, instead of "the server exited with code 1" after a launch."""
    spec, home, _, _, _ = setup
    monkeypatch.delenv("PYTHONPATH")  # the double stays out of this environment
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    cells = prepare(spec, ["baseline", "eagle3_hang"], [f"venv://{bare}"], home)
    assert all(c.blocked and c.problems[0].id == "sglang-not-importable" for c in cells)
    assert str(bare / "bin" / "python") in cells[0].problems[0].message
    run = run_matrix(cells)
    assert [r.outcome for r in run.results] == ["skipped", "skipped"]
    assert "sglang-not-importable" in run.results[0].summary and not (cells[0].dir / "server.log").exists()


def test_the_cli_prints_a_crashed_cells_log_path_and_last_lines(setup):
    """Issue 17: a crash says where its server.log is and what it said last, on stdout."""
    spec, home, store, gen, _ = setup
    done = subprocess.run([sys.executable, "-m", "envmgr", "bench", str(spec), "--env", str(gen),
                           "--config", "ep_flashinfer_a2a", "--home", str(home)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr
    log = store.get(gen).path / "bench" / "ep_flashinfer_a2a" / "server.log"
    assert f"ep_flashinfer_a2a @ gen {gen} cuda128 crashed; server log: {log}" in done.stdout
    assert "| RuntimeError: Not enough memory" in done.stdout  # the log's own last lines
    assert "raise --mem-fraction-static" in done.stdout  # the whole fix, under the table
    assert f"=> gen {gen} cuda128 x ep_flashinfer_a2a: crashed" in done.stderr  # a milestone, not a TTY


def test_a_taken_port_skips_the_cell_before_launch_and_the_matrix_goes_on(setup):
    spec, home, store, gen, new = setup
    port = yaml.safe_load(spec.read_text())["benchmarks"]["server_flags"]["--port"]
    lines: list[str] = []
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        run = run_matrix(prepare(spec, ["baseline", "typo"], [str(gen)], home), progress=lines.append)
    by_config = {r.config: r for r in run.results}
    skipped = by_config["baseline"]
    assert skipped.outcome == "skipped" and skipped.findings[0].id == "port-in-use", skipped
    assert f"port {port}" in skipped.summary and skipped.served_by is None
    assert not (store.get(gen).path / "bench" / "baseline" / "server.log").exists()  # never launched
    assert by_config["typo"].outcome == "skipped"  # the next cell was judged as usual
    assert any("error: port-in-use" in line for line in lines)
