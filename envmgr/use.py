"""Using an environment: ``envmgr run``, ``envmgr shell`` and ``envmgr env``.

An environment is named as ``bench --env`` names one: ``current`` (the default), a generation
number, or a target URL. Its commands get what the target gives every command
(``Target.environment()``): in a venv, its bin first on PATH, CUDA_HOME and PATH of a pip
toolkit and the spec's env; in an image, the image's own ENV; on hosts, the current env's
recorded variables. A venv that is not there (deleted, a mistyped path) is an error naming
it: nothing ever runs in the host's own python instead.

Secrets are never printed. The secret names are the union of the name rule, the names the
environment recorded in its 0600 env file and the ``secrets:`` of every generation that
built it (found by its URL too), never fewer than the name rule: a rewritten ``spec.yaml``
cannot unmark one. Where no source says (a URL no generation built, an unreadable spec),
every value but those envmgr sets itself is hidden, and the output says why. ``env`` redacts
by name and by value (``envmgr.secrets.Redactor``); ``--sh`` prints only values that hold no
secret, each single-quoted, reads the others from the 0600 file when evaluated, and refuses
names that are not portable shell names: sh, dash, bash, zsh and ksh evaluate it alike.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envmgr.errors import CommandNotFound, EnvmgrError, StateError, UsageError
from envmgr.secrets import Redactor, secret_names, secret_names_of

if TYPE_CHECKING:
    from envmgr.state import Generation, Store
    from envmgr.targets.base import Recorded, Target

# Set by envmgr itself (a venv's folder and bin, a pip toolkit's prefix): shown even where
# which variables are secrets is unknown.
ENVMGR_OWN = frozenset({"PATH", "VIRTUAL_ENV", "CUDA_HOME"})
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)  # what every POSIX shell takes
# Writes one recorded variable's exact bytes and a '.', which keeps a trailing newline through $(...).
_READ_ONE = ('import json, sys; v = json.load(open(sys.argv[1], encoding="utf-8"))[sys.argv[2]]; '
             'sys.stdout.buffer.write(v.encode("utf-8", "surrogateescape") + b".")')


@dataclass(frozen=True)
class Chosen:
    """The environment a command names: its target URL, the generation named (None for a
    URL), and every generation that built it (whose secrets it holds)."""

    url: str
    generation: Generation | None
    built_by: tuple[Generation, ...] = ()

    @property
    def label(self) -> str:
        return f"generation {self.generation.number} ({self.url})" if self.generation else self.url


def choose(name: str | None, home: Path | None) -> Chosen:
    """``current``, ``N`` or a target URL -> the environment (``current`` when None)."""
    from envmgr.state import Store

    store = Store(home)
    if name and "://" in name:
        _check_url(name)  # a clear error for a bad URL before anything runs
        return Chosen(name, None, _built(store, name))
    generation = store.named(name or "current")
    return Chosen(generation.backend, generation, _built(store, generation.backend) or (generation,))


def _check_url(url: str) -> None:
    from envmgr.backends import target_class
    from envmgr.targets.urls import split_url

    target_class(split_url(url)[0]).check_url(url)


def _built(store: Store, url: str) -> tuple[Generation, ...]:
    """The store's generations that built the environment ``url`` names."""
    from envmgr.targets.urls import split_url

    scheme, path, _ = split_url(url)
    return tuple(g for g in store.generations() if _builds(g, scheme, path))


def _builds(gen: Generation, scheme: str, path: str) -> bool:
    from envmgr.targets.urls import split_url

    try:
        built_scheme, built_path, _ = split_url(gen.backend)
    except UsageError:  # a damaged record names nothing
        return False
    if built_scheme != scheme:
        return False
    from envmgr.backends import target_class

    return target_class(scheme).same_place(built_path, gen.location or "", path)


def require_present(chosen: Chosen, target: Target) -> None:
    """An environment that is gone (a venv deleted, a generation's venv without its recorded env)
    is an error: commands never run in the host's python, nor without the spec's env."""
    absent = target.absent(bool(chosen.built_by))
    if absent is None:
        return
    missing, how = absent
    if chosen.built_by:
        raise StateError(f"{chosen.label}: {missing}",
                         hint="`envmgr rollback` to a generation whose venv is there, or `envmgr apply SPEC` "
                              "again; `envmgr generations` lists them")
    raise UsageError(f"{chosen.url}: {missing}", hint=how)


# --- what may be printed ----------------------------------------------------------------------


@dataclass(frozen=True)
class Secrecy:
    """What of an environment's values may be printed."""

    redact: Redactor  # names: never shown; values: the secrets, replaced wherever a value holds one
    why: str | None = None  # why every value but envmgr's own is hidden, when no source names the secrets


def secrecy(env: Mapping[str, str], chosen: Chosen, target: Target) -> Secrecy:
    """The secrets of ``env``: by the name rule, the env file's recorded names, and the spec
    of every generation that built it; all values but ``ENVMGR_OWN`` where none says."""
    from envmgr.state import current_spec

    recorded = _recorded(target)
    own = recorded.secrets if recorded is not None else None  # named in the environment's 0600 file
    sources = [own] if own is not None else []
    unread = []
    for gen in chosen.built_by:
        try:
            sources.append(secret_names(current_spec(gen).spec))
        except (EnvmgrError, OSError):
            unread.append(gen.number)
    why = None
    if own is None and not chosen.built_by:
        why = "no generation of this store built this environment"
    elif own is None and unread:
        why = f"the spec.yaml of generation {unread[0]} cannot be read"
    secret = secret_names_of(env, *sources)
    hidden = secret if why is None else secret | {n for n in env if n not in ENVMGR_OWN}
    values = [env[n] for n in secret if env.get(n)]
    if why is not None:
        why += (": which variables are secrets is unknown, so every value but "
                + ", ".join(sorted(ENVMGR_OWN)) + " is hidden")
    return Secrecy(Redactor(hidden, values), why)


def _recorded(target: Target) -> Recorded | None:
    return target.recorded()


def shown(env: Mapping[str, str], secrets: Secrecy) -> dict[str, str]:
    """The environment's variables as they may be printed (secrets replaced, also inside others)."""
    return secrets.redact.env(dict(sorted(env.items())))


@dataclass(frozen=True)
class Exports:
    """``envmgr env --sh``: the text to evaluate, and the names left out of it."""

    text: str
    refused: tuple[str, ...] = ()


def exports(env: Mapping[str, str], secrets: Secrecy, target: Target) -> Exports:
    """Lines for ``eval "$(envmgr env --sh)"`` in any POSIX shell: every value single-quoted;
    a value that is or holds a secret read from the 0600 env file when evaluated (left out
    where there is none); no path or value in a comment."""
    recorded = _recorded(target)
    env_file = target.recorded_env_file()
    lines = [comment(secrets.why)] if secrets.why else []
    refused = []
    for name, value in sorted(env.items()):
        if not SHELL_NAME.fullmatch(name):
            refused.append(name)  # pasted into shell text it could stop the eval, or worse
        elif secrets.redact.value(name, value) == value:
            lines.append(f"export {name}={sh_quote(value)}")
        elif env_file is not None and recorded is not None and recorded.variables.get(name) == value:
            read = " ".join(map(sh_quote, [sys.executable, "-I", "-c", _READ_ONE, env_file, name]))
            lines += [comment(f"{name}: a secret, or holds one: read from the 0600 env file when evaluated"),
                      f'{name}="$({read})"', f'export {name}="${{{name}%.}}"']
        else:
            lines.append(comment(f"{name}: a secret, or holds one: not exported (it lives where the environment runs)"))
    return Exports("\n".join(lines) + "\n", tuple(refused))


def sh_quote(text: str) -> str:
    """``text`` single-quoted, always: the same word in sh, dash, bash, zsh and ksh (zsh expands
    a bare leading '=', which shlex.quote leaves bare)."""
    return "'" + text.replace("'", "'\\''") + "'"


def comment(text: str) -> str:
    # one line, whatever text holds: a newline in a comment would start a command
    return "# " + "".join(c if c.isprintable() else "?" for c in text)


def refusal(name: str) -> str:
    """Why ``name`` is not exported (for stderr)."""
    return (f"envmgr env --sh: {name!r} is not exported: not a portable shell variable name "
            "(ASCII letters, digits and _, not starting with a digit); `envmgr run` gives it to commands")


# --- running ----------------------------------------------------------------------------------


def command_argv(argv: Sequence[str]) -> list[str]:
    """The command of ``envmgr run [--] CMD ...``, checked before any environment is opened."""
    argv = list(argv[1:] if argv[:1] == ["--"] else argv)
    usage = "envmgr run [--env GEN|URL] -- CMD [ARGS...]"
    if not argv:
        raise UsageError("no command to run", hint=usage)
    if not argv[0]:
        raise UsageError("the command to run is an empty string ('')", hint=f"{usage}: name the program first")
    return argv


def exec_here(target: Target, argv: Sequence[str]) -> None:
    """Replace this process with ``argv`` in the environment (stdin, terminal and signals are
    the command's own). Only for targets whose processes are this machine's."""
    env = {**os.environ, **target.environment()}
    try:
        os.execvpe(argv[0], list(argv), env)
    except FileNotFoundError as exc:
        raise CommandNotFound(f"{argv[0]}: command not found in {target.url}",
                              hint="install it in the environment (add its package to the spec)") from exc
    except OSError as exc:
        raise UsageError(f"cannot run {argv[0]}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # an empty name, a NUL byte: no program could have it
        raise UsageError(f"cannot run {argv[0]!r}: {exc}") from exc


def run_there(target: Target, argv: Sequence[str], timeout: float) -> int:
    """Run ``argv`` where the target runs it (a container, every host of a group), then print
    what it printed; the exit code is the first non-zero one."""
    results = target.run_all(argv, timeout=timeout)
    code = 0
    for where, result in results.items():
        if len(results) > 1:
            print(f"== {where} (exit {result.returncode})", flush=True)
        for stream, text in ((sys.stdout, result.stdout), (sys.stderr, result.stderr)):
            # ansible's command module strips the last newline: put it back, hosts apart
            stream.write(text + ("\n" if text and not text.endswith("\n") else ""))
        sys.stdout.flush()
        code = code or result.returncode
    return code


def shell_argv(target: Target) -> list[str]:
    """The interactive shell for ``envmgr shell``: the target's own (``Target.shell_argv``)."""
    return target.shell_argv()
