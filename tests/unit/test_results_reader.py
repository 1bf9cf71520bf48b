"""The one reader of result.json (``envmgr.bench.results.load_result``, issue 24): a file of the
wrong size, nesting or types is skipped with a message that names the file, the field and what
to do, never a traceback, and the report of the other cells is still written.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envmgr.bench import results
from envmgr.bench.collect import results_under
from envmgr.bench.results import CellResult, read_result, write_result
from envmgr.compat.outcome import Outcome
from envmgr.findings import Finding
from envmgr.report.bench import write_report

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "results_h200_sglang_0.5.11"
ALL_FIXTURES = sorted((REAL.parents[1]).rglob("result.json"))


def real(name: str = "baseline") -> dict[str, Any]:
    return json.loads((REAL / name / "result.json").read_text())


def every_field() -> dict[str, Any]:
    """Today's shape with every field set (the real ok cell plus runs, a finding, a log tail)."""
    cell = CellResult.from_dict(real())
    finding = Finding("cuda_graph_off", "warning", "m", "f", sources=("s",), configs=("baseline",), line=4,
                      text="t", values={"a": 1}, ranks=("TP0",), rank="TP0", feature="CUDA graphs",
                      edit=(("--x", 1),), where="spec.yaml:3", flag="--x", title="t", field="f", stops=True)
    expected = Outcome("runs without", features=("CUDA graphs",), why=("cuda-graph-rule",))
    return replace(cell, runs=(cell.load, cell.load), findings=(finding,), ran_without=("CUDA graphs",),
                   log_tail=("line",), order=2, warmup=True, verdict_after_line_s=0.01, expected=expected).to_dict()


def write(root: Path, name: str, data: Any) -> Path:
    path = root / name / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def report(root: Path, out: Path, capsys) -> tuple[list[str], dict[str, Any], str]:
    """`envmgr report --results root --out out`: its warnings (stderr), report.json, report.html."""
    capsys.readouterr()
    written = write_report(results_under(root), out)
    warnings = capsys.readouterr().err.splitlines()
    return warnings, json.loads(written["json"].read_text()), written["html"].read_text()


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: "/".join(p.parts[-3:-1]))
def test_every_recorded_fixture_reads(path):
    assert results.load_result(path).config == path.parent.name or path.parent.name.startswith("gen")


def test_a_field_of_the_wrong_type_skips_that_file_and_the_report_is_still_written(tmp_path, capsys):
    """Before: the string reached the report's number formatting: a traceback, no report."""
    root = tmp_path / "results"
    write(root, "baseline", real("baseline"))
    bad = real("graphs")
    bad["load"]["output_throughput"] = "4646.6"
    damaged = write(root, "graphs", bad)
    warnings, data, html = report(root, tmp_path / "out", capsys)
    assert [row["config"] for row in data["rows"]] == ["baseline"]
    [warning] = warnings
    assert warning.startswith(f"skipped {damaged}: field 'load.output_throughput' is a string ('4646.6'), "
                              "expected a number")
    assert "--config graphs --rerun" in warning
    assert data["skipped"] == [{"path": str(damaged), "problem": warning.split(": ", 1)[1].split("; rerun")[0],
                                "hint": "rerun that cell (`envmgr bench SPEC --env ENV --config graphs --rerun`) "
                                        "or delete the file"}]
    assert str(damaged) in html


@pytest.mark.parametrize(("field", "value", "problem"), [
    (("env",), [], "field 'env' is a list, expected an object"),
    (("env", "label"), 3, "field 'env.label' is a number (3), expected a string"),
    (("env", "generation"), "1", "field 'env.generation' is a string ('1'), expected an integer"),
    (("env", "versions", "sglang"), None, "field 'env.versions.sglang' is null, expected a string"),
    (("outcome",), "exploded", "field 'outcome' is a string ('exploded'), expected one of ok, crashed"),
    (("load", "completed"), 6.5, "field 'load.completed' is a number (6.5), expected an integer"),
    (("load", "median_ttft_ms"), True, "field 'load.median_ttft_ms' is a boolean (true), expected a number"),
    (("startup_s",), {"s": 1}, "field 'startup_s' is an object, expected a number"),
    (("started",), 1e300, "field 'started' is a number (1e+300), expected seconds since 1970"),
    (("findings",), {}, "field 'findings' is an object, expected a list"),
    (("served_by", "test_double"), "no", "field 'served_by.test_double' is a string ('no'), expected true or false"),
    (("load_params", "num_prompts"), [64], "field 'load_params.num_prompts' is a list, expected a string, a number"),
    (("summary",), None, "field 'summary' is null, expected a string"),
    (("expected",), {"state": "works"}, "field 'expected.state' is a string ('works'), expected one of runs"),
    (("expected",), {"why": []}, "field 'expected.state' is missing"),
])
def test_a_wrong_field_is_named_with_what_it_is_and_what_was_expected(tmp_path, field, value, problem):
    data = real("baseline")
    parent = data
    for key in field[:-1]:
        parent = parent[key]
    parent[field[-1]] = value
    path = write(tmp_path, "baseline", data)
    with pytest.raises(results.DamagedResult) as caught:
        results.load_result(path)
    assert caught.value.path == path and caught.value.problem.startswith(problem)
    assert read_result(path.parent) is None  # bench runs such a cell again


def test_every_field_today_s_envmgr_writes_is_checked(tmp_path):
    """A field added to CellResult (or the classes in it) without a check in the reader fails here."""
    data = every_field()
    assert results.load_result(write(tmp_path, "intact", data)) is not None

    def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
        found = []
        for key, item in value.items():
            found.append(prefix + (key,))
            if isinstance(item, dict) and key not in ("values", "edit", "load_params", "versions", "server_env"):
                found += paths(item, prefix + (key,))
            elif isinstance(item, list) and item and isinstance(item[0], dict):
                found += paths(item[0], prefix + (key, 0))
        return found

    unchecked = []
    for index, path in enumerate(paths(data)):
        copy = json.loads(json.dumps(data))
        parent = copy
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = [] if isinstance(parent[path[-1]], dict) else {"not": "this"}
        try:
            results.load_result(write(tmp_path, f"m{index}", copy))
            unchecked.append(path)
        except results.DamagedResult:
            pass
    assert unchecked == []


def test_deep_nesting_is_refused_without_a_recursion_error(tmp_path, capsys):
    """Before: json.loads raised RecursionError, which the reader did not catch."""
    root = tmp_path / "results"
    write(root, "baseline", real("baseline"))
    deep = write(root, "deep", "[" * 200_000 + "]" * 200_000)
    warnings, data, _ = report(root, tmp_path / "out", capsys)
    assert len(data["rows"]) == 1 and len(warnings) == 1
    assert str(deep) in warnings[0] and "nested" in warnings[0]


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path, capsys):
    root = tmp_path / "results"
    write(root, "baseline", real("baseline"))
    big = write(root, "graphs", dict(real("graphs"), summary="s" * (5 << 20)))
    warnings, data, _ = report(root, tmp_path / "out", capsys)
    assert [row["config"] for row in data["rows"]] == ["baseline"]
    assert len(warnings) == 1 and str(big) in warnings[0] and "larger than 4194304 bytes" in warnings[0]


@pytest.mark.parametrize(("content", "problem"), [
    ("", "not valid JSON"), ('{"env": ', "not valid JSON"), ("[]", "holds a list, expected an object"),
    ("\x00\x01", "not valid JSON"),
    ('{"env": {"label": "a"}, "config": "c", "outcome": "ok"}', "field 'env.generation' is missing"),
])
def test_a_broken_file_is_named_with_its_problem(tmp_path, content, problem):
    path = write(tmp_path, "cell", content)
    with pytest.raises(results.DamagedResult) as caught:
        results.load_result(path)
    assert problem in caught.value.problem and str(path) in caught.value.warning


def test_binary_bytes_are_refused(tmp_path):
    path = tmp_path / "cell" / "result.json"
    path.parent.mkdir()
    path.write_bytes(bytes(range(256)))
    with pytest.raises(results.DamagedResult, match="UTF-8"):
        results.load_result(path)


def test_a_fifo_in_place_of_the_file_is_refused_without_blocking(tmp_path):
    import os

    path = tmp_path / "cell" / "result.json"
    path.parent.mkdir()
    os.mkfifo(path)
    with pytest.raises(results.DamagedResult, match="regular file"):
        results.load_result(path)


def test_keys_a_newer_envmgr_adds_are_ignored(tmp_path):
    data = real("baseline")
    data["new_field"] = {"x": 1}
    data["env"]["new_env_field"] = "y"
    assert results.load_result(write(tmp_path, "baseline", data)).env.label == data["env"]["label"]


def test_an_unfinished_cell_has_no_result_and_no_warning(tmp_path):
    (tmp_path / "results" / "interrupted").mkdir(parents=True)
    write_result(tmp_path / "results" / "done", CellResult.from_dict(real()))
    warnings: list[str] = []
    assert len(results_under(tmp_path / "results", warn=warnings.append)) == 1 and warnings == []
    assert read_result(tmp_path / "results" / "interrupted") is None
