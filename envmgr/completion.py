"""``envmgr completion bash|zsh``: a completion script made from the parser itself, so it
knows every command and option the installed envmgr has (``eval "$(envmgr completion bash)"``
in ~/.bashrc; zsh: the same line in ~/.zshrc, through bashcompinit).

Words after a command complete to its options when they start with ``-``, else to file names
(specs, logs, plans). Command and option names are data of the parser: letters, digits and
``-`` only, checked before they go into the script.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping

from envmgr.errors import UsageError

SHELLS = ("bash", "zsh")
_WORD = re.compile(r"^-{0,2}[A-Za-z0-9][A-Za-z0-9-]*$")


def _words(words: list[str]) -> str:
    for word in words:
        if not _WORD.fullmatch(word):  # never a quote or a $ inside the script
            raise ValueError(f"not a completion word: {word!r}")
    return " ".join(words)


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted({name for action in parser._actions for name in action.option_strings})


def script(parser: argparse.ArgumentParser, commands: Mapping[str, argparse.ArgumentParser], shell: str) -> str:
    """The completion script for ``shell``."""
    if shell not in SHELLS:
        raise UsageError(f"no completion for {shell!r}", hint=f"use one of {', '.join(SHELLS)}")
    cases = "\n".join(f"        {name}) opts={_words(_options(sub))!r} ;;" for name, sub in commands.items())
    body = f"""_envmgr() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} opts command="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${{COMP_WORDS[i]}} in -*) ;; *) command=${{COMP_WORDS[i]}}; break ;; esac
    done
    if [[ -z $command ]]; then
        COMPREPLY=($(compgen -W {_words([*commands, *_options(parser)])!r} -- "$cur"))
        return
    fi
    case $command in
{cases}
        *) opts="" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _envmgr envmgr
"""
    if shell == "zsh":
        return ("(( $+functions[compdef] )) || { autoload -U +X compinit && compinit -u }\n"
                "autoload -U +X bashcompinit && bashcompinit\n" + body)
    return body
