"""Locks: the spec's Python packages resolved to exact versions with their hashes.

A lock is requirements text (``name==version --hash=sha256:...``) written by
``uv pip compile --generate-hashes``; installing it with ``--require-hashes`` gives
exactly what was locked, in a venv or in an image. Spec values reach uv only as
validated requirement lines in a file and as argv elements, never through a shell.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from envmgr.targets.process import stream
from envmgr.errors import BackendError, SpecError, SpecProblem
from envmgr.spec.models import Spec, canonical_name


def requirement_lines(spec: Spec) -> list[str]:
    """One PEP 508 line per package the environment installs (not the inherited ones), rebuilt
    by ``packaging`` (so nothing else can ride along)."""
    lines = []
    for name, specifier in spec.python.installed_packages.items():  # inherited ones are the base's
        try:
            req = Requirement(f"{name}{specifier}")
        except InvalidRequirement as exc:  # the spec model validated both parts; belt and braces
            raise SpecError([SpecProblem("spec", None, f"python.packages.{name}", str(exc))]) from exc
        if req.marker is not None or req.url is not None:
            raise SpecError([SpecProblem("spec", None, f"python.packages.{name}",
                                         "markers and URLs are not allowed in a pin")])
        lines.append(str(req))
    return sorted(lines)


def source_args(spec: Spec, tool: str = "uv", local: bool = True) -> list[str]:
    """Where wheels come from (``python.sources``), as options of uv (``tool="uv"``) or pip:
    the find-links directories (unless ``local`` is False: inside an image they do not
    exist), then offline (no index at all) or the indexes, with torch's where torch is
    downloaded. Every value is one argv element."""
    sources = spec.python.sources
    args: list[str] = []
    if local:
        for directory in sources.find_links:
            args += ["--find-links", directory]
    if sources.offline:
        return [*args, "--no-index", *(["--offline"] if tool == "uv" else [])]
    if sources.index_url:
        args += ["--index-url", sources.index_url]
    for url in sources.extra_index_urls:
        args += ["--extra-index-url", url]
    torch = spec.python.torch_index_url
    if torch and "torch" in {canonical_name(n) for n in spec.python.installed_packages}:
        args += ["--extra-index-url", torch]
    return args


def uv_binary() -> str:
    """The uv of envmgr's own install (a dependency), else a uv on PATH (the standalone installer's)."""
    try:
        from uv import find_uv_bin
    except ImportError:
        found = shutil.which("uv")
        if found:
            return found
        raise BackendError("uv is not installed (neither the uv package nor a uv on PATH)",
                           hint="pip install uv") from None
    return find_uv_bin()


def resolve(spec: Spec, workdir: Path, python_version: str, on_line: Callable[[str], None],
            timeout: float = 1800.0, excludes: Iterable[str] = (), inherited: Iterable[str] = ()) -> str:
    """Resolve the spec's packages for ``python_version`` (Linux x86_64) into lock text.

    ``excludes``: names left out of the resolution altogether, with what only they need (the
    packages inherited from a base interpreter); ``inherited``: the lock's comment lines that
    record them. uv annotates each package with the index or directory it came from."""
    workdir.mkdir(parents=True, exist_ok=True)
    wanted = workdir / "requirements.in"
    wanted.write_text("\n".join(requirement_lines(spec)) + "\n", encoding="utf-8")
    out = workdir / "lock.txt"
    argv = [uv_binary(), "pip", "compile", "--quiet", str(wanted), "--generate-hashes", "--no-header", "--no-annotate",
            "--emit-index-annotation", "--python-version", python_version,
            "--python-platform", "x86_64-manylinux_2_28", "--output-file", str(out), *source_args(spec, "uv")]
    excluded = sorted(set(excludes))
    if excluded:
        (workdir / "excludes.txt").write_text("\n".join(excluded) + "\n", encoding="utf-8")
        argv += ["--excludes", str(workdir / "excludes.txt")]
    if spec.python.no_deps:
        argv.append("--no-deps")
    result = stream(argv, on_line, timeout=timeout)
    if result.returncode != 0:
        raise BackendError(f"resolving the packages failed: {_last_lines(result.stdout)}",
                           hint=_resolve_hint(spec))
    recorded = list(inherited)
    text = out.read_text(encoding="utf-8")
    if recorded:
        text = "\n".join(recorded) + "\n" + text
        out.write_text(text, encoding="utf-8")
    return text


def _resolve_hint(spec: Spec) -> str:
    sources = spec.python.sources
    if sources.offline:
        return (f"offline: every package (and, unless no_deps, every dependency) needs a wheel for Linux "
                f"x86_64 and Python {spec.python.version} in {', '.join(sources.find_links)}; add the "
                "missing wheel there, inherit it (python.inherit.packages), or change its pin")
    return "check the pins in python.packages (and that the index is reachable)"


def lock_sources(lock: str) -> dict[str, str]:
    """``{canonical name: where it comes from}``: ``inherited from PYTHON``, or the index or
    find-links directory uv annotated (``https://pypi.org/simple``, ``file:///srv/wheels``)."""
    sources = {canonical_name(m.group(1)): f"inherited from {m.group(3)}" for m in _inherited_lines(lock)}
    current = None
    for line in lock.splitlines():
        stripped = line.strip()
        package = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==", line)
        if package:
            current = canonical_name(package.group(1))
        elif current and stripped.startswith("# from "):
            sources[current] = stripped[len("# from "):]
    return sources


def inherited_line(name: str, version: str, python: str) -> str:
    """The lock's record of a package kept from the base interpreter (a comment: installers skip it)."""
    if not python.isprintable():  # a newline would end the comment and start a requirement
        raise BackendError(f"the base interpreter's path {python!r} has control characters")
    return f"{INHERITED}{name}=={version} from {python}"


INHERITED = "# inherited: "


def inherited_versions(lock: str) -> dict[str, str]:
    """``{canonical name: version}`` the lock records as inherited from the base interpreter."""
    return {canonical_name(m.group(1)): m.group(2) for m in _inherited_lines(lock)}


def inherited_python(lock: str) -> str | None:
    """The base interpreter a lock's inherited packages come from, or None."""
    return next((m.group(3) for m in _inherited_lines(lock)), None)


def _inherited_lines(lock: str) -> list[re.Match[str]]:
    pattern = re.compile(r"^" + re.escape(INHERITED) + r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) from (.+)$")
    return [m for m in map(pattern.match, (line.strip() for line in lock.splitlines())) if m]


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
