"""Find recorded benchmark results: in the generations, in bench targets, or under a folder.

Each result.json is read through ``load_result``: a damaged one (too big, too deep, not JSON, a
field of the wrong type) is skipped with a warning on stderr that names the file, what is wrong
and what to do, and is kept in ``Results.skipped`` so the written report lists it too; the
other cells are still reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from envmgr.bench.results import RESULT_FILE, CellResult, DamagedResult, load_result
from envmgr.errors import UsageError

Warn = Callable[[str], None]


class Results(list):
    """The readable cells (a list of CellResult), with the files that were skipped and why."""

    def __init__(self, cells: Iterable[CellResult] = (), skipped: Iterable[DamagedResult] = ()) -> None:
        super().__init__(cells)
        self.skipped: list[DamagedResult] = list(skipped)


def warn_on_stderr(line: str) -> None:
    from envmgr.report.printer import stderr_printer

    stderr_printer().line((line, "yellow"))


def results_under(root: Path, warn: Warn = warn_on_stderr) -> Results:
    """Every ``result.json`` below ``root`` (a copied or recorded results tree)."""
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory of benchmark results",
                         hint="give the folder that holds <env>/<config>/result.json files")
    return _read_all(sorted(root.rglob(RESULT_FILE)), warn)


def results_in_store(home: Path | None, generations: Sequence[int] = (), warn: Warn = warn_on_stderr) -> Results:
    """Results of the generations (all, or those named) and of the URL targets. A target's folder
    name says nothing about whose results it holds: each result.json says which environment."""
    from envmgr.state import Store

    store = Store(home)
    wanted = set(generations)
    files = []
    for gen in store.generations():
        if not wanted or gen.number in wanted:
            files += sorted((gen.path / "bench").glob(f"*/{RESULT_FILE}"))
    if not wanted:
        files += sorted((store.home / "bench" / "targets").glob(f"*/*/{RESULT_FILE}"))
    return _read_all(files, warn)


def _read_all(files: Sequence[Path], warn: Warn) -> Results:
    results = Results()
    for path in files:
        try:
            results.append(load_result(path))
        except DamagedResult as damaged:
            warn(damaged.warning)
            results.skipped.append(damaged)
    return results
