"""Packages an environment inherits from a base interpreter instead of installing them.

On NGC-style images and GPU hosts torch and its CUDA wheels (gigabytes) are already installed
for one interpreter. A spec's ``python.inherit`` keeps them: the new venv sees the base's
site-packages after its own (a ``.pth`` file, so the venv's packages win), the named packages
and everything they depend on there are left out of the lock, and their versions are checked
against the spec's exact pins before anything is built.

pyinfra's way: ``read_interpreter`` is a command (``DISTRIBUTIONS_SCRIPT``, run by the base
interpreter itself) and a pure parser (``parse_interpreter``); the rest is plain data.
``--system-site-packages`` is not used: a venv made from an interpreter that is itself a venv
(``/opt/torch/.venv/bin/python3``) would see the system's site-packages, not that venv's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envmgr.errors import BackendError
from envmgr.lock import inherited_line
from envmgr.spec.models import Spec, canonical_name

if TYPE_CHECKING:
    from envmgr.targets.base import Runner

PTH_NAME = "_envmgr_inherit.pth"
MAX_OUTPUT = 64 << 20  # an interpreter with every package of PyPI prints less than this
TIMEOUT_S = 60

# Run by the base interpreter: stdlib only, Python >= 3.8, never imports from the working
# directory. Prints one JSON object: the interpreter, its non-stdlib sys.path directories in
# order, its marker environment (PEP 508) and each distribution's name, version, requirements
# and the directory it was found in (the first on sys.path wins, as import does).
DISTRIBUTIONS_SCRIPT = r"""
import sys
sys.path[:] = [p for p in sys.path if p]
import importlib.metadata as metadata, json, os, platform, sysconfig

stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
def is_site(p):  # site-packages and dist-packages anywhere; nothing else of the stdlib tree
    real = os.path.realpath(p)
    parts = set(real.split(os.sep))
    return "site-packages" in parts or "dist-packages" in parts or not (
        real == stdlib or real.startswith(stdlib + os.sep))
sites = [p for p in sys.path if os.path.isdir(p) and is_site(p)]
dists = []
for path in sites:
    for dist in metadata.distributions(path=[path]):
        name = dist.metadata["Name"]
        if name:
            dists.append({"name": name, "version": dist.version, "requires": list(dist.requires or []),
                          "site": path})
impl = sys.implementation
iver = "%d.%d.%d" % impl.version[:3]
if impl.version.releaselevel != "final":
    iver += impl.version.releaselevel[0] + str(impl.version.serial)
print(json.dumps({
    "executable": sys.executable,
    "version": "%d.%d" % sys.version_info[:2],
    "prefix": sys.prefix,
    "sites": sites,
    "markers": {
        "implementation_name": impl.name, "implementation_version": iver,
        "os_name": os.name, "platform_machine": platform.machine(),
        "platform_release": platform.release(), "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    },
    "distributions": dists,
}))
"""


@dataclass(frozen=True)
class Distribution:
    name: str  # canonical (PEP 503)
    version: str
    requires: tuple[str, ...]
    site: str  # the sys.path directory it was found in


@dataclass(frozen=True)
class Interpreter:
    """What a base interpreter offers: where its packages live and which they are."""

    executable: str
    version: str  # major.minor
    prefix: str
    sites: tuple[str, ...]
    markers: Mapping[str, str]
    distributions: Mapping[str, Distribution] = field(default_factory=dict)  # first on sys.path wins


def parse_interpreter(text: str) -> Interpreter:
    """``DISTRIBUTIONS_SCRIPT``'s output -> ``Interpreter``; anything else is a BackendError."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BackendError(f"the base interpreter's package list is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BackendError("the base interpreter's package list is not a JSON object")
    strings: dict[str, Any] = {k: data.get(k) for k in ("executable", "version", "prefix")}
    sites, markers, dists = data.get("sites"), data.get("markers"), data.get("distributions")
    if not all(isinstance(v, str) for v in strings.values()) or not _strings(sites) \
            or not isinstance(markers, dict) or not all(isinstance(v, str) for v in markers.values()) \
            or not isinstance(dists, list):
        raise BackendError("the base interpreter's package list lacks executable/version/prefix strings, "
                           "sites, markers or distributions")
    found: dict[str, Distribution] = {}
    for entry in dists:
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("name", "version", "site")) \
                or not _strings(entry.get("requires")):
            raise BackendError(f"the base interpreter's package list has a malformed entry: {str(entry)[:200]}")
        name = canonical_name(entry["name"])
        found.setdefault(name, Distribution(name, entry["version"], tuple(entry["requires"]), entry["site"]))
    return Interpreter(strings["executable"], strings["version"], strings["prefix"], tuple(sites),
                       dict(markers), found)


def _strings(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def read_interpreter(python: str, runner: Runner | None = None) -> Interpreter:
    """Run ``DISTRIBUTIONS_SCRIPT`` with ``python`` (argv, no shell) on ``runner`` (default:
    this host; a container target for a base image's interpreter)."""
    if runner is None:
        from envmgr.targets.local import LocalTarget

        runner = LocalTarget()
    try:
        done = runner.run([python, "-I", "-c", DISTRIBUTIONS_SCRIPT], timeout=TIMEOUT_S)
    except OSError as exc:
        raise BackendError(f"cannot run the base interpreter {python}: {exc}",
                           hint="set python.inherit.python to an interpreter that runs") from None
    if done.returncode != 0 or len(done.stdout) > MAX_OUTPUT:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise BackendError(f"the base interpreter {python} could not list its packages "
                           f"(exit {done.returncode}): {' | '.join(tail)}",
                           hint="set python.inherit.python to an interpreter that runs")
    return parse_interpreter(done.stdout)


def closure(base: Interpreter, names: Iterable[str]) -> dict[str, Distribution]:
    """The named distributions and, recursively, what they require that the base has (markers
    evaluated in the base's environment, no extras): what the environment must not reinstall."""
    kept: dict[str, Distribution] = {}
    todo = [canonical_name(n) for n in names]
    while todo:
        name = todo.pop()
        dist = base.distributions.get(name)
        if dist is None or name in kept:
            continue
        kept[name] = dist
        todo.extend(r.name for r in _requirements(dist.requires, base.markers))
    return kept


def _requirements(lines: Iterable[str], markers: Mapping[str, str]) -> list[Requirement]:
    """Requirements that apply in ``markers``' environment; ones that do not parse are skipped
    (a broken package's metadata is its own problem, not a reason to refuse the build)."""
    out = []
    for line in lines:
        try:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({**markers, "extra": ""}):
                out.append(Requirement(f"{canonical_name(req.name)}{req.specifier}"))
        except (InvalidRequirement, InvalidMarker, UndefinedComparison, UndefinedEnvironmentName,
                InvalidSpecifier):
            continue
    return out


def pin_problems(base: Interpreter, spec: Spec) -> list[str]:
    """Why the base cannot give what ``python.inherit`` asks: its Python, or a package that is
    missing or at another version than the spec's exact pin."""
    problems = []
    if base.version != spec.python.version:
        problems.append(f"the base interpreter {base.executable} is Python {base.version}, the spec "
                        f"wants {spec.python.version}")
    for name, version in spec.python.inherited.items():
        dist = base.distributions.get(name)
        if dist is None:
            problems.append(f"{name}: not installed for {base.executable} (the spec pins =={version})")
        elif not _same_version(dist.version, version):
            problems.append(f"{name}: {base.executable} has {dist.version}, the spec pins =={version}")
    return problems


def _same_version(installed: str, pin: str) -> bool:
    """``==pin`` as PEP 440 reads it: ``2.11.0+cu130`` is ``==2.11.0`` (a pin without a local
    label ignores the installed one's)."""
    try:
        return SpecifierSet(f"=={pin}").contains(Version(installed), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return installed == pin


def unmet_by_inherited(environment: Interpreter, inherited: Mapping[str, Distribution]) -> list[str]:
    """Requirements of the environment's own packages (those outside the inherited sites) that
    the inherited versions do not satisfy: ``sglang 0.5.11 needs torch==2.11.0, inherited 2.10.0``."""
    inherited_sites = {d.site for d in inherited.values()}
    unmet = []
    for dist in environment.distributions.values():
        if dist.site in inherited_sites or dist.name in inherited:
            continue
        for req in _requirements(dist.requires, environment.markers):
            have = inherited.get(req.name)
            if have is not None and not req.specifier.contains(have.version, prereleases=True):
                unmet.append(f"{dist.name} {dist.version} needs {req.name}{req.specifier}, "
                             f"inherited {have.version}")
    return sorted(unmet)


def pth_text(sites: Iterable[str]) -> str:
    """A ``.pth`` that appends the base's directories after the venv's own site-packages.
    ``site.addsitedir`` also runs the base's own ``.pth`` files there, as the base does; each
    path is a Python literal (``repr``), so no directory name can end the line or run code."""
    lines = ["# written by envmgr: packages inherited from the base interpreter (python.inherit)"]
    lines += [f"import site; site.addsitedir({site!r})" for site in sites]
    return "\n".join(lines) + "\n"


def lock_lines(base: Interpreter, kept: Mapping[str, Distribution]) -> list[str]:
    """The lock's comment lines that record what was inherited, and from which interpreter."""
    return [inherited_line(d.name, d.version, base.executable) for _, d in sorted(kept.items())]
