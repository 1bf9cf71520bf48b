"""bench_serving's output -> numbers: its JSON line (real key set) or its printed table (real text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envmgr.bench.command import ServerCommand
from envmgr.bench.load import LoadParseError, client_module, load_argv, parse_output
from envmgr.spec.models import Load

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
REAL_TABLE = (FIXTURES / "bench_serving_output_sglang058_cookbook_conc1.txt").read_text()


def json_line(**overrides) -> str:
    """A result line with bench_serving's key set (tests/fixtures/bench/bench_serving_result_keys.json)."""
    keys = json.loads((FIXTURES / "bench_serving_result_keys.json").read_text())
    data = {k: 1.5 for k in keys}
    data.update(completed=64, duration=12.0, output_throughput=89.5, total_throughput=250.0,
                median_ttft_ms=123.0, backend="sglang", dataset_name="random-ids", server_info={})
    data.update(overrides)
    return json.dumps(data)


def test_real_table_is_read_when_no_json_line_came():
    result = parse_output(REAL_TABLE)
    assert result.completed == 10
    assert result.output_throughput == 133.74
    assert result.total_throughput == 229.19
    assert result.duration_s == 20.92
    assert (result.median_ttft_ms, result.p99_tpot_ms, result.mean_itl_ms) == (290.78, 6.88, 6.56)


def test_json_line_wins_over_the_table():
    result = parse_output(REAL_TABLE + "\n" + json_line() + "\n")
    assert (result.output_throughput, result.completed, result.median_ttft_ms) == (89.5, 64, 123.0)


def test_last_json_line_is_this_runs_result():
    text = json_line(output_throughput=1.0) + "\n" + json_line(output_throughput=2.0)
    assert parse_output(text).output_throughput == 2.0


def test_releases_without_total_throughput_get_input_plus_output():
    data = json.loads(json_line())
    del data["total_throughput"]
    data["input_throughput"] = 10.0
    assert parse_output(json.dumps(data)).total_throughput == 99.5


@pytest.mark.parametrize("text, message", [
    ("Traceback ...\nConnectionRefusedError", "printed no result"),
    (json.dumps({"output_throughput": 1.0}), "lacks a field"),
    (json_line(output_throughput="fast"), "lacks a field"),
])
def test_unusable_output_is_a_clear_error(text, message):
    with pytest.raises(LoadParseError, match=message):
        parse_output(text)


@pytest.mark.parametrize("version, module", [
    ("0.5.9", "sglang.bench_serving"), ("0.5.22", "sglang.bench_serving"),
    ("0.5.23", "sglang.benchmark.serving"), (None, "sglang.bench_serving"), ("junk", "sglang.bench_serving"),
])
def test_client_module_follows_the_release(version, module):
    assert client_module(version) == module


def test_load_argv_is_offline_fixed_length_and_reports_on_stdout():
    server = ServerCommand("c", ("py",), {}, "0.0.0.0", 30001)
    argv = load_argv("/v/bin/python", Load(input_len=1024, output_len=512, num_prompts=64, max_concurrency=8),
                     server, "0.5.15")
    opts = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert argv[:3] == ["/v/bin/python", "-m", "sglang.bench_serving"]
    assert opts["--dataset-name"] == "random-ids" and opts["--random-range-ratio"] == "1.0"
    assert (opts["--host"], opts["--port"]) == ("127.0.0.1", "30001")
    assert opts["--output-file"] == "/dev/stdout"
    assert "--dataset-path" not in opts
