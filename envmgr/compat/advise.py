"""``envmgr advise``: for each thing the rules say cannot work, the nearest known stack where it can.

Plain data in, plain data out. A *blocker* is the stack (its error findings that name no config)
or one benchmark config (its error findings). For each, every sglang release the knowledge base
read from the wheels (``sglang_releases.yaml``, with the torch / flashinfer / kernel pins that
release requires, and a torch CUDA build that exists for that torch) is tried, nearest to the
spec's own release first (newer before older at the same distance); the first candidate under
which the blocker has no error left, and the stack gains none, is the advice. When none does,
the advice says so, with the newest release checked and what still stands there: a finding's
own fix (a flag, a driver) is then the way, or nothing is.

With ``--from OLD``: each of the spec's configs on OLD's stack and on the spec's: unblocked,
unchanged, worse, or started but with the feature it asks for still off (a rule marked
``feature_off``: the flag is accepted and ignored).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from packaging.version import Version

from envmgr.compat.evaluate import evaluate
from envmgr.findings import Finding
from envmgr.compat.kb import KERNEL_PACKAGES, KnowledgeBase, Rule, default_knowledge_base
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
    # releases that would clear it at a cost elsewhere: (release, "blocking CONFIG" / "breaking the stack (...)")
    rejected: list[tuple[str, str]] = field(default_factory=list)
    newest_checked: str | None = None
    checked: int = 0

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
        }


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
    for name, item in advice.items():
        if name == STACK:
            continue
        _, edits, findings = flag_edits(spec, kb, only=name)
        if edits and name not in blockers(findings) and not _feature_off_by_config(findings, kb).get(name):
            item.fixed_here, item.here_edits = True, edits  # the smallest change: flags on this stack
    for candidate in candidates:
        variant, after, edits, cost = _without_new_stack_errors(spec, candidate, blocked, kb)
        for name, item in advice.items():
            item.checked += 1
            if item.fixed_by is not None:
                continue
            if after is None:  # refused; say so where it would clear this one (as fixed_by would)
                if cost and name in cost[1] and not (item.fixed_here and edits.get(name)):
                    item.rejected.append((candidate.sglang, cost[0]))
                continue
            if name in after or (item.fixed_here and edits.get(name)):
                continue  # blocked there, or cleared by the same flags the spec's stack needs
            off = after.get("feature_off", {}).get(name, [])
            if off:
                if item.starts_with is None:
                    item.starts_with, item.feature_off = variant, off[0]
                    item.starts_edits = edits
                continue
            item.fixed_by, item.edits = variant, edits
    for item in advice.values():
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


# Edits: where -> flag -> value; where is "" for benchmarks.server_flags, else a config name.
Edits = dict[str, dict[str, Any]]
MAX_EDIT_ROUNDS = 4  # an edit can reveal the next finding (a rename, then its value)


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
    return [_change(name, before, after, kb) for name in new.benchmarks.configs]


def _change(name: str, before: list[Finding], after: list[Finding], kb: KnowledgeBase) -> ConfigChange:
    state_before, why_before = config_outcome(before, name, kb)
    state_after, why_after = config_outcome(after, name, kb)
    return ConfigChange(name, state_before, state_after, why_before, why_after)


def config_outcome(findings: list[Finding], config: str, kb: KnowledgeBase) -> tuple[str, tuple[str, ...]]:
    """runs | runs without FEATURE | blocked, and the rules that say so: validate's judgement of one
    config (an error, or a warning whose case is that the server stops, blocks it)."""
    mine = [f for f in findings if config in f.configs or (not f.configs and f.severity == "error")]
    # validate's judgement: an error, or a warning whose case is that the server stops
    errors = tuple(f.id for f in mine if f.severity == "error" or _stops(kb, f.id))
    if errors:
        return "blocked", errors
    off = [(f.id, feature) for f in mine if (feature := _feature_off(kb, f.id))]
    if off:
        return f"runs without {off[0][1]}", tuple(rule for rule, _ in off)
    return "runs", ()


def _rule(kb: KnowledgeBase, rule_id: str) -> Rule | None:
    try:
        return kb.rule(rule_id)
    except KeyError:  # a flag-check finding, not a rule of rules.yaml
        return None


def _feature_off(kb: KnowledgeBase, rule_id: str) -> str:
    rule = _rule(kb, rule_id)
    return rule.feature_off if rule else ""


def _stops(kb: KnowledgeBase, rule_id: str) -> bool:
    rule = _rule(kb, rule_id)
    return bool(rule and rule.stops)


Cost = tuple[str, set[str]] | None  # why a candidate is refused, and the blocked configs it would clear


def _without_new_stack_errors(spec: Spec, candidate: Candidate, blocked: dict[str, list[Finding]],
                              kb: KnowledgeBase) -> tuple[Candidate, dict | None, Edits, Cost]:
    """The candidate, or the candidate with the least toolkit/driver change that keeps the stack
    free of new errors, with the flag edits it needs, and what still blocks under it; None (and
    the cost) when every variant breaks the stack or blocks a config that is not blocked now (a
    fix for one config must not cost another)."""
    stack_before = {f.id for f in blocked.get(STACK, [])}
    cost: Cost = None
    cost_edits: Edits = {}
    for variant in stack_variants(spec, candidate, kb):
        _, edits, findings = flag_edits(with_candidate(spec, variant), kb)
        after: dict = blockers(findings)
        feature_off = _feature_off_by_config(findings, kb)
        cleared = set(blocked) - set(after) - set(feature_off)  # what it would clear, if it is refused
        if {f.id for f in after.get(STACK, [])} - stack_before:
            if cost is None:
                cost, cost_edits = ("breaking the stack (" + ", ".join(f.id for f in after[STACK]) + ")", cleared), edits
            continue  # the stack itself would break
        if set(after) - set(blocked):  # it blocks a config that runs today: no toolkit undoes that
            return candidate, None, edits, ("blocking " + ", ".join(sorted(set(after) - set(blocked))), cleared)
        after["feature_off"] = feature_off
        return variant, after, edits, None
    return candidate, None, cost_edits, cost


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


def _feature_off_by_config(findings: list[Finding], kb: KnowledgeBase) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in findings:
        feature = _feature_off(kb, f.id)
        for name in f.configs if feature else ():
            out.setdefault(name, []).append(feature)
    return out


def blockers(findings: list[Finding]) -> dict[str, list[Finding]]:
    """Error findings by what they block: each config they name, or the stack."""
    out: dict[str, list[Finding]] = {}
    for f in findings:
        if f.severity != "error":
            continue
        for name in f.configs or (STACK,):
            out.setdefault(name, []).append(f)
    return out


def nearest_first(spec: Spec, kb: KnowledgeBase) -> list[Candidate]:
    """Every release with known pins, ordered by distance from the spec's own."""
    pins = kb.tables["sglang_pins"]
    releases = sorted(pins, key=Version)
    current = exact_pin(spec.python.canonical_packages.get("sglang"))
    if current in releases:
        at = releases.index(current)
        order = sorted(range(len(releases)), key=lambda i: (abs(i - at), i < at))
        order = [i for i in order if i != at]
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
