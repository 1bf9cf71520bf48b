"""Damaged result.json files, generated from real ones, through the whole report.

Two real results recorded on the H200 (tests/fixtures/bench/results_h200_sglang_0.5.11: an ok
cell, re-written in today's shape with every field set, and a crashed one as recorded) are
mutated at every field path (each type in place of the value, the key missing, a huge string of
markup and control characters, NaN, infinities, numbers at the float limits, nesting past the
depth limit), and as whole files (empty, truncated, binary, NUL bytes, a list or a string at the
top, bigger than the size limit, a FIFO, a directory, a symlink). Each batch goes through the
report as ``envmgr report`` makes it: the terminal table, report.html, throughput.png and
report.json. No exception may escape; each file is either reported or named (with its problem
and what to do) in the warnings, on the page and in report.json.
"""

from __future__ import annotations

import io
import json
import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import pytest
from rich.console import Console

from envmgr.bench.collect import results_under
from envmgr.bench.results import CellResult, DamagedResult, load_result
from envmgr.report.bench import comparison, render_terminal, write_report

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "results_h200_sglang_0.5.11"
RENDERERS = ("terminal", "html", "png", "json")
# data that means something to each renderer: mathtext, rich markup, HTML, terminal controls
HOSTILE = "$\\undefined$ $$ [bold red]x[/] [link=http://e]l[/link] <script>alert(1)</script> " \
          "\x1b[2J\x1b]8;;http://evil\x07link\x1b]8;;\x07\r\x9b31m\u202eevil\x00"
HUGE = HOSTILE * 2500  # about 250 kB in one field


def base_results() -> dict[str, dict[str, Any]]:
    """An ok cell with every field today's envmgr writes, and a crashed one as recorded."""
    ok = CellResult.from_dict(json.loads((REAL / "baseline" / "result.json").read_text()))
    slower = replace(ok.load, output_throughput=ok.load.output_throughput * 0.97)
    ok = replace(ok, runs=(ok.load, slower, ok.load), ran_without=("cuda graphs",), warmup=True, order=1,
                 log_tail=("a line",), verdict_after_line_s=0.001)
    crashed = json.loads((REAL / "kv_0006" / "result.json").read_text())
    return {"ok": ok.to_dict(), "crashed": crashed}


def field_paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every object key and the first list item, at every depth; a finding's ``values`` (what
    triage read from the log, never shown by the report) as a whole."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield prefix + (key,)
            if key != "values":
                yield from field_paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value[:1]):
            yield prefix + (index,)
            yield from field_paths(item, prefix + (index,))


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


_MISSING = object()
# What takes each field's place, in groups: one report per group (a chart's time grows faster
# than its rows: groups of about 150 rows keep the whole file to seconds).
VALUES: dict[str, dict[str, Any]] = {
    "scalars": {"str": "x", "int": 7, "float": 1.5, "bool": True, "null": None},
    "containers": {"list": [1, "a"], "dict": {"a": 1}, "empty_list": [], "empty_dict": {}, "missing": _MISSING},
    "text": {"hostile": HOSTILE, "huge_str": HUGE},
    "numbers": {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "max": 1.7976931348623157e308,
                "tiny": 5e-324, "negative": -1, "zero": 0, "bigint": 10**400},
    "nesting": {"deep": nested(40)},
}


def mutated(data: dict[str, Any], path: tuple, value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(data))
    parent = copy
    for step in path[:-1]:
        parent = parent[step]
    if value is _MISSING:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return copy


def whole_file_damage(data: dict[str, Any]) -> dict[str, bytes]:
    text = json.dumps(data, indent=2).encode()
    return {
        "empty": b"", "spaces": b"  \n", "truncated_third": text[: len(text) // 3],
        "truncated_half": text[: len(text) // 2], "truncated_last_byte": text[:-1],
        "binary": bytes(range(256)) * 4, "nul_bytes": text.replace(b'"config"', b'"con\x00fig"', 1),
        "nul_prefix": b"\x00" * 16 + text, "bom": b"\xef\xbb\xbf" + text, "latin1": text.replace(b"x", b"\xe9"),
        "top_list": b"[" + text + b"]", "top_string": b'"a result"', "top_number": b"42", "top_null": b"null",
        "deep_100k": b"[" * 100_000 + b"]" * 100_000, "deep_object": b'{"a":' * 5000 + b"1" + b"}" * 5000,
        "over_size_limit": json.dumps({**data, "summary": "s" * (5 << 20)}).encode(),
        "nan_literal": text.replace(b'"startup_s": ', b'"startup_s": NaN, "x": ', 1),
    }


def write_cell(root: Path, name: str, content: bytes) -> Path:
    cell = root / name
    cell.mkdir(parents=True)
    path = cell / "result.json"
    path.write_bytes(content)
    return path


def field_batches() -> Iterator[tuple[str, dict[str, bytes]]]:
    """One batch per group: each of its values at every path of both results, each file its own
    report row."""
    bases = base_results()
    for group, values in VALUES.items():
        files = {}
        for kind, value in values.items():
            for base_name, data in bases.items():
                for index, path in enumerate(field_paths(data)):
                    name = f"{kind}-{base_name}-{index}"
                    damaged = mutated(dict(data, config=name), path, value)  # its own row
                    if path == ("config",) and isinstance(value, str):  # both bases' own row
                        damaged["config"] += f" ({base_name})"
                    files[name] = json.dumps(damaged, allow_nan=True).encode()
        yield group, files


def report_all(root: Path, out: Path) -> tuple[list[str], str, dict[str, Any], str]:
    """What `envmgr report --results root --out out` shows and writes: warnings, terminal text,
    report.json, report.html."""
    warnings: list[str] = []
    cells = results_under(root, warn=warnings.append)
    console = Console(file=io.StringIO(), width=160, color_system=None)
    render_terminal(comparison(cells), console)
    written = write_report(cells, out)
    assert written["png"].read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

    def strict(constant: str) -> None:
        raise AssertionError(f"report.json holds {constant}: not JSON")

    data = json.loads(written["json"].read_text(encoding="utf-8"), parse_constant=strict)
    return warnings, console.file.getvalue(), data, written["html"].read_text(encoding="utf-8")


def check_report(root: Path, out: Path, files: list[Path]) -> tuple[int, int]:
    """Every file is reported or named as skipped, everywhere; nothing hostile gets through.
    Returns (reported, skipped)."""
    verdicts = {}
    for path in files:
        try:
            load_result(path)
            verdicts[path] = None
        except DamagedResult as damaged:
            verdicts[path] = damaged
    warnings, terminal, data, html = report_all(root, out)
    skipped = {p for p, d in verdicts.items() if d is not None}
    assert {Path(s["path"]) for s in data["skipped"]} == skipped
    for path in skipped:
        problem = verdicts[path].problem
        assert any(str(path) in w and problem in w and "--rerun" in w for w in warnings), path
        assert str(path) in html
    reported = sum(1 for row in data["rows"] for cell in row["cells"] if cell is not None)
    assert reported == len(files) - len(skipped)
    for shown in (terminal, *warnings):  # issue 24: controls escaped, never sent to the terminal
        assert not any(ch in shown for ch in ("\x1b", "\r", "\x9b", "\u202e", "\x00")), shown[:200]
    assert "<script" not in html.lower()
    return reported, len(skipped)


COUNTS: dict[str, tuple[int, int]] = {}


@pytest.mark.parametrize(("kind", "files"), list(field_batches()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_field_mutation_goes_through_every_renderer(tmp_path, kind, files):
    root = tmp_path / "results"
    paths = [write_cell(root, name, content) for name, content in files.items()]
    COUNTS[kind] = check_report(root, tmp_path / "out", paths)


def test_whole_file_damage_goes_through_every_renderer(tmp_path):
    root = tmp_path / "results"
    paths = []
    for base_name, data in base_results().items():
        for kind, content in whole_file_damage(data).items():
            paths.append(write_cell(root, f"{base_name}-{kind}", content))
        paths.append(write_cell(root, f"{base_name}-intact", json.dumps(dict(data, config=base_name)).encode()))
    fifo, directory, link = root / "fifo", root / "directory", root / "link"
    for cell in (fifo, directory, link):
        cell.mkdir()
    os.mkfifo(fifo / "result.json")  # would block a plain open() for ever
    (directory / "result.json").mkdir()
    (link / "result.json").symlink_to("/dev/zero")
    paths += [fifo / "result.json", directory / "result.json", link / "result.json"]
    reported, skipped = check_report(root, tmp_path / "out", paths)
    assert reported == 2  # the intact ones: the rest of the report is still written
    COUNTS["whole-file"] = (reported, skipped)


def test_fuzz_counts_are_what_they_say():
    """Runs after the others (file order): the mutations x renderers behind this file."""
    if len(COUNTS) < len(VALUES) + 1:
        pytest.skip("run with the fuzz tests above")
    files = sum(r + s for r, s in COUNTS.values())
    print(f"\nfuzz: {files} damaged files ({sum(s for _, s in COUNTS.values())} refused by the reader, "
          f"{sum(r for r, _ in COUNTS.values())} reported) x {len(RENDERERS)} renderers "
          f"= {files * len(RENDERERS)} renderings, in {len(COUNTS)} reports")
    assert files > 1000
