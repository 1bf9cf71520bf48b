"""``envmgr completion``: the script completes commands and each command's own options in a real
bash (and zsh, where installed), from the parser, so a new option needs no edit here."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from envmgr.cli import build_parser


def script(shell: str) -> str:
    done = subprocess.run([sys.executable, "-m", "envmgr", "completion", shell], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def complete(words: list[str], shell: str = "bash", cwd=None) -> list[str]:
    """COMPREPLY for the command line ``words`` (the last one being completed)."""
    words_literal = " ".join(f"'{w}'" for w in words)
    program = (script(shell) + f"\nCOMP_WORDS=({words_literal}); COMP_CWORD={len(words) - 1}; _envmgr\n"
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    # zsh: bashcompinit's wrapper calls a bash function with ksharrays (0-based arrays), as here
    argv = ["bash", "-c", program] if shell == "bash" else ["zsh", "-c", "setopt ksharrays\n" + program]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line]


def test_the_first_word_completes_to_commands():
    assert complete(["envmgr", "pl"]) == ["plan"]
    assert set(complete(["envmgr", "ro"])) == {"rollback"}


def test_a_command_completes_to_its_own_options_even_after_global_ones():
    assert complete(["envmgr", "apply", "--lo"]) == ["--locked"]
    assert complete(["envmgr", "-q", "plan", "--o"]) == ["--out"]
    assert "--locked" not in complete(["envmgr", "plan", "--"])  # apply's, not plan's


def test_every_option_of_the_parser_is_in_the_script():
    text = script("bash")
    for name, sub in build_parser().commands.items():
        for action in sub._actions:
            for option in action.option_strings:
                assert option in text, (name, option)


def test_other_words_complete_to_file_names(tmp_path):
    (tmp_path / "cuda13.yaml").write_text("x")
    assert complete(["envmgr", "validate", "cu"], cwd=tmp_path) == ["cuda13.yaml"]


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed here (.ci/run installs it)")
def test_zsh_uses_the_same_script_through_bashcompinit():
    # zsh's compgen offers every candidate and its completion widget filters them by the prefix
    offered = complete(["envmgr", "apply", "--fro"], shell="zsh")
    assert "--frozen" in offered and "--locked" in offered and "--out" not in offered  # apply's own


def test_an_unknown_shell_is_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "envmgr", "completion", "fish"], capture_output=True, text=True)
    assert done.returncode == 64 and "invalid choice" in done.stderr
