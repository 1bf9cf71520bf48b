"""What every builder offers: ``steps(loaded, actions)``, the list that ``plan`` shows and
``apply`` executes, one by one, into a new generation's directory (pyinfra's way: planning
and applying go through the same list, so they cannot disagree).

Listing steps has no side effects beyond checks that fail fast (a wrong URL, a missing
inventory); a step does its work only when executed, into ``Build.workdir``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Self

from envmgr import failpoints
from envmgr.inherit import Interpreter, closure, lock_lines
from envmgr.lock import PYPI_SIMPLE, index_urls, lock_sources, resolve
from envmgr.progress import prefixed
from envmgr.spec.models import canonical_name
from envmgr.targets.base import Closing

if TYPE_CHECKING:
    from envmgr.lockfile import Locked
    from envmgr.plan import Action
    from envmgr.progress import Progress
    from envmgr.spec.load import LoadedSpec
    from envmgr.spec.models import Spec


@dataclass(frozen=True)
class Realized:
    """What a build made: the target URL that runs in it, where it lives and its lock."""

    target: str  # e.g. venv:///…/generations/3/venv or docker://envmgr/cuda13:<tag>
    location: str  # venv path, image id, the hosts' env directory
    lock: str  # requirements-format lock: name==version --hash=sha256:...
    details: dict = field(default_factory=dict)  # builder-specific (image tag, python, rollout report)


@dataclass
class Build:
    """One build in progress: what the steps read and what they leave for the next."""

    loaded: LoadedSpec
    workdir: Path  # the new generation's directory
    progress: Progress
    lock: str = ""
    realized: Realized | None = None


@dataclass(frozen=True)
class Step:
    name: str  # short and stable: resolve, venv, install, env, base, context, image, provision, ...
    summary: str  # what it will do, as `envmgr plan` shows it
    execute: Callable[[Build], None] = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, str]:
        return {"step": self.name, "summary": self.summary}


class Builder(Closing):
    """Turns a spec into steps. Subclasses set ``kind`` (their backend's scheme) and the flags,
    take their URL in ``__init__``, merge it with the spec in ``_resolve`` and implement
    ``steps``. ``from_spec`` is how envmgr makes one: the settings are resolved there, once."""

    kind: ClassVar[str] = ""
    can_check: ClassVar[bool] = False  # a check mode on the real target (ansible --check --diff)
    # it provisions hosts themselves (drivers, system toolkits): a plan's host actions are its steps
    changes_host: ClassVar[bool] = False
    # the environment is made on this host, which must already have the spec's driver and toolkits
    builds_here: ClassVar[bool] = False

    _bound: LoadedSpec | None = None
    lock: Locked | None = None  # the committed lock it installs instead of resolving (envmgr.lockfile)

    def __init__(self, url: str = "") -> None:  # pragma: no cover - every builder parses its own
        """Take what the URL sets (``SCHEME://`` sets nothing: the spec's ``realize`` decides)."""

    @classmethod
    def from_spec(cls, loaded: LoadedSpec, url: str | None = None, lock: Locked | None = None) -> Self:
        """The builder of ``loaded``: its settings are the URL's where it gives them, else the
        spec's ``realize`` section (never turned into a URL and parsed back), resolved here,
        once; a wrong one raises here, before anything is asked or built. ``lock``: the
        committed lock to install (``envmgr.lockfile.choose_lock``), else it resolves."""
        builder = cls(url or f"{cls.kind}://")
        builder.lock = lock
        builder.bind(loaded)
        return builder

    def bind(self, loaded: LoadedSpec) -> None:
        """Resolve the settings for ``loaded`` unless they are (steps and preflight call it
        first, so a builder made from a URL alone, as tests do, binds on first use)."""
        if self._bound is not loaded:
            self._resolve(loaded)
            self._bound = loaded

    def _resolve(self, loaded: LoadedSpec) -> None:
        """Merge the URL's settings with the spec's into attributes the steps read."""

    def steps(self, loaded: LoadedSpec, actions: Sequence[Action]) -> list[Step]:  # pragma: no cover
        raise NotImplementedError

    def preflight(self, loaded: LoadedSpec) -> None:
        """What must be there before a generation is started (an interpreter, a base image,
        a readable inventory): raises with what to do; apply calls it before showing the plan."""


def execute(steps: Sequence[Step], build: Build) -> Realized:
    """Run ``steps`` in order with ``[n/N]`` progress; the last one leaves what was built."""
    took: list[str] = []
    started = time.monotonic()
    for number, step in enumerate(steps, 1):
        build.progress(f"[{number}/{len(steps)}] {step.summary}")
        began = time.monotonic()
        step.execute(build)
        took.append(f"{step.name} {time.monotonic() - began:.1f} s")
    if build.realized is None:  # a builder whose last step realized nothing: a bug, said plainly
        raise RuntimeError(f"the steps {[s.name for s in steps]} built nothing")
    build.progress(f"built in {time.monotonic() - started:.1f} s ({', '.join(took)})")
    return build.realized


def resolve_step(loaded: LoadedSpec, base: Callable[[], Interpreter] | None = None,
                 python: Callable[[], str] | None = None, lock: Locked | None = None) -> Step:
    """Resolve the spec's pins into a hashed lock (uv) in the generation: the first step of the
    venv and image builders (a fleet's lock comes with its wheels, envmgr.wheelhouse).
    ``base`` reads the interpreter that ``python.inherit`` keeps packages from; ``python``
    names the interpreter the lock is for (a venv's), else it is for the spec's version on
    manylinux_2_28."""
    spec = loaded.spec
    if lock is not None:  # committed beside the spec: installed as it is, on every host alike
        return Step("resolve", f"take the committed lock {lock.path} ({lock.packages} packages, hashes; "
                               "nothing resolved)", lambda build: _take_lock(build, lock))
    count = len(spec.python.installed_packages)
    return Step("resolve", f"resolve {count} package pins for Python {spec.python.version} into a hashed "
                           f"lock (uv{', no dependencies' if spec.python.no_deps else ''}) from "
                           f"{sources_summary(spec)}{inherited_summary(spec)}",
                lambda build: _resolve(build, base, python))


def sources_summary(spec: Spec) -> str:
    """Where the wheels come from, as plan shows it: ``find-links /srv/wheels (offline)``."""
    sources = spec.python.sources
    parts = [f"find-links {d}" for d in sources.find_links]
    if sources.offline:
        return ", ".join(parts) + " (offline)"
    indexes = ["PyPI" if url == PYPI_SIMPLE else url for url in index_urls(spec)]
    return ", ".join(parts + indexes)


def inherited_summary(spec: Spec) -> str:
    inherited = spec.python.inherited
    if spec.python.inherit is None:
        return ""
    base = spec.python.inherit.python or "the venv's interpreter"
    kept = ", ".join(f"{name} =={version}" for name, version in inherited.items())
    return (f"; inherited from {base}: {kept} (with what they need there; never installed)" if kept
            else f"; the packages of {base} visible after the environment's own")


def _take_lock(build: Build, lock: Locked) -> None:
    failpoints.reach("resolve")
    build.lock = lock.text
    build.workdir.mkdir(parents=True, exist_ok=True)
    (build.workdir / "lock.txt").write_text(lock.text, encoding="utf-8")  # where a resolve leaves it
    build.progress(f"lock: {lock.packages} packages from {lock.path} ({lock.digest[:12]})")
    failpoints.reach("resolved")


def _resolve(build: Build, base: Callable[[], Interpreter] | None, python: Callable[[], str] | None) -> None:
    spec = build.loaded.spec
    failpoints.reach("resolve")
    excludes: list[str] = []
    recorded: list[str] = []
    if spec.python.inherit is not None and base is not None:
        interpreter = base()
        listed = {canonical_name(n) for n in spec.python.installed_packages}
        # what the spec lists itself is installed, even where an inherited package needs it too
        kept = {n: d for n, d in closure(interpreter, spec.python.inherited).items() if n not in listed}
        excludes, recorded = sorted(kept), lock_lines(interpreter, kept)
        if kept:
            build.progress(f"inherited from {interpreter.executable}: {len(spec.python.inherited)} package(s) "
                           f"and {len(kept) - len(spec.python.inherited)} they need there, left out of the lock")
    build.lock = resolve(spec, build.workdir, spec.python.version, prefixed(build.progress, "uv"),
                         excludes=excludes, inherited=recorded, python=python() if python else None)
    counts = Counter(lock_sources(build.lock).values())
    if counts:
        build.progress("lock: " + ", ".join(f"{n} {where}" if where.startswith("inherited") else f"{n} from {where}"
                                            for where, n in sorted(counts.items())))
    failpoints.reach("resolved")


def package_changes(actions: Sequence[Action], limit: int = 4) -> str:
    """``+sglang-kernel ==0.4.4, -sgl-kernel, torch ==2.9.1 -> ==2.10.0 (+3 more)``: a plan's packages."""
    changes = []
    for a in actions:
        if a.kind == "package.inherit":
            continue  # nothing installed: the base interpreter's
        if a.kind == "package.install":
            changes.append(f"+{a.target} {a.after}")
        elif a.kind == "package.remove":
            changes.append(f"-{a.target}")
        elif a.kind.startswith("package."):
            changes.append(f"{a.target} {a.before} -> {a.after}")
    if not changes:
        return "no package changes"
    shown = ", ".join(changes[:limit])
    return shown + (f" (+{len(changes) - limit} more)" if len(changes) > limit else "")


def realize(builder: Builder, loaded: LoadedSpec, actions: Sequence[Action], progress: Progress,
            workdir: Path) -> Realized:
    """Plan and execute in one call (what apply does between its confirmation and its commit)."""
    return execute(builder.steps(loaded, actions), Build(loaded, workdir, progress))
