"""Apply a spec: plan against the current generation, build a new one beside it, switch.

The current generation is never modified: the builder's steps run inside the new
generation's directory, and ``current`` moves only after the new one is complete
(see ``envmgr.state`` for why a crash anywhere leaves the previous one current).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from envmgr import __version__, failpoints
from envmgr.backends import recorded_target
from envmgr.builders.base import Build, Step, execute
from envmgr.drift import Drift, compare
from envmgr.errors import EnvmgrError, UsageError
from envmgr.plan import Action, State, plan, split_for_builder, state_from_facts, state_from_spec
from envmgr.secrets import Redactor
from envmgr.spec.load import LoadedSpec
from envmgr.state import Generation, Store, current_spec

if TYPE_CHECKING:
    from envmgr.builders.base import Builder
    from envmgr.facts.model import Facts
    from envmgr.progress import Progress
    from envmgr.savedplan import SavedPlan
    from envmgr.targets.base import Target

# Given the generation and the target that runs in it, the names of required probes that failed.
ProbeGate = Callable[[Generation, "Target"], list[str]]
# Shown the plan (its actions and the builder's steps): True to go on.
Confirm = Callable[[Sequence[Action], Sequence[Step]], bool]


@dataclass
class ApplyResult:
    status: str  # "unchanged" | "declined" | "applied" | "probes-failed"
    actions: list[Action] = field(default_factory=list)
    generation: Generation | None = None
    previous: Generation | None = None
    steps: list[Step] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"status": self.status, "actions": [a.to_dict() for a in self.actions],
                "steps": [s.to_dict() for s in self.steps],
                "generation": self.generation.number if self.generation else None,
                "previous": self.previous.number if self.previous else None}


def generation_state(gen: Generation, target: Target) -> tuple[Drift, str | None]:
    """(drift, why the environment is missing): an environment whose interpreter cannot be run
    (a deleted venv, a removed image) is missing, not drifted."""
    from envmgr.facts import collect_facts

    # isolated: envmgr's own PYTHONPATH (or the operator's) is not the environment's
    facts = collect_facts(target, python=target.interpreter, isolated=True)
    if facts.python is None:
        return compare(gen.lock, {}), facts.missing.get("python", "its interpreter cannot be run")
    return compare(gen.lock, facts.python.packages, base_packages(gen.lock, target)), None


def base_packages(lock: str, target: Target) -> dict[str, str]:
    """What the base interpreter of an environment that inherits offers (its packages show
    through the environment's own); empty when nothing is inherited or the base cannot run
    (then the inherited packages show as missing or changed, and the base's others as extra)."""
    from envmgr.inherit import read_interpreter
    from envmgr.lock import inherited_python

    base = inherited_python(lock)
    if base is None:
        return {}
    try:
        return {name: d.version for name, d in read_interpreter(base, target).distributions.items()}
    except EnvmgrError:
        return {}


def baseline_of(previous: Generation | None) -> State:
    """What a new generation is planned against: the current one's spec, else nothing."""
    if previous is None:
        return State(label="nothing (first generation)")
    return state_from_spec(current_spec(previous).spec, f"generation {previous.number}")


def planned_from(loaded: LoadedSpec, other: LoadedSpec | None, facts: Facts | None, facts_label: str | None,
                 current_of: Callable[[], Generation | None]) -> tuple[State, Facts | None]:
    """What ``envmgr plan`` plans from, and the facts the rules see: another spec (``--from``),
    recorded facts (``--facts``), else what apply plans from: the current generation (from its
    spec; built from this very spec: nothing to plan), else nothing (``baseline_of``), the rules
    then seeing this host's facts. The store is read (``current_of``) only when it decides."""
    if other is not None:
        return state_from_spec(other.spec, f"spec {other.spec.metadata.name} ({other.path})"), facts
    current = current_of() if facts is None else None
    if current is not None:
        same = current.meta.get("spec_digest") == loaded.digest  # its recorded copy has secrets redacted
        return state_from_spec(loaded.spec if same else current_spec(current).spec,
                               f"generation {current.number} (current{', this spec' if same else ''})"), None
    if facts is not None:
        return state_from_facts(facts, facts_label or "the facts given"), facts
    from envmgr.facts import collect_facts
    from envmgr.targets.local import LocalTarget

    with LocalTarget() as local:
        facts = collect_facts(local)
    return baseline_of(None), facts  # as apply: a first generation is built from nothing


def plan_for(loaded: LoadedSpec, builder: Builder,
             baseline: State) -> tuple[list[Action], list[Action], list[Step]]:
    """(actions, host prerequisites, the builder's steps) from ``baseline`` to ``loaded``.
    ``envmgr plan`` and ``apply`` both call this, so the steps shown are the steps executed."""
    actions, needed = split_for_builder(plan(baseline, loaded.spec), builder.changes_host)
    return actions, needed, builder.steps(loaded, actions)  # a build with no action repairs drift


def apply(
    loaded: LoadedSpec,
    builder: Builder,
    store: Store,
    progress: Progress,
    confirm: Confirm,
    gate: ProbeGate | None = None,
    open_target: Callable[[str], Target] | None = None,
    reviewed: SavedPlan | None = None,
) -> ApplyResult:
    """Build ``loaded`` as a new generation unless the current one already is it. ``reviewed``:
    the saved plan this apply must be (refused, before a generation, when it no longer is)."""
    with store.locked():
        failpoints.reach("locked")
        previous = store.current()
        if reviewed is not None:
            reviewed.check_generation(previous)
        if previous is not None and _is_unchanged(previous, loaded, builder, open_target):
            return ApplyResult("unchanged", previous=previous, generation=previous)
        builder.preflight(loaded)  # before a plan is shown or a generation started
        actions, needed, steps = plan_for(loaded, builder, baseline_of(previous))
        if reviewed is not None:
            reviewed.check_plan(actions, steps, Redactor.for_spec(loaded.spec))
        _check_host_prerequisites(needed, loaded, builder.builds_here, progress)
        if not confirm(actions, steps):
            return ApplyResult("declined", actions, previous=previous, steps=steps)
        path = store.begin()
        failpoints.reach("generation-created")
        redact = Redactor.for_spec(loaded.spec)
        _record_inputs(path, loaded, actions, steps, redact)
        failpoints.reach("spec-recorded")
        with open(path / "logs" / "apply.log", "a", encoding="utf-8") as log:
            def tee(line: str) -> None:  # a build tool may echo a secret: never into the log
                line = redact.text(line)
                log.write(f"{time.strftime('%H:%M:%S')} {line}\n")
                log.flush()
                progress(line)

            tee(f"generation {path.name}: {loaded.spec.metadata.name} ({loaded.digest[:12]}) "
                f"with the {builder.kind} builder, {len(steps)} step(s)")
            try:
                realized = execute(steps, Build(loaded, path, tee))
            except KeyboardInterrupt:  # Ctrl-C or a signal: say what it left, then stop as asked
                tee(f"interrupted: generation {path.name} is incomplete and never becomes current; "
                    + (f"generation {previous.number} is still current" if previous else "nothing is current")
                    + " (the next apply removes the incomplete one)")
                raise
            (path / "lock.txt").write_text(realized.lock, encoding="utf-8")
            failpoints.reach("lock-written")
            generation = store.commit(path, {
                "spec_name": loaded.spec.metadata.name, "spec_digest": loaded.digest,
                "spec_file": str(loaded.path.resolve()), "backend": realized.target,
                "backend_kind": builder.kind, "location": realized.location, "details": realized.details,
                "envmgr_version": __version__, "actions": len(actions),
                **({"lock_file": str(builder.lock.path.resolve()), "lock_digest": builder.lock.digest}
                   if builder.lock is not None else {}),
            })
            failpoints.reach("committed")
            required = loaded.spec.probes.required
            if gate is None and required:
                tee(f"required probes {', '.join(required)} not run: no probe gate given; switching without them")
            failed: list[str] = []
            if gate is not None:
                from envmgr.targets import open_target as default_open

                with (open_target or default_open)(realized.target) as target:
                    failed = gate(generation, target)
            store.record_gate(generation, list(required), failed)
            failpoints.reach("gated")
            if failed:
                tee(f"required probes failed: {', '.join(failed)}; generation {generation.number} "
                    "kept, current not switched")
                return ApplyResult("probes-failed", actions, generation, previous, steps)
            store.switch(generation.number)
            failpoints.reach("switched")
            tee(f"current -> generation {generation.number}")
    return ApplyResult("applied", actions, generation, previous, steps)


def _check_host_prerequisites(needed: Sequence[Action], loaded: LoadedSpec, builds_here: bool,
                              progress: Progress) -> None:
    """An environment made on this host (a venv: ``Builder.builds_here``) needs the host's driver
    and system toolkits as the spec says: checked here, never installed (only a builder that
    changes hosts does that); an image needs them where it runs."""
    if not needed:
        return
    if not builds_here:
        progress("needed on the host that runs it (not built here): " + "; ".join(a.summary() for a in needed))
        return
    from envmgr.facts import collect_facts
    from envmgr.targets.local import LocalTarget

    with LocalTarget() as local:  # the venv is made on this host: its driver and toolkits decide
        host = state_from_facts(collect_facts(local), "local://")
    unmet = [a for a in plan(host, loaded.spec) if a.scope == "host"]
    if unmet:
        raise UsageError(
            "venv:// builds a Python environment, not the host: "
            + "; ".join(f"{a.kind} {a.summary()}" for a in unmet) + " is the host's own",
            hint="provision the host first (envmgr apply SPEC --backend ansible://GROUP), or drop "
                 "driver / the system toolkit from the spec for a venv on a host that has none")
    progress("host prerequisites met: " + "; ".join(a.summary() for a in needed))


def rollback(store: Store, to: int | None, force: bool) -> tuple[Generation, int | None]:
    """Make generation ``to`` (default: the newest usable one before current) current again;
    (it, the number current had). Works when what current names is damaged: that is when
    an operator needs it most."""
    from envmgr.records import DamagedRecord

    with store.locked("rollback"):
        failpoints.reach("locked")
        try:
            current = store.current_number()
        except DamagedRecord:
            current = None
        if to is None:
            older = [g for g in store.generations() if current is None or g.number < current]
            refusals = {g.number: None if force else rollback_refusal(g) for g in older}
            usable = [g for g in older if refusals[g.number] is None and g.number != current]
            if not usable:
                why = "; ".join(filter(None, refusals.values()))
                raise UsageError("no earlier generation to roll back to" + (f": {why}" if why else ""),
                                 hint="`envmgr generations` lists them; --to N --force switches anyway")
            target = usable[-1]
        else:
            target = store.get(to)
            refusal = None if force else rollback_refusal(target)
            if refusal:
                raise UsageError(f"not rolling back: {refusal}", hint=f"--to {target.number} --force switches anyway")
        store.switch(target.number)
        failpoints.reach("switched")
    return target, current


def rollback_refusal(gen: Generation) -> str | None:
    """Why ``gen`` must not become current again, or None. ``rollback --force`` overrides."""
    if gen.gate == "failed":
        failed = ", ".join(map(str, (gen.gate_record or {}).get("failed") or [])) or "required probes"
        return f"generation {gen.number} failed its probe gate ({failed}) and never became current"
    if gen.gate == "damaged":
        return f"generation {gen.number}'s gate.json is damaged: its probe gate's verdict is unknown"
    if gen.gate == "interrupted":
        return (f"generation {gen.number}'s apply was interrupted before its probe gate decided: "
                "it never became current")
    return _environment_missing(gen)


def _environment_missing(gen: Generation) -> str | None:
    """The built environment is gone (a venv deleted, an image removed): None when present
    or when that cannot be told from here (hosts of an ansible rollout, no Docker daemon)."""
    target = recorded_target(gen.meta.get("backend_kind"))
    gone = target.gone(gen.location) if target is not None and gen.location else None
    return f"generation {gen.number}'s {gone}" if gone else None


def _is_unchanged(previous: Generation, loaded: LoadedSpec, builder: Builder,
                  open_target: Callable[[str], Target] | None) -> bool:
    """Same spec content, same kind of backend, the committed lock (if one is installed) the one
    it installed, and nothing drifted inside."""
    meta = previous.meta
    if meta.get("spec_digest") != loaded.digest or meta.get("backend_kind") != builder.kind:
        return False
    if builder.lock is not None and meta.get("lock_digest") != builder.lock.digest:
        return False  # `envmgr lock` made a new one since
    if open_target is None:
        return True
    with open_target(previous.backend) as built:
        drift, _ = generation_state(previous, built)  # a missing environment: all of it missing
        return not drift


def _record_inputs(path: Path, loaded: LoadedSpec, actions: Sequence[Action], steps: Sequence[Step],
                   redact: Redactor) -> None:
    merged = recorded_spec(loaded.spec, redact)
    (path / "spec.yaml").write_text(
        f"# merged from {', '.join(str(p) for p in loaded.chain)}\n"
        + yaml.safe_dump(merged, sort_keys=False), encoding="utf-8")
    (path / "plan.json").write_text(json.dumps(redact.data({
        "actions": [a.to_dict() for a in actions], "steps": [s.to_dict() for s in steps]}), indent=2),
        encoding="utf-8")


def recorded_spec(spec, redact: Redactor) -> dict:
    """The merged spec as a generation keeps it: plain data, secret values replaced."""
    merged = spec.model_dump(mode="json", exclude={"extends"}, exclude_none=True)
    merged["env"] = redact.env(merged.get("env", {}))
    for config in (merged.get("benchmarks") or {}).get("configs", {}).values():
        config["env"] = redact.env(config.get("env", {}))
    return redact.data(merged)
