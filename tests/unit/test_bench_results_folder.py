"""Where `envmgr bench` keeps an environment named by URL (issue 24): one folder per exact URL,
so two environments never overwrite each other's results; results recorded in the folder
envmgr named before still report, and resume only where their result names the same URL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envmgr.bench import results
from envmgr.bench.collect import results_in_store
from envmgr.bench.matrix import plan_cells, resolve_envs
from envmgr.bench.results import CellResult, LoadResult, write_result
from envmgr.spec import load_spec

SPEC = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "double-bench.yaml"
LOOKALIKES = ("venv:///x/a_b", "venv:///x/a/b", "venv:///x/a b", "venv:///x/a__b", "venv:///x/a_b/")


@pytest.fixture(scope="module")
def spec():
    return load_spec(SPEC).spec


def test_urls_that_read_alike_get_folders_of_their_own(spec, tmp_path):
    """Before: all five became bench/targets/venv_x_a_b, each overwriting the others' results."""
    envs = resolve_envs(list(LOOKALIKES), spec, tmp_path)
    folders = [env.results_dir for env in envs]
    assert len(set(folders)) == len(LOOKALIKES)
    assert all(folder.parent == tmp_path.resolve() / "bench" / "targets" for folder in folders)
    assert all(folder.name.startswith("venv_x_a") for folder in folders)  # still readable


@pytest.mark.parametrize("url", ["venv:///opt/" + "deep/" * 200 + "env", "docker://r/i:t?x=/../..&y=%2F",
                                 "venv:///opt/é中/$x^2$"])
def test_a_folder_name_is_one_short_path_component(url):
    name = results.target_folder(url)
    assert "/" not in name and name not in (".", "..") and len(name.encode()) <= 100
    assert results.target_folder(url) == name  # stable: a rerun resumes in the same folder


def _recorded_in(folder: Path, cell) -> CellResult:
    load = LoadResult(10.0, 30.0, 0.1, 8, 60.0, *([1.0] * 9))
    result = CellResult(env=cell.env.info, config=cell.config, outcome="ok", summary="10.0 tok/s",
                        argv=cell.command.argv, server_env=cell.shown_env, load_argv=cell.load_argv, load=load,
                        finished=1.0)
    write_result(folder / cell.config, result)
    return result


def test_a_result_in_the_old_folder_resumes_only_for_its_own_url(spec, tmp_path):
    mine, other = resolve_envs(["venv:///x/a_b", "venv:///x/a/b"], spec, tmp_path)
    cells = plan_cells(spec, [mine, other], ["baseline"], python_of=lambda env: "/x/bin/python")
    legacy = tmp_path.resolve() / "bench" / "targets" / results.legacy_target_folder(mine.url)
    recorded = _recorded_in(legacy, cells[0])  # the old folder held mine (the last one run)
    assert cells[0].recorded().summary == recorded.summary
    assert cells[0].recorded().server_log == str(legacy / "baseline" / "server.log")  # where it is
    assert cells[1].recorded() is None  # same old folder, another URL's result: run it


def test_the_report_reads_old_and_new_folders_by_what_each_result_says(spec, tmp_path):
    mine, other = resolve_envs(["venv:///x/a_b", "venv:///x/a/b"], spec, tmp_path)
    cells = plan_cells(spec, [mine, other], ["baseline"], python_of=lambda env: "/x/bin/python")
    _recorded_in(tmp_path.resolve() / "bench" / "targets" / results.legacy_target_folder(mine.url), cells[0])
    _recorded_in(other.results_dir, cells[1])
    labels = sorted(c.env.label for c in results_in_store(tmp_path, warn=lambda line: None))
    assert labels == sorted([mine.info.label, other.info.label])
