"""Find recorded benchmark results: in the generations, in bench targets, or under a folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envmgr.bench.results import RESULT_FILE, CellResult, read_result
from envmgr.errors import UsageError


def results_under(root: Path) -> list[CellResult]:
    """Every readable ``result.json`` below ``root`` (a copied or recorded results tree)."""
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory of benchmark results",
                         hint="give the folder that holds <env>/<config>/result.json files")
    return _read_all(sorted(p.parent for p in root.rglob(RESULT_FILE)))


def results_in_store(home: Path | None, generations: Sequence[int] = ()) -> list[CellResult]:
    """Results of the generations (all, or those named) and of the URL targets."""
    from envmgr.state import Store

    store = Store(home)
    wanted = set(generations)
    dirs = []
    for gen in store.generations():
        if not wanted or gen.number in wanted:
            dirs += sorted(p.parent for p in (gen.path / "bench").glob(f"*/{RESULT_FILE}"))
    if not wanted:
        dirs += sorted(p.parent for p in (store.home / "bench" / "targets").glob(f"*/*/{RESULT_FILE}"))
    return _read_all(dirs)


def _read_all(dirs: Sequence[Path]) -> list[CellResult]:
    results = [read_result(d) for d in dirs]
    return [r for r in results if r is not None]
