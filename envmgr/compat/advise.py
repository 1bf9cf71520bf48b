"""``envmgr advise``: for each thing the rules say cannot work, the smallest known move that clears it.

Plain data in, plain data out. A *blocker* is the stack (its error findings that name no config)
or one benchmark config (what blocks it in validate's judgement, ``envmgr.compat.outcome``: an
error, or a warning that predicts the server stops). Candidates, smallest move first:

1. flag changes on the spec's own stack (the edits its findings carry);
2. a sglang release the knowledge base read from the wheels (``sglang_releases.yaml``, with the
   torch / flashinfer / kernel pins that release requires, and a torch CUDA build that exists for
   that torch) on the same driver and toolkit;
3. such a release with a newer toolkit added beside the spec's, then with the driver it needs.

Within a step, a release that needs no flag change beyond those the spec's own stack needs comes
first, then the nearest to the spec's own (newer before older at the same distance). A candidate is
dropped when it is dominated (a release plus the config's flag changes, where those alone clear it) or when it costs something elsewhere:
the stack gains an error, or a config that runs today is blocked (``rejected`` says which and why).
When nothing clears a blocker, the advice says under which condition: the releases that would at a
cost, and what blocks it on each of the others.

With ``--from OLD``: each of the spec's configs on OLD's stack and on the spec's, in validate's
three outcomes (runs / runs without FEATURE / blocked): unblocked, unchanged, worse, or started but
with the feature it asks for still off.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from packaging.version import Version

from envmgr.compat.evaluate import evaluate
from envmgr.compat.kb import KERNEL_PACKAGES, KnowledgeBase, default_knowledge_base
from envmgr.compat.outcome import expected, stops
from envmgr.findings import Finding
from envmgr.spec.models import Spec, canonical_name
from envmgr.versions import exact_pin

STACK = ""  # the blocker name of stack-scope errors


@dataclass(frozen=True)
class Candidate:
    """One known release, as the pins a spec would carry to get it."""

    sglang: str
    packages: dict[str, str]  # canonical name -> "==X" (None removes the package)
    torch_cuda: str | None
    toolkit: str | None = None  # a CUDA toolkit to add and select (None: the spec's)
    driver: str | None = None  # a driver to install (None: the spec's)

    @property
    def label(self) -> str:
        pins = ", ".join(f"{n} {v.lstrip('=')}" for n, v in self.packages.items() if v and n != "sglang")
        extra = "".join(f", {x}" for x in (self.torch_cuda, self.toolkit and f"CUDA {self.toolkit}",
                                            self.driver and f"driver {self.driver}") if x)
        return f"sglang {self.sglang} ({pins}{extra})"


@dataclass
class Advice:
    blocker: str  # a config name, or STACK
    errors: list[Finding]  # what blocks it now
    fixed_by: Candidate | None = None
    starts_with: Candidate | None = None  # the nearest under which it starts, the feature still off
    feature_off: str = ""
    fragments: dict[str, dict] = field(default_factory=dict)  # "fix" / "starts": paste into the spec
    fixed_here: bool = False  # flag edits alone clear it, on the spec's own stack
    here_edits: dict[str, dict[str, Any]] = field(default_factory=dict)
    edits: dict[str, dict[str, Any]] = field(default_factory=dict)  # flag edits with fixed_by
    starts_edits: dict[str, dict[str, Any]] = field(default_factory=dict)
    still: list[Finding] = field(default_factory=list)  # newest release checked: what remains
    # releases that would clear or start it at a cost elsewhere: (release, "would clear it, blocking CONFIG")
    rejected: list[tuple[str, str]] = field(default_factory=list)
    with_flags: list[str] = field(default_factory=list)  # releases that clear it with flag changes (dominated)
    # releases under which it stays blocked, and the findings that block it there
    blocked_on: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    newest_checked: str | None = None
    releases: list[str] = field(default_factory=list)  # every release checked

    @property
    def checked(self) -> int:
        return len(self.releases)

    def conditions(self) -> list[tuple[str, str]]:
        """Why no release clears it, grouped: (releases, "would clear it, blocking X") for those
        refused at a cost, (releases, "clear it only with flag changes"), then (releases, finding
        ids) for those under which it stays blocked. Releases read as spans of consecutive checked
        ones: "0.5.9-0.5.12, 0.5.15"."""
        return [(releases, text) for releases, text, _ in self._condition_groups()]

    def sentences(self) -> list[str]:
        """The conditions as the advice says them: "0.5.11-0.5.13 would clear it, blocking X",
        "0.5.9-0.5.14: blocked by Y"."""
        return [f"{releases}: blocked by {text}" if blocked else f"{releases} {text}"
                for releases, text, blocked in self._condition_groups()]

    def _condition_groups(self) -> list[tuple[str, str, bool]]:
        refused = [(span(r, self.releases), why, False) for why, r in _grouped(self.rejected)]
        flags = ([(span(self.with_flags, self.releases), "clear it only with flag changes", False)]
                 if self.with_flags else [])
        return refused + flags + [(span(r, self.releases), ", ".join(ids), True) for ids, r in _grouped(self.blocked_on)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "blocker": self.blocker or "stack",
            "errors": [f.to_dict() for f in self.errors],
            "fixed_by_flags": {"edits": self.here_edits, "fragment": self.fragments.get("flags")}
            if self.fixed_here else None,
            "fixed_by": None if self.fixed_by is None else {
                "sglang": self.fixed_by.sglang, "packages": self.fixed_by.packages,
                "torch_cuda": self.fixed_by.torch_cuda, "toolkit": self.fixed_by.toolkit,
                "driver": self.fixed_by.driver, "flags": self.edits, "fragment": self.fragments.get("fix")},
            "starts_without_feature": None if self.starts_with is None else {
                "sglang": self.starts_with.sglang, "feature_off": self.feature_off,
                "fragment": self.fragments.get("starts")},
            "newest_checked": self.newest_checked, "checked": self.checked,
            "still_on_newest": [f.to_dict() for f in self.still],
            "rejected": [{"sglang": release, "because": why} for release, why in self.rejected],
            "with_flag_changes": self.with_flags,
            "blocked_on": [{"sglang": release, "by": list(ids)} for release, ids in self.blocked_on],
        }


def _grouped(pairs: list[tuple[str, Any]]) -> list[tuple[Any, list[str]]]:
    groups: dict[Any, list[str]] = {}
    for release, key in pairs:
        groups.setdefault(key, []).append(release)
    return list(groups.items())


def span(releases: list[str], every: list[str]) -> str:
    """Releases as runs of consecutive ones in ``every`` (sorted by version): "0.5.9-0.5.12, 0.5.15"."""
    order = sorted(set(every) | set(releases), key=Version)
    runs: list[list[str]] = []
    for release in sorted(set(releases), key=Version):
        if runs and order.index(release) == order.index(runs[-1][-1]) + 1:
            runs[-1].append(release)
        else:
            runs.append([release])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}, {run[1]}" if len(run) == 2
                     else f"{run[0]}-{run[-1]}" for run in runs)


@dataclass(frozen=True)
class ConfigChange:
    """``--from OLD``: one config of SPEC on the old stack and on the new one."""

    config: str
    before: str  # "runs" | "runs without FEATURE" | "blocked"
    after: str
    why_before: tuple[str, ...] = ()  # rule ids
    why_after: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        if self.before == self.after:
            return "unchanged"
        if self.after == "runs":
            return "unblocked"
        return "worse" if self.after == "blocked" else "starts, feature still off"

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config, "before": self.before, "after": self.after,
                "why_before": list(self.why_before), "why_after": list(self.why_after),
                "verdict": self.verdict}


def advise(spec: Spec, kb: KnowledgeBase | None = None) -> list[Advice]:
    kb = kb or default_knowledge_base()
    blocked = blockers(evaluate(spec, kb=kb))
    if not blocked:
        return []
    candidates = nearest_first(spec, kb)
    advice = {name: Advice(name, errors) for name, errors in blocked.items()}
    for item in advice.values():
        if item.blocker != STACK:
            _flags_here(item, spec, kb)
    options = _weigh_candidates(spec, kb, candidates, blocked, advice)
    for item in advice.values():
        _choose(item, options[item.blocker])
        if item.fixed_here:
            item.fragments["flags"] = edits_fragment(item.here_edits)
        for key, chosen, edits in (("fix", item.fixed_by, item.edits), ("starts", item.starts_with, item.starts_edits)):
            if chosen is not None:
                item.fragments[key] = {**fragment(chosen, spec), **edits_fragment(edits)}
    newest = max(candidates, key=lambda c: Version(c.sglang), default=None)
    if newest is not None:
        _, _, findings = flag_edits(with_candidate(spec, newest), kb)
        final = blockers(findings)
        for item in advice.values():
            item.newest_checked = newest.sglang
            if item.fixed_by is None:
                item.still = final.get(item.blocker, [])
    return sorted(advice.values(), key=lambda a: (a.blocker != STACK, a.blocker))


def _flags_here(item: Advice, spec: Spec, kb: KnowledgeBase) -> None:
    """The smallest change: the flag edits the config's findings carry, on the spec's own stack."""
    _, edits, findings = flag_edits(spec, kb, only=item.blocker)
    if edits and item.blocker not in blockers(findings) and not _feature_off_by_config(findings).get(item.blocker):
        item.fixed_here, item.here_edits = True, edits


@dataclass(frozen=True, order=True)
class _Option:
    """A release that clears (or, with feature_off, only starts) a blocker, and how far it moves."""

    rank: tuple[int, bool, int]  # (move, flag changes beyond the spec's own, nearness)
    variant: Candidate = field(compare=False)
    edits: Edits = field(compare=False)
    feature_off: str = field(default="", compare=False)


def _weigh_candidates(spec: Spec, kb: KnowledgeBase, candidates: list[Candidate],
                      blocked: dict[str, list[Finding]], advice: dict[str, Advice]) -> dict[str, list[_Option]]:
    """Every candidate tried once, weighed for every blocker."""
    options: dict[str, list[_Option]] = {name: [] for name in advice}
    _, own_edits, _ = flag_edits(spec, kb)  # what the spec's own stack needs anyway
    for order, candidate in enumerate(candidates):
        trial = _try(spec, candidate, blocked, kb)
        rank = (move(trial.variant), _more_edits(trial.edits, own_edits), order)
        for name, item in advice.items():
            option = _weigh(item, candidate, trial, rank)
            if option is not None:
                options[name].append(option)
    return options


def _weigh(item: Advice, candidate: Candidate, trial: Trial, rank: tuple[int, bool, int]) -> _Option | None:
    """What one release does for one blocker: an option, or (recorded on the item, for the
    sentence that states the condition) why it is none."""
    name = item.blocker
    item.releases.append(candidate.sglang)
    if name in trial.after:
        item.blocked_on.append((candidate.sglang, tuple(dict.fromkeys(f.id for f in trial.after[name]))))
        return None
    off = trial.feature_off.get(name, [])
    if trial.cost:  # it would clear (or start) this one, at a cost elsewhere
        item.rejected.append((candidate.sglang, (f"would start it without {off[0]}, " if off
                                                 else "would clear it, ") + trial.cost))
        return None
    if item.fixed_here and _seen_by(trial.edits, name):  # dominated: flag changes alone clear it
        item.with_flags.append(candidate.sglang)
        return None
    return _Option(rank, trial.variant, trial.edits, off[0] if off else "")


def _choose(item: Advice, options: list[_Option]) -> None:
    """The smallest move that clears it; else the smallest that starts it with the feature off."""
    fixes = [o for o in options if not o.feature_off]
    starts = [o for o in options if o.feature_off]
    if fixes:
        chosen = min(fixes)
        item.fixed_by, item.edits = chosen.variant, chosen.edits
    elif starts:
        chosen = min(starts)
        item.starts_with, item.starts_edits, item.feature_off = chosen.variant, chosen.edits, chosen.feature_off


# Edits: where -> flag -> value; where is "" for benchmarks.server_flags, else a config name.
Edits = dict[str, dict[str, Any]]
MAX_EDIT_ROUNDS = 4  # an edit can reveal the next finding (a rename, then its value)


def _seen_by(edits: Edits, config: str) -> dict[str, Any]:
    """The flag edits one config gets: the common ones (server_flags) and its own."""
    return {**edits.get("", {}), **edits.get(config, {})}


def _more_edits(edits: Edits, own: Edits) -> bool:
    """Whether a candidate needs flag changes beyond those the spec's own stack needs anyway."""
    return any(own.get(where, {}).get(flag, object()) != value
               for where, flags in edits.items() for flag, value in flags.items())


def move(candidate: Candidate) -> int:
    """How far a candidate moves the host, beyond its Python packages: 0 a release on the same
    driver and toolkit, 1 a toolkit added beside the spec's, 2 a driver too."""
    return 2 if candidate.driver else 1 if candidate.toolkit else 0


def flag_edits(spec: Spec, kb: KnowledgeBase, only: str | None = None) -> tuple[Spec, Edits, list[Finding]]:
    """Apply the flag changes the error findings carry (a rule's ``edit``, a renamed flag's new
    spelling) until none is left: the edited spec, the edits, and the findings on it. ``only``:
    the edits one config's errors carry, written into that config."""
    edits: Edits = {}
    findings = evaluate(spec, kb=kb)
    for _ in range(MAX_EDIT_ROUNDS):
        step: Edits = {}
        for f in findings:
            if f.severity != "error" or not f.edit or (only is not None and only not in f.configs):
                continue
            common = only is None and f.field.startswith("benchmarks.server_flags.")
            for where in [only] if only is not None else [""] if common else f.configs:
                for flag, value in f.edit:
                    if edits.get(where, {}).get(flag, object()) != value:
                        step.setdefault(where, {})[flag] = value
        if not step:
            break
        for where, flags in step.items():
            edits.setdefault(where, {}).update(flags)
        spec = with_flags(spec, edits)
        findings = evaluate(spec, kb=kb)
    return spec, edits, findings


def with_flags(spec: Spec, edits: Edits) -> Spec:
    bench = spec.benchmarks
    if bench is None or not edits:
        return spec
    configs = {name: (overlay.model_copy(update={"flags": {**overlay.flags, **edits[name]}})
                      if name in edits else overlay) for name, overlay in bench.configs.items()}
    common = {**bench.server_flags, **edits.get("", {})}
    return spec.model_copy(update={"benchmarks": bench.model_copy(update={"configs": configs,
                                                                          "server_flags": common})})


def edits_fragment(edits: Edits) -> dict[str, Any]:
    """The spec fragment that makes the flag edits (false drops a flag)."""
    if not edits:
        return {}
    out: dict[str, Any] = {}
    if edits.get(""):
        out["server_flags"] = dict(edits[""])
    configs = {name: {"flags": dict(flags)} for name, flags in edits.items() if name}
    if configs:
        out["configs"] = configs
    return {"benchmarks": out}


def upgrade(old: Spec, new: Spec, kb: KnowledgeBase | None = None) -> list[ConfigChange]:
    """Each of SPEC's configs run on OLD's stack (its packages, driver, toolkit) and on SPEC's:
    what the upgrade changes for it."""
    kb = kb or default_knowledge_base()
    if new.benchmarks is None:
        return []
    before = evaluate(old.model_copy(update={"benchmarks": new.benchmarks}), kb=kb)
    after = evaluate(new, kb=kb)
    return [_change(name, before, after) for name in new.benchmarks.configs]


def _change(name: str, before: list[Finding], after: list[Finding]) -> ConfigChange:
    was, now = expected(before, name), expected(after, name)
    return ConfigChange(name, was.label, now.label, was.why, now.why)


@dataclass(frozen=True)
class Trial:
    """One release tried: the variant of it chosen (or the one refused), its flag edits, what
    blocks and what turns a feature off under it, and what it costs ("" when nothing)."""

    variant: Candidate
    edits: Edits
    after: dict[str, list[Finding]]  # blockers (``blockers``) under it
    feature_off: dict[str, list[str]]
    cost: str = ""  # "breaking the stack (...)" / "blocking CONFIG": refused


def _try(spec: Spec, candidate: Candidate, blocked: dict[str, list[Finding]], kb: KnowledgeBase) -> Trial:
    """The candidate, or the candidate with the least toolkit/driver change that keeps the stack
    free of new errors; refused (with its cost) when every variant breaks the stack, or when it
    blocks a config that is not blocked now (a fix for one config must not cost another)."""
    stack_before = {f.id for f in blocked.get(STACK, [])}
    fallback: Trial | None = None  # refused, or (the spec's own release as it is) no move at all
    for variant in stack_variants(spec, candidate, kb):
        moved = with_candidate(spec, variant)
        _, edits, findings = flag_edits(moved, kb)
        trial = Trial(variant, edits, blockers(findings), _feature_off_by_config(findings))
        if moved == spec:  # the spec's own release and pins: only its toolkit/torch variants move
            fallback = fallback or trial
            continue
        if {f.id for f in trial.after.get(STACK, [])} - stack_before:
            fallback = fallback or replace(trial, variant=candidate, cost="breaking the stack (" + ", ".join(
                f.id for f in trial.after[STACK]) + ")")
            continue  # the stack itself would break
        if newly := sorted(set(trial.after) - set(blocked)):  # no toolkit undoes that
            return replace(trial, variant=candidate, cost="blocking " + ", ".join(newly))
        return trial
    assert fallback is not None  # stack_variants gives the candidate itself first
    return fallback


def stack_variants(spec: Spec, candidate: Candidate, kb: KnowledgeBase) -> list[Candidate]:
    """The candidate as is, then with newer toolkits, then with each newer stable torch CUDA
    build of its torch (PyPI's kernel wheels may be built for a newer CUDA than the spec's torch)."""
    out = [candidate, *toolkit_variants(spec, candidate, kb)]
    for tag in newer_torch_builds(candidate, kb):
        moved = replace(candidate, torch_cuda=tag)
        out += [moved, *toolkit_variants(spec, moved, kb)]
    return out


def newer_torch_builds(candidate: Candidate, kb: KnowledgeBase) -> list[str]:
    torch = (candidate.packages.get("torch") or "").removeprefix("==")
    if not torch or not candidate.torch_cuda:
        return []
    minor = ".".join(Version(torch).base_version.split(".")[:2])
    builds = kb.tables["torch_builds"].get(minor) or {}
    have = int(candidate.torch_cuda[2:])
    return sorted((t for t, status in builds.items() if status == "stable" and int(t[2:]) > have),
                  key=lambda t: int(t[2:]))


def toolkit_variants(spec: Spec, candidate: Candidate, kb: KnowledgeBase) -> list[Candidate]:
    """The known toolkits newer than the spec's selected one, each with the driver it needs
    (its installer's bundled driver) where the spec's is older than CUDA's minimum for it."""
    current = spec.cuda.selected.version if spec.cuda else None
    driver = exact_pin(spec.driver.version) if spec.driver else None
    variants = []
    for release in sorted(kb.tables["cuda_bundled_driver"], key=Version):
        if current and Version(release) <= Version(current):
            continue
        needed = kb.tables["cuda_driver_min"].get(release.split(".")[0])
        new_driver = None
        if needed and (driver is None or Version(driver) < Version(needed)):
            new_driver = kb.tables["cuda_bundled_driver"][release]
        variants.append(replace(candidate, toolkit=release, driver=new_driver))
    return variants


def _feature_off_by_config(findings: list[Finding]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in findings:
        for name in f.configs if f.feature else ():
            out.setdefault(name, []).append(f.feature or "")
    return out


def blockers(findings: list[Finding]) -> dict[str, list[Finding]]:
    """The findings that block (validate's judgement, ``outcome.stops``: an error, or a warning
    that predicts the server stops) by what they block: each config they name, or the stack."""
    out: dict[str, list[Finding]] = {}
    for f in findings:
        if not stops(f):
            continue
        for name in f.configs or (STACK,):
            out.setdefault(name, []).append(f)
    return out


def nearest_first(spec: Spec, kb: KnowledgeBase) -> list[Candidate]:
    """Every release with known pins, ordered by distance from the spec's own (first: its own
    pins, toolkit or torch build may be what moves)."""
    pins = kb.tables["sglang_pins"]
    releases = sorted(pins, key=Version)
    current = exact_pin(spec.python.canonical_packages.get("sglang"))
    if current in releases:
        at = releases.index(current)
        order = sorted(range(len(releases)), key=lambda i: (abs(i - at), i < at))
    else:
        order = list(range(len(releases) - 1, -1, -1))  # no exact pin: newest first
    return [_candidate(spec, releases[i], pins[releases[i]], kb) for i in order]


def _candidate(spec: Spec, release: str, pins: dict[str, str], kb: KnowledgeBase) -> Candidate:
    packages: dict[str, str] = {"sglang": f"=={release}", "torch": f"=={pins['torch']}",
                                "flashinfer-python": f"=={pins['flashinfer']}"}
    current = spec.python.canonical_packages
    if "flashinfer-cubin" in current:
        packages["flashinfer-cubin"] = f"=={pins['flashinfer']}"
    for kernel in KERNEL_PACKAGES:
        if kernel != pins["kernel_package"] and kernel in current:
            packages[kernel] = None  # type: ignore[assignment]  # the other name goes
    packages[pins["kernel_package"]] = f"=={pins['kernel']}"
    return Candidate(release, packages, _torch_cuda(spec, pins["torch"], kb))


def _torch_cuda(spec: Spec, torch: str, kb: KnowledgeBase) -> str | None:
    """The spec's torch CUDA build if that torch has it, else the oldest stable one newer."""
    tag = spec.python.torch_cuda
    minor = ".".join(Version(torch).base_version.split(".")[:2])
    builds = kb.tables["torch_builds"].get(minor) or {}
    if not tag or tag in builds or not builds:
        return tag
    stable = sorted((t for t, status in builds.items() if status == "stable"), key=lambda t: int(t[2:]))
    newer = [t for t in stable if int(t[2:]) > int(tag[2:])]
    return (newer or stable or [tag])[0]


def with_candidate(spec: Spec, candidate: Candidate) -> Spec:
    packages = {name: value for name, value in spec.python.packages.items()
                if canonical_name(name) not in candidate.packages}
    packages.update({n: v for n, v in candidate.packages.items() if v is not None})
    python = spec.python.model_copy(update={"packages": packages, "torch_cuda": candidate.torch_cuda})
    update: dict[str, Any] = {"python": python}
    if candidate.toolkit and spec.cuda:
        cuda = _cuda_with(spec, candidate.toolkit)
        update["cuda"] = spec.cuda.model_copy(update={
            "toolkits": [type(spec.cuda.toolkits[0]).model_validate(t) for t in cuda["toolkits"]],
            "select": cuda["select"]})
    if candidate.driver and spec.driver:
        update["driver"] = spec.driver.model_copy(update={"version": f"=={candidate.driver}"})
    return spec.model_copy(update=update)


def _cuda_with(spec: Spec, release: str) -> dict[str, Any]:
    """The spec's toolkits with ``release`` added beside them (same source) and selected."""
    assert spec.cuda is not None
    toolkits = [t.model_dump(exclude_defaults=True) for t in spec.cuda.toolkits]
    if all(t["version"] != release for t in toolkits):
        toolkits.append({"version": release, "source": spec.cuda.selected.source})
    return {"toolkits": toolkits, "select": release}


def fragment(candidate: Candidate, spec: Spec | None = None) -> dict[str, Any]:
    """The spec fragment that selects the candidate (null removes a package)."""
    python: dict[str, Any] = {"packages": {n: (v.removeprefix("==") if v else None)
                                           for n, v in candidate.packages.items()}}
    if candidate.torch_cuda:
        python["torch_cuda"] = candidate.torch_cuda
    out: dict[str, Any] = {}
    if candidate.driver:
        out["driver"] = {"version": candidate.driver}
    if candidate.toolkit and spec is not None and spec.cuda is not None:
        out["cuda"] = _cuda_with(spec, candidate.toolkit)
    elif candidate.toolkit:
        out["cuda"] = {"select": candidate.toolkit}
    return {**out, "python": python}


@dataclass(frozen=True)
class Choice:
    """What ``--write`` writes: a release (None: the spec's own) and the flag edits with it."""

    candidate: Candidate | None
    edits: Edits
    unblocks: tuple[str, ...]

    @property
    def suffix(self) -> str:
        return f"sglang-{self.candidate.sglang}".replace(".", "-") if self.candidate else "flags"


def child_spec(parent: str, name: str, choice: Choice, spec: Spec) -> dict[str, Any]:
    """A spec that extends ``parent`` with the choice's pins and flag edits (for ``--write``)."""
    pins = fragment(choice.candidate, spec) if choice.candidate is not None else {}
    return {"apiVersion": "envmgr/v1", "extends": parent, "metadata": {"name": name},
            **pins, **edits_fragment(choice.edits)}


def best(advice: list[Advice]) -> Choice | None:
    """The change that unblocks the most blockers: flag edits on the spec's own stack before a
    release among equals, then the nearest release."""
    here = [a for a in advice if a.fixed_here]
    options: list[tuple[int, int, Choice]] = []
    if here:
        merged: Edits = {}
        for item in here:
            for where, flags in item.here_edits.items():
                merged.setdefault(where, {}).update(flags)
        options.append((len(here), 1, Choice(None, merged, tuple(a.blocker for a in here))))
    by_release: dict[str, list[Advice]] = {}
    for item in advice:
        if item.fixed_by is not None:
            by_release.setdefault(item.fixed_by.sglang, []).append(item)
    for index, (_, items) in enumerate(by_release.items()):  # nearest first (advice order)
        options.append((len(items), -index - 1, Choice(items[0].fixed_by, items[0].edits,
                                                       tuple(a.blocker for a in items))))
    return max(options, key=lambda o: (o[0], o[1]))[2] if options else None
