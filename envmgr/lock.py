"""Locks: the spec's Python packages resolved to exact versions with their hashes.

A lock is requirements text (``name==version --hash=sha256:...``) written by
``uv pip compile --generate-hashes``; installing it with ``--require-hashes`` gives
exactly what was locked, in a venv or in an image. Spec values reach uv only as
validated requirement lines in a file and as argv elements, never through a shell.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envmgr.errors import BackendError, SpecError, SpecProblem
from envmgr.spec.models import Spec, canonical_name
from envmgr.targets.process import stream

PYPI_SIMPLE = "https://pypi.org/simple"


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
    first, *extra = index_urls(spec)
    if sources.index_url:
        args += ["--index-url", first]  # else the tools' own default, PyPI
    for url in extra:
        args += ["--extra-index-url", url]
    return args


def index_urls(spec: Spec) -> list[str]:
    """The indexes the resolver asks, in order ([] offline): the spec's index (PyPI when it
    names none), its extra ones, then torch's."""
    sources = spec.python.sources
    if sources.offline:
        return []
    torch = [spec.python.torch_index_url] if spec.python.torch_index_url else []
    return [sources.index_url or PYPI_SIMPLE, *sources.extra_index_urls, *torch]


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
            timeout: float = 1800.0, excludes: Iterable[str] = (), inherited: Iterable[str] = (),
            python: str | None = None) -> str:
    """Resolve the spec's packages for ``python_version`` (Linux x86_64, manylinux_2_28: what an
    image or a fleet host runs) into lock text; or, given ``python``, for that interpreter's
    own version and platform (a venv on this host: a manylinux_2_34 wheel is fine there).

    ``excludes``: names left out of the resolution altogether, with what only they need (the
    packages inherited from a base interpreter); ``inherited``: the lock's comment lines that
    record them. uv annotates each package with the index or directory it came from."""
    workdir.mkdir(parents=True, exist_ok=True)
    wanted = workdir / "requirements.in"
    wanted.write_text("\n".join(requirement_lines(spec)) + "\n", encoding="utf-8")
    out = workdir / "lock.txt"
    argv = [uv_binary(), "pip", "compile", "--quiet", str(wanted), "--generate-hashes", "--no-header", "--no-annotate",
            "--emit-index-annotation", *(["--python", python] if python else [
                "--python-version", python_version, "--python-platform", "x86_64-manylinux_2_28"]),
            "--output-file", str(out), *source_args(spec, "uv")]
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
    text = hash_local_wheels(out.read_text(encoding="utf-8"), spec.python.sources.find_links)
    recorded = list(inherited)
    if recorded:
        text = "\n".join(recorded) + "\n" + text
    out.write_text(text, encoding="utf-8")
    return text


def hash_local_wheels(lock: str, find_links: Iterable[str]) -> str:
    """Give every package uv took from a find-links directory without a hash (uv hashes none
    with ``--no-deps`` and only the selected file otherwise: astral-sh/uv#10308) the sha256 of
    each wheel of that name and version there, so that ``--require-hashes`` installs it and
    nothing else. Only the spec's own directories are read."""
    allowed = {os.path.realpath(d) for d in find_links}
    out: list[str] = []
    for entry in _entries(lock):
        origin = entry.origin()
        if entry.name and not entry.hashes and origin.startswith("file://"):
            directory = os.path.realpath(unquote(urlsplit(origin).path))
            if directory in allowed:
                entry.hashes.extend(f"sha256:{file_sha256(w)}"
                                    for w in _wheels_of(Path(directory), entry.name, entry.version))
        out.extend(entry.lines())
    return "\n".join(out) + "\n"


@dataclass
class _Entry:
    """One requirement of a lock with its hashes and annotations; or, without a name, a line
    that stands alone (a top-level comment)."""

    name: str
    version: str
    requirement: str
    hashes: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)

    def origin(self) -> str:
        """Where uv says it came from (its ``# from`` annotation), or ""."""
        return next((c[len("# from "):] for c in self.comments if c.startswith("# from ")), "")

    def lines(self) -> list[str]:
        if not self.name:
            return self.comments
        out = [self.requirement + (" \\" if self.hashes else "")]
        out += [f"    --hash={h}" + (" \\" if i < len(self.hashes) - 1 else "") for i, h in enumerate(self.hashes)]
        return out + [f"    {c}" for c in self.comments]


def _entries(lock: str) -> list[_Entry]:
    entries: list[_Entry] = []
    for raw in lock.splitlines():
        line = raw.strip()
        if not line:
            continue
        current = entries[-1] if entries and entries[-1].name else None
        hashed = re.fullmatch(r"--hash=(\S+?)\s*\\?", line)
        if hashed and current:
            current.hashes.append(hashed.group(1))
            continue
        if line.startswith("#") and current and raw[:1].isspace():  # uv indents a package's annotations
            current.comments.append(line)
            continue
        requirement = line.rstrip("\\").strip()
        m = _PACKAGE_LINE.match(requirement)
        entries.append(_Entry(m.group(1), m.group(2), requirement) if m else _Entry("", "", "", comments=[line]))
    return entries


_PACKAGE_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def _wheels_of(directory: Path, name: str, version: str) -> list[Path]:
    found = []
    for wheel in sorted(directory.glob("*.whl")):
        try:
            wheel_name, wheel_version, _, _ = parse_wheel_filename(wheel.name)
        except (InvalidWheelFilename, InvalidVersion):
            continue
        if wheel_name == canonical_name(name) and wheel_version == Version(version):
            found.append(wheel)
    return found


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
    for entry in _entries(lock):
        origin = entry.origin()
        if entry.name and origin:
            sources[canonical_name(entry.name)] = origin
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


_INHERITED_LINE = re.compile(r"^" + re.escape(INHERITED) + r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) from (.+)$")


def _inherited_lines(lock: str) -> list[re.Match[str]]:
    return [m for m in map(_INHERITED_LINE.match, (line.strip() for line in lock.splitlines())) if m]


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
