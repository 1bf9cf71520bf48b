"""Recorded data is plain text in every renderer (issue 24): a ``$`` in a label is no mathtext
in the chart, rich markup and HTML in data are shown as written, and control characters (ESC
sequences, OSC 8 hyperlinks, ``\\r``, C1 controls, bidi overrides) never reach a terminal: the
report's table, envmgr's plain-text printer and the progress lines all show them escaped.
"""

from __future__ import annotations

import io
import json
from html.parser import HTMLParser

import pytest
from rich.console import Console

from envmgr.bench.collect import results_under
from envmgr.bench.results import CellResult, EnvInfo, LoadResult, write_result
from envmgr.findings import Finding
from envmgr.report import printer
from envmgr.report.bench import comparison, render_terminal, write_html, write_png, write_report
from envmgr.report.printer import Printer
from envmgr.report.progress import TerminalProgress

# What each would do to a terminal: clear it, colour it, link text elsewhere, rewrite the line,
# start a C1 CSI, reverse what follows (an "exe.txt" that reads "txt.exe").
CONTROLS = ("\x1b[2J", "\x1b[31m", "\x1b]8;;http://evil.example\x1b\\", "\x1b]8;;\x07", "\r", "\x9b1m",
            "\u202e", "\u2066", "\x00", "\x07", "\x08", "\x7f")
HOSTILE = "a" + "b".join(CONTROLS) + "z"
RAW = ("\x1b", "\r", "\x9b", "\u202e", "\u2066", "\x00", "\x07", "\x08", "\x7f")
MATHTEXT = ("$\\undefined$", "$$", "$x^$", "100$ and $5")


def load(throughput: float) -> LoadResult:
    return LoadResult(output_throughput=throughput, total_throughput=throughput, request_throughput=1.0,
                      completed=8, duration_s=60.0, mean_ttft_ms=10.0, median_ttft_ms=10.0, p99_ttft_ms=20.0,
                      mean_tpot_ms=1.0, median_tpot_ms=1.0, p99_tpot_ms=2.0, mean_itl_ms=1.0,
                      median_itl_ms=1.0, p99_itl_ms=2.0)


def cells_labelled(text: str) -> list[CellResult]:
    """An ok cell and a crashed one whose label, config, versions, finding and fix all hold ``text``."""
    env = EnvInfo(label=f"spec @ venv:///opt/{text}", generation=None, spec="s", backend=f"venv:///opt/{text}",
                  versions={"sglang": text})
    finding = Finding(f"id{text}", "error", f"message {text}", f"raise --mem {text}: because {text}",
                      line=3, text=f"log {text}")
    return [CellResult(env=env, config=f"ok{text}", outcome="ok", summary="s", load=load(10.0),
                       ran_without=(f"graphs {text}",)),
            CellResult(env=env, config=f"boom{text}", outcome="crashed", summary=f"summary {text}",
                       findings=(finding,))]


def terminal_of(cells: list[CellResult]) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    render_terminal(comparison(cells), console)
    return console.file.getvalue()


# --- the chart ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text", MATHTEXT)
def test_a_dollar_in_the_data_is_text_in_the_chart_and_the_report_is_written(tmp_path, text):
    """Before: matplotlib parsed '$...$' as mathtext and a bad expression (ValueError) stopped
    `envmgr report` before any file was written."""
    written = write_report(cells_labelled(text), tmp_path)
    assert written["png"].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert text in written["html"].read_text(encoding="utf-8")
    assert json.loads(written["json"].read_text())["envs"][0]["label"].endswith(text)


def test_every_text_of_the_chart_is_drawn_without_mathtext(tmp_path, monkeypatch):
    """'$x^2$' parses as math (no error, but not what was recorded): no Text the chart draws,
    labels, ticks, legend or title, may parse it."""
    from matplotlib.text import Text

    drawn: list[tuple[str, bool]] = []
    draw = Text.draw

    def recording(self, renderer):
        drawn.append((self.get_text(), self.get_parse_math()))
        return draw(self, renderer)

    monkeypatch.setattr(Text, "draw", recording)
    write_png(comparison(cells_labelled("$x^2$")), tmp_path / "chart.png")
    labels = [text for text, _ in drawn if "$x^2$" in text]
    assert len(labels) >= 3  # the config, the legend's label, a failure's headline
    assert [text for text, math in drawn if math and text] == []


# --- the terminal table -------------------------------------------------------------------------

def test_terminal_table_escapes_control_characters_of_the_data():
    text = terminal_of(cells_labelled(HOSTILE))
    leaked = [ch for ch in RAW if ch in text]
    assert leaked == []
    assert "\\x1b[2J" in text and "\\x1b]8;;http://evil.example" in text and "\\u202e" in text
    assert "\\x9b1m" in text and "\\x0d" in text


def test_terminal_table_prints_markup_in_the_data_literally():
    text = terminal_of(cells_labelled("[bold]x[/bold] [link=http://e]l[/link] :smile:"))
    assert "[bold]x[/bold] [link=http://e]l[/link] :smile:" in text


def test_terminal_table_clips_a_huge_field_and_keeps_the_whole_fix_readable():
    huge = "y" * 100_000
    text = terminal_of(cells_labelled(huge))
    assert len(text) < 40_000 and "…" in text


# --- the page -----------------------------------------------------------------------------------

class _Tags(HTMLParser):
    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_html_shows_script_in_a_label_a_log_line_and_a_skipped_path_as_text(tmp_path):
    evil = "<script>alert(1)</script>"
    root = tmp_path / "results"
    for cell in cells_labelled(evil):
        write_result(root / cell.config.replace("/", "_"), cell)
    damaged = root / f"cfg{evil}".replace("/", "_") / "result.json"
    damaged.parent.mkdir()
    damaged.write_text('{"config": 1}')
    cells = results_under(root)
    page = write_html(comparison(cells), tmp_path / "report.html").read_text(encoding="utf-8")
    parsed = _Tags(page)
    assert "script" not in parsed.tags and "<script" not in page.lower()
    shown = "".join(parsed.text)
    assert f"spec @ venv:///opt/{evil}" in shown and f"log {evil}" in shown
    assert str(damaged) in shown and "field 'env' is missing" in shown  # the page names what it left out


# --- envmgr's plain-text printer and the progress lines -----------------------------------------

def test_printer_escapes_data_and_keeps_its_own_colours(monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    stream = io.StringIO()
    out = Printer(stream)
    out.line(("plan", "bold"), f": {HOSTILE}")
    out.indented(HOSTILE, 4, "green")
    written = stream.getvalue()
    assert written.startswith("\x1b[1mplan\x1b[0m: ")  # envmgr's own SGR stays
    assert written.count("\x1b[") == 4  # bold on/off, green on/off: nothing from the data
    assert not any(ch in written for ch in RAW if ch != "\x1b")
    assert "\\x1b[2J" in written and "\\u202e" in written


def test_progress_lines_escape_a_server_log_s_control_characters():
    stream = io.StringIO()
    progress = TerminalProgress(stream, tty=True)
    progress("[1/1] cell")
    progress(f"  [cfg] {HOSTILE}")  # a server log line: rewritten in place on a terminal
    progress.close()
    written = stream.getvalue()
    assert "\r\x1b[K" in written  # envmgr's own: back to the line's start, clear it
    data = written.replace("\r\x1b[K", "")
    assert [ch for ch in RAW if ch in data] == []  # not a colour terminal: no escape of envmgr's either
    assert "\\x1b]8;;http://evil.example" in data


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b[31m", "\\x1b[31m"), ("\r", "\\x0d"), ("\x9b", "\\x9b"), ("\u202e", "\\u202e"),
    ("\u2069", "\\u2069"), ("\x00", "\\x00"), ("\x7f", "\\x7f"), ("\u2028", "\\u2028"),
])
def test_visible_escapes_each_control(raw, shown):
    assert printer.visible(f"a{raw}b") == f"a{shown}b"


def test_visible_keeps_text_tabs_and_newlines():
    text = "gen 1 cuda13 × 1.05 ±2% — 中文 é 🚀\tcol\nnext"
    assert printer.visible(text) == text
    assert printer.visible(printer.visible(HOSTILE)) == printer.visible(HOSTILE)  # escaping twice changes nothing more
