"""Every exit code in the CLI's table (``envmgr.cli.EXIT_CODES``, printed in each --help and in
docs/cli.md) is reached by a test (issue 29): here, by running the command, where that is cheap;
otherwise by the named test elsewhere, which this file checks exists, runs that command and
compares with that code."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from envmgr.cli import EXIT_CODES, main

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
LOGS = ROOT / "tests" / "fixtures" / "triage"
H200_FACTS = ROOT / "docs" / "evidence" / "h200-facts" / "facts.json"
NO_GENERATION = "99"

# (command, code) -> argv (run here, in-process; "{tmp}" is a fresh folder)
HERE = {
    ("validate", 0): ["validate", str(SPECS / "demo-cpu.yaml")],
    ("validate", 1): ["validate", str(SPECS / "cuda13.yaml")],
    ("plan", 0): ["plan", str(SPECS / "demo-cpu.yaml"), "--from", str(SPECS / "demo-cpu.yaml")],
    ("plan", 2): ["plan", str(SPECS / "cuda13.yaml"), "--from", str(SPECS / "cuda128.yaml")],
    ("plan", 1): ["plan", "{tmp}/absent.yaml"],
    ("lock", 1): ["lock", "{tmp}/absent.yaml"],
    ("init", 0): ["init", "h200", "--facts", str(H200_FACTS), "-o", "{tmp}/h200.yaml"],
    ("init", 1): ["init", "h200", "--facts", "{tmp}/absent.json", "-o", "{tmp}/h200.yaml"],
    ("advise", 1): ["advise", "{tmp}/absent.yaml"],
    ("apply", 1): ["apply", "{tmp}/absent.yaml", "--yes", "--home", "{tmp}/home"],
    ("run", 1): ["run", "--env", NO_GENERATION, "--home", "{tmp}/home", "--", "true"],
    ("shell", 1): ["shell", "--env", NO_GENERATION, "--home", "{tmp}/home"],
    ("env", 1): ["env", "--env", NO_GENERATION, "--home", "{tmp}/home"],
    ("gc", 0): ["gc", "--home", "{tmp}/home", "--dry-run"],
    ("generations", 0): ["generations", "--home", "{tmp}/home"],
    ("generations", 1): ["generations", "--home", "{tmp}/a-file"],  # a state directory that is a file
    ("rollback", 1): ["rollback", "--home", "{tmp}/home"],
    ("status", 1): ["status", "--home", "{tmp}/home"],
    ("triage", 0): ["triage", str(LOGS / "clean_h200_sglang_0.5.11_serving.log")],
    ("triage", 1): ["triage", str(LOGS / "kv_pool_oom_h200_sglang_0.5.11.log")],
    ("triage", 2): ["triage", str(LOGS / "cuda_graph_off_h200_sglang_0.5.11.log")],
    ("bench", 1): ["bench", "{tmp}/absent.yaml", "--home", "{tmp}/home"],
    ("report", 1): ["report", "--home", "{tmp}/home", "--out", "{tmp}/r"],
    ("verify", 1): ["verify", "{tmp}/absent.yaml", "--hosts", "local://"],
    ("verify", 0): ["verify", "{tmp}/pydantic.yaml", "--hosts", "local://", "--python", sys.executable],
    ("schema", 0): ["schema"],
    ("completion", 0): ["completion", "bash"],
    ("facts", 0): ["facts", "--json"],
}
# (command, code) -> the test elsewhere that reaches it (a real build, server, GPU or container)
ELSEWHERE = {
    ("lock", 0): "tests/integration/test_lock_and_saved_plan.py::test_a_committed_lock_reproduces_the_same_environment_in_a_second_store",
    ("advise", 0): "tests/unit/test_advise.py::test_a_stack_nothing_blocks_gets_exit_0",
    ("apply", 0): "tests/integration/test_venv_apply.py::test_apply_unchanged_change_drift_rollback",
    ("run", 127): "tests/integration/test_use_env.py::test_run_uses_the_generations_interpreter_and_env_and_passes_the_exit_code",
    ("env", 0): "tests/integration/test_use_env.py::test_env_redacts_the_secret_and_its_exports_read_it_when_evaluated",
    ("gc", 1): "tests/unit/test_confinement.py::test_gc_never_deletes_a_folder_a_tampered_meta_json_names",
    ("rollback", 0): "tests/integration/test_venv_apply.py::test_apply_unchanged_change_drift_rollback",
    ("status", 0): "tests/integration/test_venv_apply.py::test_apply_unchanged_change_drift_rollback",
    ("status", 2): "tests/integration/test_venv_apply.py::test_apply_unchanged_change_drift_rollback",
    ("probe", 0): "tests/integration/test_lock_and_saved_plan.py::test_a_committed_lock_reproduces_the_same_environment_in_a_second_store",
    ("probe", 1): "tests/unit/test_probe_runner.py::test_envmgr_probe_says_when_nothing_was_tested_and_exits_1",
    ("bench", 0): "tests/integration/test_bench_matrix.py::test_cli_dry_run_shows_commands_and_blocks_the_typo",
    ("report", 0): "tests/unit/test_cli.py::test_report_from_recorded_results_writes_html_png_json",
}
ANY_COMMAND = {64: "tests/unit/test_cli.py::test_usage_error_exit_code",
               141: "tests/unit/test_cli.py::test_a_reader_that_goes_away_ends_envmgr_quietly_like_a_unix_tool"}


def documented() -> set[tuple[str, int]]:
    return {(command, int(code)) for command, text in EXIT_CODES.items()
            for code in re.findall(r"(?<![\w.])(\d+)(?![\w.])", text)}


def test_every_documented_code_is_reached_here_or_by_a_named_test():
    assert documented() - set(HERE) - set(ELSEWHERE) == set()
    assert set(HERE) | set(ELSEWHERE) <= documented()  # no test of a code the table does not promise


@pytest.mark.parametrize(("command", "code"), sorted(HERE), ids=[f"{c}-{n}" for c, n in sorted(HERE)])
def test_the_command_exits_with_the_code(command, code, tmp_path, capsys):
    (tmp_path / "a-file").write_text("not a directory\n")
    (tmp_path / "pydantic.yaml").write_text(  # what runs this suite has: pydantic 2
        "apiVersion: envmgr/v1\nmetadata: {name: t}\nhardware: {gpu: {arch: sm_90}}\n"
        f"python: {{version: '{sys.version_info.major}.{sys.version_info.minor}', packages: {{pydantic: '>=2'}}}}\n")
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in HERE[command, code]]
    assert main(argv) == code, capsys.readouterr()


def _function(reference: str) -> ast.FunctionDef:
    path, _, name = reference.partition("::")
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert found, f"{reference} does not exist"
    return found[0]


def _compares_with(function: ast.FunctionDef, code: int) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            if any(isinstance(p, ast.Constant) and p.value == code and type(p.value) is int for p in parts):
                return True
            if any(isinstance(p, ast.BinOp) for p in parts) and code == 141:  # 128 + signal.SIGPIPE
                return True
    return False


@pytest.mark.parametrize(("command", "code"), sorted(ELSEWHERE), ids=[f"{c}-{n}" for c, n in sorted(ELSEWHERE)])
def test_the_named_test_runs_the_command_and_checks_the_code(command, code):
    function = _function(ELSEWHERE[command, code])
    strings = {n.value for n in ast.walk(function) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert command in strings or (command, code) == ("advise", 0), f"{ELSEWHERE[command, code]} never runs {command}"
    assert _compares_with(function, code), f"{ELSEWHERE[command, code]} never checks exit {code}"


@pytest.mark.parametrize("code", sorted(ANY_COMMAND))
def test_the_codes_of_every_command_are_tested(code):
    assert _compares_with(_function(ANY_COMMAND[code]), code)


def test_facts_never_fails_for_what_the_host_lacks(capsys):
    assert main(["facts", "--json", "--python", "/nonexistent/python"]) == 0
    assert "python" in json.loads(capsys.readouterr().out)["missing"]
    assert sys.executable  # the interpreter that runs the suite gave its own facts above
