"""Using an environment: ``envmgr run``, ``envmgr shell`` and ``envmgr env``.

An environment is named as ``bench --env`` names one: ``current`` (the default), a generation
number, or a target URL. Its commands get what the target gives every command
(``Target.environment()``): in a venv, its bin first on PATH, CUDA_HOME and PATH of a pip
toolkit and the spec's env; in an image, the image's own ENV; on hosts, the current env's
recorded variables. Secrets are never printed: ``env`` shows them redacted, and its ``--sh``
exports read them from the 0600 file where the environment keeps them, when evaluated.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envmgr.errors import CommandNotFound, UsageError
from envmgr.secrets import REDACTED, looks_secret, secret_names

if TYPE_CHECKING:
    from envmgr.state import Generation
    from envmgr.targets.base import Target

# Reads one variable from a recorded env file (JSON) when the exports are evaluated.
_READ_ONE = "import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])"


@dataclass(frozen=True)
class Chosen:
    """The environment a command names: its target URL, its generation, the names never shown."""

    url: str
    generation: Generation | None
    secrets: frozenset[str] | None  # the spec's secret names; None: no spec known (names decide)

    @property
    def label(self) -> str:
        return f"generation {self.generation.number} ({self.url})" if self.generation else self.url


def choose(name: str | None, home: Path | None) -> Chosen:
    """``current``, ``N`` or a target URL -> the environment (``current`` when None)."""
    from envmgr.state import Store, current_spec
    from envmgr.targets.urls import split_url

    if name and "://" in name:
        split_url(name)  # a clear error for a bad URL before anything runs
        return Chosen(name, None, None)
    generation = Store(home).named(name or "current")
    return Chosen(generation.backend, generation, secret_names(current_spec(generation).spec))


def is_secret(name: str, chosen: Chosen) -> bool:
    return looks_secret(name) if chosen.secrets is None else name in chosen.secrets


def shown(env: Mapping[str, str], chosen: Chosen) -> dict[str, str]:
    """The environment's variables as they may be printed (secrets replaced)."""
    return {k: REDACTED if is_secret(k, chosen) else v for k, v in sorted(env.items())}


def exports(env: Mapping[str, str], chosen: Chosen, target: Target) -> str:
    """POSIX shell lines for ``eval "$(envmgr env --sh)"``; every value quoted. A secret is read
    from the environment's recorded file when evaluated, or left out where there is none."""
    lines = []
    recorded = target.recorded_env_file()
    python = target.interpreter
    for name, value in sorted(env.items()):
        if not name.isidentifier():
            continue  # not a shell variable name: never pasted into shell text
        if not is_secret(name, chosen):
            lines.append(f"export {name}={shlex.quote(value)}")
        elif recorded is not None:
            read = shlex.join([python, "-c", _READ_ONE, recorded, name])
            lines.append(f'export {name}="$({read})"  # a secret: read from {shlex.quote(recorded)}')
        else:
            lines.append(f"# {name} is a secret: not exported (it lives where the environment runs)")
    return "\n".join(lines) + "\n"


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
    """The interactive shell for ``envmgr shell``: the user's $SHELL where the target runs
    here, ``docker run -it`` of the image (the docker CLI needed) in a container."""
    if target.runs_here:
        return [os.environ.get("SHELL") or "/bin/sh"]
    if target.scheme == "docker":
        docker = shutil.which("docker")
        if docker is None:
            raise UsageError("an interactive shell in a container needs the docker CLI",
                             hint="install docker's CLI, or run commands with `envmgr run --env ... -- CMD`")
        image = target.url.removeprefix("docker://")
        tty = ["-t"] if sys.stdin.isatty() else []  # commands piped in need no terminal
        return [docker, "run", "--rm", "-i", *tty, "--network", "host", "--entrypoint", "/bin/sh", image]
    raise UsageError(f"{target.scheme}:// has no interactive shell from here",
                     hint="run commands with `envmgr run --env URL -- CMD` (every host, with the recorded env), "
                          "or ssh to a host and `. /opt/envmgr/current-env/bin/activate`")
