"""Benchmark report: the comparison's order, ratios and best; failed cells explained by their
triage finding; the terminal table, the HTML page (escaped) and the PNG chart (valid and
byte-for-byte deterministic), made from the recorded results in tests/fixtures/bench/results.

Which fixture numbers come from the scenario and which are illustrative: that folder's README.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from rich.console import Console

from envmgr.bench.collect import results_under
from envmgr.bench.results import CellResult, EnvInfo, LoadResult
from envmgr.bench.triage import triage_text
from envmgr.findings import Finding
from envmgr.report.bench import (
    Comparison,
    comparison,
    render_terminal,
    short_fix,
    write_html,
    write_png,
    write_report,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RESULTS = FIXTURES / "bench" / "results"
GEN1, GEN2 = "gen 1 cuda128", "gen 2 cuda13"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def cells() -> list[CellResult]:
    return results_under(RESULTS)


@pytest.fixture(scope="module")
def comp(cells) -> Comparison:
    return comparison(cells)


def cell_of(comp: Comparison, config: str, env: str):
    row = next(r for r in comp.rows if r.config == config)
    return row.cells[[e.label for e in comp.envs].index(env)]


def load(throughput: float, ttft: float = 100.0) -> LoadResult:
    return LoadResult(output_throughput=throughput, total_throughput=3 * throughput, request_throughput=0.1,
                      completed=8, duration_s=60.0, mean_ttft_ms=ttft, median_ttft_ms=ttft, p99_ttft_ms=2 * ttft,
                      mean_tpot_ms=10.0, median_tpot_ms=10.0, p99_tpot_ms=20.0, mean_itl_ms=10.0,
                      median_itl_ms=10.0, p99_itl_ms=20.0)


def env(label: str, generation: int | None) -> EnvInfo:
    return EnvInfo(label=label, generation=generation, spec=label, backend="local://")


def ok(env_: EnvInfo, config: str, throughput: float, finished: float = 0.0) -> CellResult:
    return CellResult(env=env_, config=config, outcome="ok", summary=f"{throughput} tok/s",
                      load=load(throughput), finished=finished)


# --- the recorded fixtures ---------------------------------------------------------------------

def test_fixture_tree_holds_every_cell(cells):
    assert sorted((c.env.label, c.config, c.outcome) for c in cells) == [
        (GEN1, "baseline", "ok"), (GEN1, "eagle3", "ok"), (GEN1, "ep_flashinfer_a2a", "crashed"),
        (GEN2, "baseline", "ok"), (GEN2, "eagle3", "hung"), (GEN2, "ep_flashinfer_a2a", "crashed"),
    ]


@pytest.mark.parametrize(("env_dir", "log", "finding_id"), [
    ("gen1-cuda128", "kv_pool_oom_scenario_ep_tp8.log", "kv_pool_oom"),
    ("gen2-cuda13", "ep_expert_location_assert_scenario.log", "ep_expert_location_assert"),
])
def test_recorded_findings_have_the_shape_triage_produces(env_dir, log, finding_id):
    """The double-made fixtures are in today's shape; records made before one Finding (the real
    H200 results) still read, through Finding.from_dict."""
    recorded = json.loads((RESULTS / env_dir / "ep_flashinfer_a2a" / "result.json").read_text())["findings"][0]
    live = triage_text((FIXTURES / "triage" / log).read_text(encoding="utf-8"))[0].to_dict()
    assert recorded["id"] == live["id"] == finding_id
    assert set(recorded) == set(live)
    assert (recorded["line"], recorded["values"]) == (live["line"], live["values"])


def test_read_cells_skips_an_unfinished_cell(tmp_path, cells):
    from envmgr.bench.results import write_result
    write_result(tmp_path / "gen1" / "baseline", cells[0])
    (tmp_path / "gen1" / "interrupted").mkdir()
    (tmp_path / "gen1" / "damaged").mkdir()
    (tmp_path / "gen1" / "damaged" / "result.json").write_text("{not json")
    warnings: list[str] = []
    found = results_under(tmp_path, warn=warnings.append)
    assert found == [cells[0]]
    [damaged] = found.skipped  # the interrupted cell is no damage: it never wrote a result
    assert damaged.path == tmp_path / "gen1" / "damaged" / "result.json" and "not valid JSON" in damaged.problem
    assert warnings == [damaged.warning]


# --- comparison -------------------------------------------------------------------------------

def test_columns_by_generation_then_label_unnumbered_last():
    a, b, c, d = env("zeta", 1), env("alpha", 2), env("beta", 2), env("manual", None)
    comp = comparison([ok(d, "x", 1), ok(c, "x", 1), ok(b, "x", 1), ok(a, "x", 1)])
    assert [e.label for e in comp.envs] == ["zeta", "alpha", "beta", "manual"]
    assert comp.baseline == "zeta"


def test_rows_in_first_seen_order():
    e = env("e", 1)
    comp = comparison([ok(e, "z_last_alphabetically", 1), ok(e, "a", 1), ok(e, "m", 1), ok(e, "a", 2)])
    assert [r.config for r in comp.rows] == ["z_last_alphabetically", "a", "m"]


def test_ratios_and_best_from_the_fixtures(comp):
    assert [e.label for e in comp.envs] == [GEN1, GEN2]
    base1, base2 = cell_of(comp, "baseline", GEN1), cell_of(comp, "baseline", GEN2)
    assert (base1.throughput, base2.throughput) == (89.5, 93.8)
    assert base1.ratio == 1.0
    assert base2.ratio == pytest.approx(93.8 / 89.5)
    best = {r.config: r.best for r in comp.rows}
    assert best == {"baseline": GEN2, "eagle3": GEN1, "ep_flashinfer_a2a": None}
    assert cell_of(comp, "eagle3", GEN2).ratio is None  # hung: no number to compare


def test_ratio_needs_the_first_column_ok():
    first, second = env("first", 1), env("second", 2)
    crashed = CellResult(env=first, config="x", outcome="crashed", summary="boom")
    comp = comparison([crashed, ok(second, "x", 50.0)])
    assert cell_of(comp, "x", "second").ratio is None
    assert comp.rows[0].best == "second"


def test_a_config_missing_in_one_environment_is_not_run():
    first, second = env("first", 1), env("second", 2)
    comp = comparison([ok(first, "x", 10.0), ok(second, "x", 20.0), ok(second, "only_new", 5.0)])
    assert cell_of(comp, "only_new", "first") is None
    assert cell_of(comp, "only_new", "second").ratio is None
    assert comp.rows[1].best == "second"


def test_a_cell_run_twice_keeps_the_later_result():
    e = env("e", 1)
    comp = comparison([ok(e, "x", 70.0, finished=200.0), ok(e, "x", 60.0, finished=100.0)])
    assert cell_of(comp, "x", "e").throughput == 70.0


def test_failed_cells_carry_the_root_finding_and_a_short_fix(comp):
    oom = cell_of(comp, "ep_flashinfer_a2a", GEN1).failure
    assert (oom.outcome, oom.finding, oom.line) == ("crashed", "kv_pool_oom", 29)
    assert oom.short_fix == "raise --mem-fraction-static from 0.7787 to 0.92"
    assert "mem_fraction_static=0.778734296875" in oom.log_text
    assert oom.fix.startswith("raise --mem-fraction-static from 0.7787 to 0.92:")
    ep = cell_of(comp, "ep_flashinfer_a2a", GEN2).failure
    assert (ep.finding, ep.short_fix) == ("ep_expert_location_assert", "drop --moe-a2a-backend and --ep-size")
    assert ep.headline == "crashed: ep_expert_location_assert"
    hung = cell_of(comp, "eagle3", GEN2)
    assert hung.load is None
    assert (hung.failure.finding, hung.failure.headline, hung.failure.short_fix) == (None, "hung", "")
    assert hung.failure.message == hung.summary


def test_the_first_finding_is_the_root_cause():
    root = Finding("flashinfer_arch_unsupported", "error", "m", "remove --enable-x", line=7, text="t")
    follow_on = Finding("cuda_graph_capture_failed", "error", "n", "lower --y", line=9, text="u")
    cell = CellResult(env=env("e", 1), config="x", outcome="crashed", summary="s", findings=(root, follow_on))
    failure = cell_of(comparison([cell]), "x", "e").failure
    assert (failure.finding, failure.short_fix, failure.line) == ("flashinfer_arch_unsupported", "remove --enable-x", 7)


def test_an_ok_cell_has_no_failure_and_a_failed_one_no_numbers(comp):
    for row in comp.rows:
        for cell in row.cells:
            assert (cell.load is None) == (cell.failure is not None) == (cell.outcome != "ok")


@pytest.mark.parametrize(("fix", "short"), [
    ("do X first: because; or else remove --enable-foo (see #1).", "or else remove --enable-foo"),
    ("install a driver for this CUDA (>= 580) and reboot.", "install a driver for this CUDA"),
    ("pass --tp-size 8", "pass --tp-size 8"),
    ("", ""),
])
def test_short_fix_prefers_the_clause_naming_a_flag(fix, short):
    assert short_fix(fix) == short


def test_short_fix_is_clipped():
    clipped = short_fix("set --x " + "y" * 200, limit=30)
    assert len(clipped) == 30 and clipped.endswith("…")


def test_comparison_json_round_trips(comp, tmp_path):
    paths = write_report(results_under(RESULTS), tmp_path)
    data = json.loads(paths["json"].read_text())
    assert data == json.loads(json.dumps(comp.to_dict()))
    assert data["baseline"] == GEN1
    assert [r["best"] for r in data["rows"]] == [GEN2, GEN1, None]
    assert data["rows"][2]["cells"][0]["failure"]["finding"] == "kv_pool_oom"


# --- terminal ---------------------------------------------------------------------------------

def terminal_text(comp: Comparison) -> str:
    console = Console(file=io.StringIO(), width=200, record=True, color_system=None)
    render_terminal(comp, console)
    return console.export_text()


def test_terminal_shows_values_failures_and_versions(comp):
    text = terminal_text(comp)
    for needle in ("89.5 tok/s", "93.8 tok/s ×1.05", "54.0 tok/s", "TTFT 412 ms", "TTFT 371 ms",
                   "crashed: kv_pool_oom", "fix: raise --mem-fraction-static from 0.7787 to 0.92",
                   "crashed: ep_expert_location_assert", "fix: drop --moe-a2a-backend and --ep-size",
                   "hung", "no server log line for 300 s", GEN1, GEN2, "sglang 0.5.15", "torch 2.9.1",
                   "baseline", "eagle3", "ep_flashinfer_a2a"):
        assert needle in text, needle
    assert "×1.00" not in text  # the first column is the reference, not a ratio


def test_terminal_prints_data_literally_not_as_markup():
    e = env("[bold]env[/bold]", 1)
    text = terminal_text(comparison([ok(e, "[red]cfg[/red]", 12.5)]))
    assert "[red]cfg[/red]" in text and "[bold]env[/bold]" in text


# --- HTML -------------------------------------------------------------------------------------

class _Page(HTMLParser):
    """What a browser would show and which elements it would build."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.chunks.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.chunks).split())

    def all(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for name, attrs in self.tags if name == tag]


def squash(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def report(tmp_path_factory, cells) -> dict[str, Path]:
    return write_report(cells, tmp_path_factory.mktemp("report"))


def test_report_writes_page_chart_and_json(report):
    assert sorted(p.name for p in report.values()) == ["report.html", "report.json", "throughput.png"]
    assert all(p.is_file() and p.stat().st_size > 0 for p in report.values())


def test_html_shows_every_number_and_finding(report, cells):
    page = _Page(report["html"].read_text(encoding="utf-8"))
    for needle in ("89.5 tok/s", "54.0 tok/s", "93.8 tok/s", "×1.05 vs gen 1 cuda128",
                   "412 ms median, 1830 ms p99",  # TTFT gen 1 baseline
                   "84.1 ms median, 90.7 ms p99",  # TPOT gen 2 baseline
                   "341 ms median, 499 ms p99",  # ITL gen 1 eagle3
                   "583 s", "187 s", "487 s", "hung", "kv_pool_oom", "ep_expert_location_assert",
                   "server log line 29", "server log line 25", "sglang 0.5.9", "flashinfer-python 0.6.12",
                   "venv:///opt/envmgr/cuda13", "→ drop --moe-a2a-backend and --ep-size",
                   "→ raise --mem-fraction-static from 0.7787 to 0.92"):
        assert needle in page.text, needle
    for cell in cells:  # each failure's full message, fix and log line, as the reader sees them
        for finding in cell.findings:
            for key in ("message", "fix", "text"):
                assert squash(getattr(finding, key)) in page.text, (cell.config, key)
        if cell.outcome == "hung":
            assert cell.summary in page.text


def test_html_is_self_contained_with_the_chart_relative(report):
    page = _Page(report["html"].read_text(encoding="utf-8"))
    images = page.all("img")
    assert len(images) == 1 and images[0]["src"] == "throughput.png"
    assert "89.5 tok/s" in images[0]["alt"] and "kv_pool_oom" in images[0]["alt"]
    assert page.all("style") and not page.all("script") and not page.all("link")


def test_html_marks_best_only_where_there_was_a_contest(report):
    page = _Page(report["html"].read_text(encoding="utf-8"))
    best = [attrs["class"] for attrs in page.all("td") if "best" in (attrs["class"] or "")]
    assert len(best) == 1  # baseline gen 2; eagle3's only ok cell beat nobody


def test_html_escapes_everything_from_the_data(tmp_path):
    evil_env = EnvInfo(label="<b>gen</b>", generation=1, spec="s\"><i>", backend="local://<x>",
                       versions={"<u>torch": "</th><script>alert(3)</script>"})
    evil = "<script>alert(1)</script>"
    cells = [
        ok(evil_env, evil, 10.0),
        CellResult(env=evil_env, config="hang & <img src=x onerror=alert(2)>", outcome="hung",
                   summary="<img src=x onerror=alert(2)>"),
        CellResult(env=evil_env, config="boom", outcome="crashed", summary="x",
                   findings=(Finding("<id>", "error", "<m>", "<f> --flag", line=3,
                                     text="</pre><script>alert(4)</script>"),)),
    ]
    path = write_html(comparison(cells), tmp_path / "report.html")
    raw = path.read_text(encoding="utf-8")
    page = _Page(raw)
    assert "<script" not in raw.lower()
    assert {name for name, _ in page.tags} <= {"html", "head", "meta", "title", "style", "body", "h1", "p",
                                                "b", "figure", "img", "table", "thead", "tr", "th", "td",
                                                "div", "span", "tbody", "dl", "dt", "dd", "pre"}
    assert [a["src"] for a in page.all("img")] == ["throughput.png"]
    for shown in (evil, "<img src=x onerror=alert(2)>", "<b>gen</b>", "<u>torch", "<id>", "<m>", "fix: <f> --flag",
                  "</pre><script>alert(4)</script>", "local://<x>"):
        assert shown in page.text, shown


# --- PNG --------------------------------------------------------------------------------------

def test_png_is_a_png_of_the_figure_size(report):
    data = report["png"].read_bytes()
    assert data.startswith(PNG_MAGIC)
    assert b"matplotlib" not in data.lower()  # no Software chunk
    image = pytest.importorskip("matplotlib.image")
    pixels = image.imread(report["png"])
    height, width = pixels.shape[:2]
    assert height == 520  # 5.2 in at 100 dpi
    assert 600 <= width <= 1600  # grows with configs x envs, capped to fit a page
    assert pixels[..., :3].std() > 0.05  # something was drawn


def test_png_is_deterministic_and_follows_the_data(tmp_path, comp, cells):
    first = write_png(comp, tmp_path / "a.png").read_bytes()
    second = write_png(comp, tmp_path / "b.png").read_bytes()
    assert first == second
    changed = [replace(c, load=load(120.0)) if c.ok and c.env.label == GEN2 else c for c in cells]
    assert write_png(comparison(changed), tmp_path / "c.png").read_bytes() != first


def test_png_and_html_survive_an_empty_or_all_failed_matrix(tmp_path):
    for name, cells in (("empty", []), ("failed", [CellResult(env=env("e", 1), config="x", outcome="timeout",
                                                                 summary="not ready in 900 s")])):
        paths = write_report(cells, tmp_path / name)
        assert paths["png"].read_bytes().startswith(PNG_MAGIC)
        assert "<table>" in paths["html"].read_text(encoding="utf-8")


# --- results recorded against the REAL server (fixtures/bench/results_h200_sglang_0.5.11) -------

REAL = FIXTURES / "bench" / "results_h200_sglang_0.5.11"


def test_real_results_say_what_served_them():
    comp = comparison(results_under(REAL))
    [run] = comp.runs
    # the crashed cell never could ask the server: the ok cells' answer is the column's
    assert run.served_by == ("sglang 0.5.11 on NVIDIA H200 (vm)",) and not run.test_double
    assert run.load == ("64 random-ids prompts, 128 -> 32 tokens, concurrency 8",)
    assert run.dates.startswith("2026-12-01")
    text = terminal_text(comp)
    assert "sglang 0.5.11 on NVIDIA H200" in text and "TEST DOUBLE" not in text
    assert "crashed: kv_pool_oom" in text and "skipped: parallel-exceeds-gpus" in text


def test_a_double_served_column_is_marked_in_every_format(tmp_path):
    from envmgr.bench.results import ServedBy

    served = ServedBy(server_version="0.5.9", test_double=True, gpu=None, host="ci")
    cell = replace(ok(env("gen 1 x", 1), "baseline", 50.0), served_by=served,
                   load_params={"dataset": "random-ids", "num_prompts": 8, "input_len": 64,
                                "output_len": 16, "max_concurrency": 4})
    comp = comparison([cell])
    assert comp.runs[0].test_double
    assert "TEST DOUBLE" in terminal_text(comp)
    html = write_html(comp, tmp_path / "r.html", png=None).read_text()
    assert "TEST DOUBLE" in html and "8 random-ids prompts, 64 -&gt; 16 tokens" in html
    assert json.loads(json.dumps(comp.to_dict()))["runs"][0]["test_double"] is True


# --- repeats, spread and noise (issue 17) -----------------------------------------------------


def repeated(env_: EnvInfo, config: str, *values: float, order: int = 0) -> CellResult:
    runs = tuple(load(v) for v in values)
    median = sorted(runs, key=lambda r: r.output_throughput)[(len(runs) - 1) // 2]
    return CellResult(env=env_, config=config, outcome="ok", summary="s", load=median, runs=runs,
                      warmup=True, order=order)


def test_a_difference_inside_the_runs_spread_is_marked_noise_and_one_outside_is_not():
    a, b = env("a", 1), env("b", 2)
    close = comparison([repeated(a, "x", 100.0, 104.0, 98.0), repeated(b, "x", 103.0, 101.0, 105.0)])
    cell = cell_of(close, "x", "b")
    assert cell.within_noise and cell.runs == 3 and abs(cell.spread - 4 / 103) < 1e-9
    assert (cell.low, cell.high) == (101.0, 105.0) and cell.spread_text.startswith("±1.9% over 3 runs")
    far = comparison([repeated(a, "x", 100.0, 101.0, 99.0), repeated(b, "x", 150.0, 151.0, 149.0)])
    assert not cell_of(far, "x", "b").within_noise
    assert close.rows[0].best is None and far.rows[0].best == "b"  # overlapping runs: no best to mark
    single = comparison([ok(a, "x", 100.0), ok(b, "x", 101.0)])  # one run each: nothing to compare with
    assert not cell_of(single, "x", "b").within_noise and cell_of(single, "x", "b").spread_text == "1 run: no spread"


def test_rows_follow_the_bench_specs_order_not_the_alphabet():
    a = env("a", 1)
    cells = [repeated(a, name, 10.0, order=i) for i, name in enumerate(["zeta", "alpha", "mid"])]
    assert [r.config for r in comparison(reversed(cells)).rows] == ["zeta", "alpha", "mid"]


def test_a_failed_cell_is_no_bar_and_an_ok_one_carries_its_runs_range():
    from envmgr.report.bench import _draw_bar

    calls = []

    class Axes:
        def bar(self, *args, **kwargs):
            calls.append(("bar", args, kwargs))

        def annotate(self, text, *args, **kwargs):
            calls.append(("annotate", text))

    crashed = comparison([CellResult(env=env("a", 1), config="x", outcome="crashed", summary="boom")])
    _draw_bar(Axes(), 0.0, 0.4, cell_of(crashed, "x", "a"), 0, "#000000", 100.0)
    assert [c[0] for c in calls] == ["annotate"] and "crashed" in calls[0][1]
    calls.clear()
    runs = comparison([repeated(env("a", 1), "x", 90.0, 100.0, 110.0)])
    _draw_bar(Axes(), 0.0, 0.4, cell_of(runs, "x", "a"), 0, "#000000", 110.0)
    bar = next(c for c in calls if c[0] == "bar")
    assert bar[2]["yerr"] == [[10.0], [10.0]]


def test_the_terminal_table_is_followed_by_every_failure_s_whole_fix():
    from rich.console import Console

    fix = "raise --mem-fraction-static from 0.0006 to 0.9: " + "because " * 20 + "the end"
    failed = CellResult(env=env("a", 1), config="x", outcome="crashed", summary="s",
                        findings=(Finding("kv_pool_oom", "error", "m", fix, line=3, text="t"),))
    console = Console(record=True, width=100)
    render_terminal(comparison([failed]), console)
    assert " ".join(fix.split()) in " ".join(console.export_text().split())
