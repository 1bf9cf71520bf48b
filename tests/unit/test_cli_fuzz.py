"""Whatever a user types, envmgr answers with a message and an exit code, never a traceback
(issue 12). Read-only commands only: nothing here may build, launch or probe anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envmgr.cli import main

ROOT = Path(__file__).resolve().parents[2]
# Each command with the options it takes (None: a flag without a value) and its positionals.
COMMANDS = {
    "validate": (["--json", ("--facts",)], 1), "plan": (["--json", ("--from",), ("--facts",)], 1),
    "advise": (["--json", ("--from",)], 1),
    "triage": (["--json"], 1), "generations": (["--json", ("--home",)], 0),
    "rollback": ([("--to",), "--force", ("--home",)], 0), "status": (["--json", ("--home",)], 0),
    "report": ([("--results",), ("--out",), ("--env",), ("--home",), "--json"], 0), "schema": ([], 0),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    where = tmp_path_factory.mktemp("fuzz")
    (where / "bad.yaml").write_text("apiVersion: envmgr/v1\nmetadata: {name: [\n")
    (where / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (where / "list.json").write_text("[1, 2, 3]")
    (where / "facts.json").write_text('{"driver_version": 5}')
    (where / "a_file").write_text("")
    real = (ROOT / "specs" / "cuda128.yaml").read_text()  # with numbers past int()'s 4300 digits (issue 24)
    (where / "huge.yaml").write_text(real.replace('"2.9.1"', f'">={"9" * 5000}"').replace(
        "--tp-size: 8", f"--tp-size: {'9' * 400}"))
    return [str(ROOT / "specs" / "cuda13.yaml"), str(ROOT / "specs" / "cuda128.yaml"), str(where),
            "/dev/null", str(where / "missing.yaml"), str(where / "bad.yaml"), str(where / "binary.yaml"),
            str(where / "list.json"), str(where / "facts.json"), str(where / "a_file" / "below"),
            str(where / "huge.yaml"), "9" * 5000,
            str(ROOT / "tests" / "fixtures" / "triage" / "nccl_sglang_8974.log"),
            "docker://Not A Repo", "ansible://all?inventory=/nope.yml", "venv://rel/path", "local://",
            "conda://x", "-5", "0", "99", "1e400", "abc", "", " ", "é", "\x1b[31m"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_command_line_ends_in_an_exit_code_not_a_traceback(files, data, tmp_path_factory, capsys, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("ENVMGR_HOME", str(home))
    monkeypatch.chdir(home)  # `report` writes ./envmgr-report by default: never into the checkout
    value = st.sampled_from(files) | st.text(max_size=12).filter(lambda t: "\0" not in t)
    command = data.draw(st.sampled_from(sorted(COMMANDS)))
    options, positionals = COMMANDS[command]
    argv = [command] + [data.draw(value) for _ in range(positionals)]
    for option in data.draw(st.lists(st.sampled_from(options), max_size=3)) if options else []:
        argv += [option[0], data.draw(value)] if isinstance(option, tuple) else [option]
    if data.draw(st.booleans()):  # and sometimes anything at all
        argv.insert(data.draw(st.integers(0, len(argv))), data.draw(value | st.sampled_from(["--", "-", "-h"])))
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc in (0, 1, 2, 64), (argv, rc, err)  # 64: a command line argparse rejects
    assert "Traceback" not in out + err, argv
