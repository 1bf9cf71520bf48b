"""Benchmark results side by side: environments as columns, configs as rows.

``comparison`` turns recorded cells (``envmgr/bench/results.py``) into plain data; the
renderers only present that data: ``render_terminal`` (rich), ``write_html`` (one
self-contained page) and ``write_png`` (a grouped bar chart). ``write_report`` writes the
page, the chart and the comparison as JSON for ``envmgr report``.

A cell without numbers shows why: its outcome and, when triage found one, the root cause's
id and the most actionable clause of its fix; the page adds the full message, fix and log line.

Every label, config name, message and log line comes from files anyone can write, and each
renderer shows it as plain text: the terminal through ``visible`` (no control character
reaches the terminal) and rich ``Text`` (no markup), the page autoescaped, the chart with
mathtext off (a ``$`` is a dollar sign). The result.json files that could not be read are
listed on the page and in report.json (``Comparison.skipped``).
"""

from __future__ import annotations

import io
import json
import math
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from jinja2 import Environment, PackageLoader, StrictUndefined
from rich.table import Table
from rich.text import Text

from envmgr.bench.collect import Results
from envmgr.bench.results import CellResult, EnvInfo, LoadResult
from envmgr.findings import root_cause
from envmgr.report.printer import visible
from envmgr.report.tables import rich_console
from envmgr.userfiles import check_writable, output_dir, write_user_file

if TYPE_CHECKING:
    from rich.console import Console

HTML_NAME = "report.html"
PNG_NAME = "throughput.png"
JSON_NAME = "report.json"

# ---------------------------------------------------------------------------------------------
# The data


@dataclass(frozen=True)
class Failure:
    """Why a cell has no numbers: the root finding when triage found one, else the summary."""

    outcome: str
    finding: str | None  # root cause id
    short_fix: str  # "" without a finding
    message: str
    fix: str
    line: int | None  # in the server log
    log_text: str

    @property
    def headline(self) -> str:
        return f"{self.outcome}: {self.finding}" if self.finding else self.outcome


@dataclass(frozen=True)
class Cell:
    env: str  # the column's label
    config: str
    outcome: str
    summary: str
    startup_s: float | None
    load: LoadResult | None  # only for ok cells
    failure: Failure | None  # only for the others
    ratio: float | None  # output throughput / the first column's, where both are ok
    ran_without: tuple[str, ...] = ()  # features asked for that the server turned off
    runs: int = 1  # measured load runs behind the number (their median)
    spread: float | None = None  # (max - min) / median of those runs; None from one run
    low: float | None = None  # the slowest and fastest run's output throughput
    high: float | None = None
    within_noise: bool = False  # differs from the first column's by less than their spread
    # the three outcomes (envmgr.compat.outcome): what happened, and what validate expected before
    # the launch ("" in a record from before envmgr kept it); a surprise is where they differ
    result: str = ""
    expected: str = ""
    surprise: bool = False

    @property
    def spread_text(self) -> str:
        if self.spread is None:
            return "1 run: no spread" if self.runs <= 1 else ""
        return f"±{self.spread / 2:.1%} over {self.runs} runs"

    @property
    def without_text(self) -> str:
        return "ran without " + ", ".join(self.ran_without) if self.ran_without else ""

    @property
    def throughput(self) -> float | None:
        return self.load.output_throughput if self.load else None


@dataclass(frozen=True)
class Row:
    config: str
    cells: tuple[Cell | None, ...]  # one per Comparison.envs; None: not run in that environment
    best: str | None  # label of the env with the highest output throughput, None when none is ok

    def shows_best(self, cell: Cell) -> bool:
        """Best is worth marking only where there was something to beat."""
        contenders = sum(1 for c in self.cells if c and c.throughput is not None)
        return contenders > 1 and self.best == cell.env


@dataclass(frozen=True)
class RunInfo:
    """What a column's cells really ran on, from their records: never the spec's word for it."""

    served_by: tuple[str, ...]  # ServedBy.label of each distinct server ("... TEST DOUBLE ...")
    dates: str  # first and last start, UTC
    load: tuple[str, ...]  # each distinct benchmarks.load as run
    test_double: bool  # any cell of the column was served by the test double

    @property
    def lines(self) -> list[str]:
        return [*self.served_by, *(f"load: {text}" for text in self.load), *([self.dates] if self.dates else [])]


@dataclass(frozen=True)
class Skipped:
    """A result.json left out of the report: which, why, what to do."""

    path: str
    problem: str
    hint: str


@dataclass(frozen=True)
class Comparison:
    envs: tuple[EnvInfo, ...]  # the columns, by generation then label
    rows: tuple[Row, ...]  # configs in first-seen order
    runs: tuple[RunInfo, ...] = ()  # one per column
    skipped: tuple[Skipped, ...] = ()  # damaged result.json files (Results.skipped)

    @property
    def baseline(self) -> str | None:
        """The column every ratio is relative to."""
        return self.envs[0].label if self.envs else None

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, **asdict(self)}


def comparison(cells: Iterable[CellResult]) -> Comparison:
    """Columns by generation (unnumbered last) then label; rows in the bench spec's order (as
    recorded; first seen where a record has none); a cell run twice keeps the later one. Given
    ``Results`` (``envmgr.bench.collect``), the files it skipped are kept in ``skipped``."""
    skipped = tuple(Skipped(str(d.path), d.problem, d.hint or "") for d in cells.skipped) \
        if isinstance(cells, Results) else ()
    latest: dict[tuple[str, str], CellResult] = {}
    envs: dict[str, EnvInfo] = {}
    configs: dict[str, tuple[int, int]] = {}  # config -> (its place in the spec, first seen)
    for cell in cells:
        envs.setdefault(cell.env.label, cell.env)
        seen = configs.setdefault(cell.config, (cell.order, len(configs)))
        configs[cell.config] = (min(seen[0], cell.order), seen[1])
        key = (cell.env.label, cell.config)
        if key not in latest or cell.finished >= latest[key].finished:
            latest[key] = cell
    columns = tuple(sorted(envs.values(), key=lambda e: (e.generation is None, e.generation or 0, e.label)))
    ordered = sorted(configs, key=lambda c: configs[c])
    rows = tuple(_row(config, [latest.get((env.label, config)) for env in columns]) for config in ordered)
    runs = tuple(_run_info([c for (label, _), c in latest.items() if label == env.label]) for env in columns)
    return Comparison(envs=columns, rows=rows, runs=runs, skipped=skipped)


def _run_info(cells: list[CellResult]) -> RunInfo:
    launched = [c.served_by for c in cells if c.served_by is not None]
    # a cell that never got ready could not ask the server its version: the others say it
    served = [s for s in launched if s.server_version or s.test_double] or launched
    starts = sorted(c.started for c in cells if c.started)
    stamp = lambda t: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))  # noqa: E731
    dates = "" if not starts else stamp(starts[0]) if stamp(starts[0]) == stamp(starts[-1]) \
        else f"{stamp(starts[0])} - {stamp(starts[-1])}"
    loads = list(dict.fromkeys(_load_text(c.load_params) for c in cells if c.load_params))
    return RunInfo(served_by=tuple(dict.fromkeys(s.label for s in served)), dates=dates,
                   load=tuple(loads), test_double=any(s.test_double for s in served))


def _load_text(p: dict[str, Any]) -> str:
    return (f"{p.get('num_prompts')} {p.get('dataset')} prompts, {p.get('input_len')} -> "
            f"{p.get('output_len')} tokens, concurrency {p.get('max_concurrency')}")


def _row(config: str, results: list[CellResult | None]) -> Row:
    reference = _ok_throughput(results[0])
    reference_spread = results[0].spread if results[0] is not None and reference is not None else None
    cells = tuple(_cell(r, reference, reference_spread) if r else None for r in results)
    # a number measured without the feature the config asks for is not that config's: never best
    ok = [c for c in cells if c and c.load is not None and not c.ran_without]
    top = max(ok, key=lambda c: c.load.output_throughput if c.load else 0.0) if ok else None
    # no clear best where the fastest's slowest run is not above every other's fastest run
    overlapped = top is not None and top.low is not None and top.runs > 1 and any(
        c is not top and (c.high if c.high is not None else c.throughput or 0.0) >= top.low for c in ok)
    return Row(config=config, cells=cells, best=None if top is None or overlapped else top.env)


def _ok_throughput(result: CellResult | None) -> float | None:
    return result.load.output_throughput if result and result.ok and result.load else None


def _cell(result: CellResult, reference: float | None, reference_spread: float | None = None) -> Cell:
    throughput = _ok_throughput(result)
    share = throughput / reference if throughput is not None and reference else None
    share = share if share is None or math.isfinite(share) else None  # absurd records: no ratio
    values = [r.output_throughput for r in result.runs] if throughput is not None else []
    spreads = [s for s in (result.spread, reference_spread) if s is not None]
    # two numbers whose runs overlap this much cannot be told apart: the ratio is noise
    noise = share is not None and bool(spreads) and abs(share - 1) <= max(spreads)
    return Cell(env=result.env.label, config=result.config, outcome=result.outcome,
                summary=result.summary, startup_s=result.startup_s,
                load=result.load if throughput is not None else None,
                failure=None if throughput is not None else _failure(result),
                ratio=share, ran_without=tuple(result.ran_without),
                runs=max(len(result.runs), 1), spread=result.spread if throughput is not None else None,
                low=min(values) if values else None, high=max(values) if values else None,
                within_noise=noise, result=result.measured.label,
                expected=result.expected.because if result.expected else "",
                surprise=result.surprise)


def _failure(result: CellResult) -> Failure:
    if not result.findings:  # a hang or a timeout often has no signature: the summary says what
        return Failure(outcome=result.outcome, finding=None, short_fix="",
                       message=result.summary or result.outcome, fix="", line=None, log_text="")
    root = root_cause(result.findings) or result.findings[0]
    return Failure(outcome=result.outcome, finding=root.id or None, short_fix=short_fix(root.fix),
                   message=root.message or result.summary, fix=root.fix, line=root.line or None,
                   log_text=root.text)


# Fix texts read "what to do: why; or else ...": clauses end at these.
_CLAUSE_END = re.compile(r": |; |, or | \(|\. ")
_FLAG = re.compile(r"(?<![\w-])--[a-z]")


def short_fix(fix: str, limit: int = 60) -> str:
    """The fix's first clause that names a server flag (what to change), else its first clause."""
    clauses = [c.strip(" .") for c in _CLAUSE_END.split(fix) if c.strip(" .")]
    if not clauses:
        return ""
    return clip(next((c for c in clauses if _FLAG.search(c)), clauses[0]), limit)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis saying so."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# ---------------------------------------------------------------------------------------------
# Formatting shared by every renderer


def tok_s(value: float) -> str:
    return f"{value:.1f} tok/s"


def ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 100 else f"{value:.1f} ms"


def seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} s" if value >= 10 else f"{value:.1f} s"


def ratio(value: float) -> str:
    return f"×{value:.2f}"


def chart_alt(comp: Comparison) -> str:
    """What the chart shows, in words, for the page's alt text."""
    parts = []
    for row in comp.rows:
        values = [f"{env.label} {_chart_value(cell)}" for env, cell in zip(comp.envs, row.cells, strict=True)]
        parts.append(f"{row.config}: {', '.join(values)}")
    return "Output throughput (tok/s) per config and environment. " + "; ".join(parts) + "."


def _chart_value(cell: Cell | None) -> str:
    if cell is None:
        return "not run"
    if cell.failure:
        return cell.failure.headline
    value = tok_s(cell.throughput)  # type: ignore[arg-type]  # ok cells have a load
    return f"{value} ({cell.without_text})" if cell.ran_without else value


# ---------------------------------------------------------------------------------------------
# Terminal


def render_terminal(comp: Comparison, console: Console | None = None) -> None:
    """A table of configs x environments. Data goes in as Text (never read as markup) and
    through ``visible`` (never obeyed as a control sequence): see ``_shown``."""
    console = console or rich_console()
    table = Table(title="output throughput by config and environment", show_lines=True)
    table.add_column("config", style="bold")
    for index, env in enumerate(comp.envs):
        heading = _shown(env.label, "bold")
        for name, version in env.versions.items():  # one per line keeps the columns narrow
            heading.append_text(_shown(f"\n{name} {version}", "dim"))
        run = comp.runs[index] if index < len(comp.runs) else None
        for line in run.lines if run else ():
            heading.append_text(_shown(f"\n{line}", "bold yellow" if "TEST DOUBLE" in line else "dim"))
        table.add_column(heading)
    for row in comp.rows:
        table.add_row(_shown(row.config), *(_terminal_cell(row, i, cell) for i, cell in enumerate(row.cells)))
    console.print(table)
    failed = [(row, cell, cell.failure) for row in comp.rows for cell in row.cells
              if cell and cell.failure and cell.failure.fix]
    for row, cell, failure in failed:  # the table shortens each fix; here it is whole (a real one is)
        whole = _shown(f"{row.config} @ {cell.env}: ", "bold")
        whole.append_text(_shown(failure.fix, limit=_WHOLE))
        console.print(whole)


# A table cell holds a few lines (the page has the rest); a whole fix is under 1000 characters.
_IN_TABLE, _WHOLE = 300, 4000


def _shown(data: str, style: str = "", limit: int = _IN_TABLE) -> Text:
    """Recorded data as the terminal shows it: literal text (never markup), its control
    characters escaped, clipped where a damaged record would fill the screen."""
    return Text(clip(visible(data), limit), style=style)


def _terminal_cell(row: Row, column: int, cell: Cell | None) -> Text:
    text = _terminal_result(row, column, cell)
    if cell is not None and cell.surprise:
        text.append_text(_shown(f"\nEXPECTED {cell.expected}", "bold magenta"))
    return text


def _terminal_result(row: Row, column: int, cell: Cell | None) -> Text:
    if cell is None:
        return Text("not run", style="dim")
    if cell.failure:
        text = _shown(cell.failure.headline, "bold red")
        text.append_text(_shown(f"\nfix: {cell.failure.short_fix}" if cell.failure.short_fix
                                else f"\n{cell.failure.message}", "red"))
        return text
    load = cell.load
    assert load is not None  # an ok cell
    text = Text(tok_s(load.output_throughput), style="bold green" if row.shows_best(cell) else "")
    if column and cell.ratio is not None:
        text.append(f" {ratio(cell.ratio)}", style="dim")
        if cell.within_noise:
            text.append(" (within spread)", style="yellow")
    if cell.spread_text:
        text.append(f"\n{cell.spread_text}", style="dim")
    text.append(f"\nTTFT {ms(load.median_ttft_ms)}")
    if cell.ran_without:
        text.append_text(_shown(f"\n{cell.without_text.upper()}: not this config's number", "bold yellow"))
    return text


# ---------------------------------------------------------------------------------------------
# HTML

# The page: envmgr/report/templates/report.html.j2 (jinja2, autoescaped: every value is escaped).
TEMPLATE = "report.html.j2"



def _html_environment() -> Environment:
    # autoescape everything: config names, summaries and log lines come from files anyone can write
    env = Environment(loader=PackageLoader("envmgr.report", "templates"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters.update(tok_s=tok_s, ms=ms, seconds=seconds, ratio=ratio)
    return env


def render_html(comp: Comparison, png: str | None = PNG_NAME) -> str:
    """One page, no external resources but the chart PNG (relative to the page) when given."""
    return _html_environment().get_template(TEMPLATE).render(comp=comp, png=png, alt=chart_alt(comp))


def write_html(comp: Comparison, path: Path, png: str | None = PNG_NAME, force: bool = True) -> Path:
    return write_user_file(path, render_html(comp, png), force=force, what="the report page")


# ---------------------------------------------------------------------------------------------
# PNG

# Okabe-Ito: distinguishable with the common colour-vision deficiencies and in greyscale print.
_PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
_DPI = 100


def write_png(comp: Comparison, path: Path, force: bool = True) -> Path:
    return write_user_file(path, render_png(comp), force=force, what="the chart")


def render_png(comp: Comparison) -> bytes:
    """Grouped bars of output throughput (the median run; the runs' range as an error bar); a
    failed cell gets no bar, only its outcome written upright at the axis."""
    # matplotlib is slow to import and only this needs it; Figure + the Agg canvas never touch
    # pyplot's global state, and the default style keeps a user's matplotlibrc out of the file.
    import matplotlib.style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.text import Text as ChartText

    n_envs = max(len(comp.envs), 1)
    with matplotlib.style.context("default"):
        width_in = min(16.0, max(6.0, 1.5 + len(comp.rows) * (0.8 + 0.9 * n_envs)))  # fits a page
        fig = Figure(figsize=(width_in, 5.2), dpi=_DPI, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        top = max((c.throughput for r in comp.rows for c in r.cells if c and c.throughput), default=1.0)
        width = 0.8 / n_envs
        for j in range(n_envs):
            colour = _PALETTE[j % len(_PALETTE)]
            for i, row in enumerate(comp.rows):
                _draw_bar(ax, i + (j - (n_envs - 1) / 2) * width, width, row.cells[j], j, colour, top)
        ax.set_xticks(range(len(comp.rows)), [_chart_label(row.config) for row in comp.rows])
        ax.set_xlim(-0.5, max(len(comp.rows), 1) - 0.5)
        ax.set_ylim(0, top * 1.3)  # room for the value labels above the tallest bar
        ax.set_ylabel("output throughput (tok/s)")
        ax.set_xlabel("benchmark config")
        ax.set_title("Output throughput by config and environment")
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        ax.spines[["top", "right"]].set_visible(False)
        handles = [Patch(facecolor=_PALETTE[j % len(_PALETTE)], label=_chart_label(env.label, 60))
                   for j, env in enumerate(comp.envs)]
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 5), frameon=False)
        for text in fig.findobj(ChartText):  # labels are data: "$x^2$" or "$$" is text, never mathtext
            text.set_parse_math(False)
        # no Software/date chunks: the same results give the same bytes
        image = io.BytesIO()
        fig.savefig(image, format="png", dpi=_DPI, metadata={"Software": None})
    return image.getvalue()


def _draw_bar(ax: Any, x: float, width: float, cell: Cell | None, column: int, colour: str, top: float) -> None:
    if cell is None:
        ax.annotate("not run", (x, 0), xytext=(0, 4), textcoords="offset points", ha="center",
                    va="bottom", rotation=90, fontsize=8, color="#777777")
        return
    if cell.failure:  # no bar: there is no throughput to draw; upright, as ids are wide
        ax.annotate(f"\u2717 {_chart_label(cell.failure.headline)}", (x, 0), xytext=(0, 4),
                    textcoords="offset points", ha="center", va="bottom", rotation=90, fontsize=8.5,
                    color="#b00020")
        return
    value = cell.throughput or 0.0
    spread = None
    if cell.low is not None and cell.high is not None and cell.runs > 1:
        # the slowest and the fastest run; a record whose median lies outside its runs would
        # give a negative arm, which matplotlib refuses
        spread = [[max(value - cell.low, 0.0)], [max(cell.high - value, 0.0)]]
    if cell.ran_without:  # hatched and labelled: a number, but not of the feature asked for
        ax.bar(x, value, width, color="white", edgecolor=colour, hatch="..", linewidth=1.5, yerr=spread,
               capsize=3, ecolor="#333333")
    else:
        ax.bar(x, value, width, color=colour, yerr=spread, capsize=3, ecolor="#333333")
    label = f"{value:.1f}" + (f"\n{ratio(cell.ratio)}" if column and cell.ratio is not None else "")
    if column and cell.within_noise:
        label += " (within spread)"
    if cell.ran_without:
        label += "\n" + _chart_label(cell.without_text)
    ax.annotate(label, (x, value), xytext=(0, 3), textcoords="offset points", ha="center",
                va="bottom", fontsize=9)


def _chart_label(data: str, limit: int = 40) -> str:
    """Recorded data as a chart label: one short line, control characters escaped."""
    return clip(visible(" ".join(data.split())), limit)


# ---------------------------------------------------------------------------------------------
# All of it


def write_report(cells: Iterable[CellResult], out_dir: Path, force: bool = False) -> dict[str, Path]:
    """report.html with throughput.png beside it, and report.json (the comparison), in a folder
    the user names (``envmgr.userfiles``: regular files only, atomic, an existing file only
    with ``force``). Every target is checked before the first is written: all or none."""
    out_dir = output_dir(out_dir)
    targets = {"html": out_dir / HTML_NAME, "png": out_dir / PNG_NAME, "json": out_dir / JSON_NAME}
    for key, path in targets.items():
        check_writable(path, force=force, what=f"the report's {key}")
    comp = comparison(cells)
    return {"png": write_png(comp, targets["png"], force=force),
            "html": write_html(comp, targets["html"], png=PNG_NAME, force=force),
            "json": write_user_file(targets["json"], json.dumps(comp.to_dict(), indent=2) + "\n", force=force,
                                    what="the report's json")}
