"""Locks: the spec's Python packages resolved to exact versions with their hashes.

A lock is requirements text (``name==version --hash=sha256:...``) written by
``uv pip compile --generate-hashes``; installing it with ``--require-hashes`` gives
exactly what was locked, in a venv or in an image. Spec values reach uv only as
validated requirement lines in a file and as argv elements, never through a shell.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from envmgr.targets.process import stream
from envmgr.errors import BackendError, SpecError, SpecProblem
from envmgr.spec.models import Spec, canonical_name


def requirement_lines(spec: Spec) -> list[str]:
    """One PEP 508 line per package, rebuilt by ``packaging`` (so nothing else can ride along)."""
    lines = []
    for name, specifier in spec.python.packages.items():
        try:
            req = Requirement(f"{name}{specifier}")
        except InvalidRequirement as exc:  # the spec model validated both parts; belt and braces
            raise SpecError([SpecProblem("spec", None, f"python.packages.{name}", str(exc))]) from exc
        if req.marker is not None or req.url is not None:
            raise SpecError([SpecProblem("spec", None, f"python.packages.{name}",
                                         "markers and URLs are not allowed in a pin")])
        lines.append(str(req))
    return sorted(lines)


def index_args(spec: Spec) -> list[str]:
    url = spec.python.torch_index_url
    return ["--extra-index-url", url] if url and "torch" in spec.python.packages else []


def uv_binary() -> str:
    try:
        from uv import find_uv_bin
    except ImportError as exc:  # uv is a dependency; a broken install is an error, not a fallback
        raise BackendError("the uv package is not installed", hint="pip install uv") from exc
    return find_uv_bin()


def resolve(spec: Spec, workdir: Path, python_version: str,
            on_line: Callable[[str], None], timeout: float = 1800.0) -> str:
    """Resolve the spec's packages for ``python_version`` (Linux x86_64) into lock text."""
    workdir.mkdir(parents=True, exist_ok=True)
    wanted = workdir / "requirements.in"
    wanted.write_text("\n".join(requirement_lines(spec)) + "\n", encoding="utf-8")
    out = workdir / "lock.txt"
    argv = [uv_binary(), "pip", "compile", "--quiet", str(wanted), "--generate-hashes", "--no-header", "--no-annotate",
            "--python-version", python_version, "--python-platform", "x86_64-manylinux_2_28",
            "--output-file", str(out), *index_args(spec)]
    result = stream(argv, on_line, timeout=timeout)
    if result.returncode != 0:
        raise BackendError(f"resolving the packages failed: {_last_lines(result.stdout)}",
                           hint="check the pins in python.packages (and that the index is reachable)")
    return out.read_text(encoding="utf-8")


def locked_versions(lock: str) -> dict[str, str]:
    """``{canonical name: version}`` of a lock's ``name==version`` lines."""
    versions = {}
    for line in lock.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", line)
        if m:
            versions[canonical_name(m.group(1))] = m.group(2)
    return versions


def clean_lock(lock: str) -> str:
    """The lock without its comments: uv's ``# via -r /path/of/the/workdir/...`` annotations
    name the generation's directory, which must change neither the image nor its tag."""
    kept = [line for line in lock.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return "\n".join(kept) + "\n"


def _last_lines(text: str, n: int = 5) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-n:])
