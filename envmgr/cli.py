"""The ``envmgr`` command: parse arguments, call the library, render the result.

Exit codes (each command's in ``EXIT_CODES``, printed in its --help and docs/cli.md): 0 success;
1 an error (or, for ``validate``, an error finding; for ``triage``, a known failure in the log;
for ``bench``, a cell that did not run its load); 2 for ``plan`` when there are changes (like
terraform's ``-detailed-exitcode``) and ``status`` on drift; 64 (EX_USAGE) for a command line it
rejects; 141 when what reads its output goes away; 130 / 128+N when interrupted.

The command layer is the standard library's argparse: each command is a function taking
the parsed arguments and returning its exit code, declared with the options it takes.
(typer built its whole command tree and a pydantic adapter per parameter on every run,
about a quarter of a cold ``validate``.) Heavy modules are imported inside the commands so
``envmgr --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import signal
import sys
from pathlib import Path
from typing import Callable

from envmgr import __version__, backends
from envmgr.commandline import (
    USAGE,
    BadArguments,
    Opt,
    Parser,
    Terminated,
    loudness,
    opt,
    positive,
    reader_gone,
    stdout_closed,
    stop_on_signals,
)
from envmgr.errors import EnvmgrError, UsageError

SPEC = opt("spec", type=Path, metavar="SPEC", help="Spec file (YAML, apiVersion: envmgr/v1)")
JSON = opt("--json", dest="json", action="store_true", help="Print JSON for machines")
FACTS = opt("--facts", type=Path, metavar="FILE", help="Observed facts (from `envmgr facts --json`) instead of this host's")
HOME = opt("--home", type=Path, metavar="DIR", help="State directory (default: $ENVMGR_HOME, else ~/.local/state/envmgr)")

COMMANDS: list[tuple[str, Callable[[argparse.Namespace], int], tuple[Opt, ...]]] = []
# What each command's exit code means (shown under its --help; a test checks every command has one).
# Every command also exits USAGE for a command line it rejects (never 2, which plan and status
# say "changes" / "drift" with), 141 when what reads its output goes away, and 130 / 128+N when
# interrupted.
EXIT_CODES = {
    "validate": "0 no error finding, 1 an error finding or an error",
    "plan": "0 no changes, 2 changes, 1 an error",
    "lock": "0 written, 1 an error",
    "init": "0 written, 1 an error (the file exists: --force)",
    "advise": "0 every blocker has a known way out, 1 not, or an error",
    "facts": "0 facts collected (what the host lacks is reported, never an error)",
    "apply": "0 applied or unchanged, 1 declined at the prompt, required probes failed, or an error",
    "run": "the command's own; 127 it does not exist there; 1 an envmgr error",
    "shell": "the shell's own; 1 an envmgr error",
    "env": "0 printed, 1 an error",
    "gc": "0 collected (or listed, --dry-run), 1 an error",
    "generations": "0 listed, 1 an error",
    "rollback": "0 switched, 1 refused or an error",
    "status": "0 installed = lock, 2 drift, 1 the environment is missing or an error",
    "probe": "0 something tested and nothing unexpected, 1 every probe skipped, or a probe erred, disagreed with its prediction or failed unforeseen",
    "triage": "0 no known failure, 1 a failure, 2 only feature-off warnings",
    "bench": "0 every cell ran its load, 1 a cell crashed, hung, timed out or was skipped, or an error",
    "report": "0 written, 1 no results or an error",
    "verify": "0 every check passed, 1 a check failed or an error",
    "schema": "0",
    "completion": "0",
}


def command(*options: Opt) -> Callable:
    """Register ``cmd_NAME`` as the command NAME; its docstring is the help."""
    def register(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        if not func.__name__.startswith("cmd_"):  # a helper put between a decorator and its command
            raise TypeError(f"@command decorates {func.__name__}, not a cmd_ function")
        COMMANDS.append((func.__name__.removeprefix("cmd_"), func, options))
        return func
    return register


def _emit(data: object) -> None:
    print(json.dumps(data, indent=2, sort_keys=False))


def _load_facts(path: Path | None):
    if path is None:
        return None
    from envmgr.facts.model import Facts

    try:
        return Facts.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read facts file {path}: {exc}") from exc
    except ValueError as exc:
        raise UsageError(f"{path} is not an `envmgr facts --json` document: {exc}",
                         hint="write it with `envmgr facts --json > FILE`") from exc


# ---------------------------------------------------------------------------------------------
# Commands


@command(SPEC, JSON, FACTS, opt("--check-index", action="store_true",
                               help="Also ask the spec's wheel sources whether each pin has a release (network; offline-aware)"))
def cmd_validate(a: argparse.Namespace) -> int:
    """Check a spec against the compatibility rules: exit 0 without error findings, 1 with."""
    from envmgr.compat import check
    from envmgr.compat.outcome import expected_all
    from envmgr.spec import load_spec

    loaded = load_spec(a.spec)
    findings = check(loaded, _load_facts(a.facts))
    if a.check_index:
        from envmgr.pins import check_pins

        findings += check_pins(loaded.spec, locate=loaded.locate)
    errors = sum(f.severity == "error" for f in findings)
    bench = loaded.spec.benchmarks
    outcomes = expected_all(findings, bench.configs) if bench is not None else {}
    if a.json:
        _emit({"spec": str(a.spec), "name": loaded.spec.metadata.name, "digest": loaded.digest,
               "ok": errors == 0, "findings": [f.to_dict() for f in findings],
               "configs": {name: outcome.to_dict() for name, outcome in outcomes.items()}})
    else:
        from envmgr.report.console import render_findings

        render_findings(loaded, findings, outcomes)
    return 1 if errors else 0


@command(SPEC, opt("--from", dest="from_", type=Path, metavar="SPEC", help="Plan from another spec (an environment realized from it)"),
         FACTS, opt("--backend", metavar="URL", help="ansible://GROUP?inventory=FILE: check mode (--check --diff) on the hosts"),
         opt("-o", "--out", type=Path, metavar="PLAN", help="Save the plan: `envmgr apply PLAN` applies exactly it, or refuses"),
         HOME, JSON)
def cmd_plan(a: argparse.Namespace) -> int:
    """What applying SPEC would change (from what apply builds beside: the current generation, else nothing): exit 0 no changes, 2 changes, 1 error."""
    from envmgr.compat import check
    from envmgr.spec import load_spec

    loaded = load_spec(a.spec.resolve() if a.out is not None else a.spec)  # a saved plan names it absolutely
    if a.backend is not None:
        if a.from_ is not None or a.facts is not None or a.out is not None:
            raise UsageError("--backend is check mode on the hosts: give it without --from, --facts or -o")
        return _plan_on_hosts(loaded, a.backend, a.json, a.progress)
    if a.from_ is not None and a.facts is not None:
        raise UsageError("give --from or --facts, not both")
    if a.out is not None and (a.from_ is not None or a.facts is not None):
        raise UsageError("-o saves what apply would do: it plans from the current generation, not --from or --facts")
    from envmgr.apply import plan_for, planned_from
    from envmgr.builders import open_builder
    from envmgr.lockfile import choose_lock, read_lock

    observed = _load_facts(a.facts)
    generation = _current_generation(a.home)
    current, observed = planned_from(loaded, load_spec(a.from_) if a.from_ is not None else None,
                                     observed, str(a.facts) if a.facts is not None else None, lambda: generation)
    findings = check(loaded, observed)
    found = read_lock(loaded)
    lock = choose_lock(loaded, "default", a.progress)  # what apply installs without --locked/--frozen
    with open_builder(loaded, lock=lock) as builder:  # the spec's realize.backend builds it
        actions, needed, steps = plan_for(loaded, builder, current)
    if a.out is not None:
        from envmgr.savedplan import SavedPlan
        from envmgr.secrets import Redactor

        SavedPlan.made(loaded, lock.digest if lock else None, generation, None, builder.kind, actions, steps,
                       Redactor.for_spec(loaded.spec)).write(a.out, loaded.chain)
    steps = steps if actions else []  # nothing to change: apply says unchanged and builds nothing
    lock_said = (found.status() if found is not None else
                 f"none beside the spec (apply resolves; `envmgr lock {a.spec}` commits one)")
    if a.json:
        _emit({"spec": str(a.spec), "name": loaded.spec.metadata.name, "from": current.label,
               "builder": builder.kind, "changes": len(actions), "actions": [x.to_dict() for x in actions],
               "steps": [x.to_dict() for x in steps], "host_prerequisites": [x.to_dict() for x in needed],
               "lock": found.to_dict() if found is not None else None, "saved": str(a.out) if a.out else None,
               "findings": [f.to_dict() for f in findings]})
    else:
        from envmgr.report.console import render_plan

        render_plan(loaded, current.label, actions, findings, needed, builder.kind, steps, lock=lock_said)
        if a.out is not None:
            print(f"saved the plan to {a.out}: `envmgr apply {a.out}` applies exactly it")
    return 2 if actions else 0


@command(opt("name", metavar="NAME", help="The environment's name (metadata.name)"), FACTS,
         opt("-o", "--out", type=Path, metavar="SPEC", help="Where to write it (default: NAME.yaml here)"),
         opt("--python", metavar="PY", help="The interpreter whose packages it pins (default: python3 here)"),
         opt("--force", action="store_true", help="Replace SPEC if it exists"))
def cmd_init(a: argparse.Namespace) -> int:
    """Write a starting spec from this host's facts (or --facts FILE): its GPUs, driver, toolkits, Python and stack pins."""
    from envmgr.initspec import spec_text
    from envmgr.userfiles import write_user_file

    facts, label = _load_facts(a.facts), str(a.facts)
    if facts is None:
        from envmgr.facts import collect_facts
        from envmgr.targets.local import LocalTarget

        with LocalTarget() as local:
            facts, label = collect_facts(local, python=a.python or "python3"), "local://"
    out = a.out or Path(f"{a.name}.yaml")
    write_user_file(out, spec_text(a.name, facts, label, str(out)), force=a.force, what="the spec")
    print(f"wrote {out}: review it, then `envmgr validate {out}`")
    return 0


@command(SPEC, JSON)
def cmd_lock(a: argparse.Namespace) -> int:
    """Resolve SPEC's packages into SPEC.lock beside it, to commit: apply installs it on every host (--locked: or stops)."""
    from envmgr.lockfile import PLATFORM, write_lock
    from envmgr.spec import load_spec

    loaded = load_spec(a.spec)
    locked = write_lock(loaded, a.progress)
    if a.json:
        _emit(locked.to_dict())
    else:
        print(f"wrote {locked.path}: {locked.packages} packages for Python {loaded.spec.python.version} on {PLATFORM}")
    return 0


@command(SPEC, opt("--from", dest="from_", type=Path, metavar="OLD", help="The spec of the stack that works today: which configs SPEC unblocks"),
         opt("--write", type=Path, metavar="CHILD.yaml", help="Write a spec extending SPEC with the release that unblocks the most"),
         opt("--force", action="store_true", help="Replace CHILD.yaml if it exists (never SPEC or a file it extends)"),
         JSON)
def cmd_advise(a: argparse.Namespace) -> int:
    """For each config validate calls blocked, the smallest known move that clears it: exit 0 all clearable, 1 not."""
    from envmgr.compat.advise import advise, upgrade
    from envmgr.compat.child import write_child
    from envmgr.spec import load_spec

    loaded = load_spec(a.spec)
    advice = advise(loaded.spec)
    moved = upgrade(load_spec(a.from_).spec, loaded.spec) if a.from_ is not None else None
    written = None
    if a.write is not None:
        child = write_child(loaded, a.spec, advice, a.write, force=a.force,
                            protected=[a.from_] if a.from_ is not None else [])
        written = str(a.write) if child is not None else None
    if a.json:
        _emit({"spec": str(a.spec), "name": loaded.spec.metadata.name,
               "from": str(a.from_) if a.from_ else None,
               "upgrade": [c.to_dict() for c in moved] if moved is not None else None,
               "advice": [x.to_dict() for x in advice], "written": written})
    else:
        from envmgr.report.console import render_advice

        render_advice(loaded, advice, moved, str(a.from_) if a.from_ else "")
        if written:
            print(f"wrote {written} (extends {a.spec})")
        elif a.write is not None:
            print(f"nothing written to {a.write}: no known release or flag change clears any blocker without blocking another")
    return 1 if any(x.fixed_by is None and not x.fixed_here for x in advice) else 0


def _current_generation(home: Path | None):
    from envmgr.state import Store

    store = Store(home)
    return store.current() if store.home.is_dir() else None


def _plan_on_hosts(loaded, url: str, as_json: bool, progress) -> int:
    """Check mode on the fleet's hosts: per-host changes; 2 when any host would change.
    A host that fails or is unreachable even in check mode raises (BackendError: exit 1)."""
    from envmgr.builders import open_builder

    with open_builder(loaded, url) as builder:
        if not builder.can_check:
            raise UsageError(f"{url}: plan --backend needs a builder with a check mode on its target",
                             hint="use ansible://GROUP?inventory=FILE")
        url, report = builder.check(loaded, progress)
    if as_json:
        _emit({"spec": str(loaded.path), "name": loaded.spec.metadata.name, "backend": url,
               "changes": len(report.changed_hosts), "hosts": report.to_dict()["hosts"]})
    else:
        print(report.changes_text())
    return 2 if report.changed_hosts else 0


@command(JSON, opt("--python", default="python3", metavar="PY", help="Interpreter whose packages to list (default: python3)"))
def cmd_facts(a: argparse.Namespace) -> int:
    """What this host has now: driver, GPUs, CUDA toolkits, nvcc/ptxas, Python packages, env."""
    from envmgr.facts import collect_facts
    from envmgr.targets.local import LocalTarget

    with LocalTarget() as local:
        observed = collect_facts(local, python=a.python)
    if a.json:
        print(observed.model_dump_json(indent=2))
    else:
        from envmgr.report.console import render_facts

        render_facts(observed)
    return 0


def _confirm(yes: bool, show: bool):
    """Show the plan (on stderr, so --json stays clean), then ask unless --yes."""
    def ask(actions, steps) -> bool:
        if show:
            from envmgr.report.console import render_actions, render_steps
            from envmgr.report.printer import stderr_printer

            out = stderr_printer()
            render_actions(list(actions), out)
            render_steps(list(steps), out)
        if yes:
            return True
        if not sys.stdin.isatty():
            raise UsageError("apply needs a confirmation and stdin is not a terminal",
                             hint="review with `envmgr plan`, then pass --yes")
        answer = input(f"apply these {len(actions)} change(s)? [y/N]: ")
        return answer.strip().lower() in ("y", "yes")
    return ask


@command(SPEC, opt("--backend", metavar="URL", help=f"{backends.forms(only_buildable=True)} (default: the spec's)"),
         opt("--yes", "-y", action="store_true", help="Do not ask before applying"),
         opt("--locked", action="store_true", help="Stop unless SPEC's committed lock exists and is current"),
         opt("--frozen", action="store_true", help="Install SPEC's committed lock as it is, without checking it"),
         HOME, JSON)
def cmd_apply(a: argparse.Namespace) -> int:
    """Build SPEC (or the saved PLAN of `plan -o`) as a new generation beside the current one, then switch to it."""
    from envmgr.apply import apply as run_apply
    from envmgr.builders import open_builder
    from envmgr.lockfile import choose_lock
    from envmgr.probes.session import required_probe_gate
    from envmgr.savedplan import read_plan, reviewed_inputs
    from envmgr.spec import load_spec
    from envmgr.state import Store
    from envmgr.targets import open_target

    if a.locked and a.frozen:
        raise UsageError("give --locked or --frozen, not both")
    saved = read_plan(a.spec)
    if saved is not None:  # the plan was the question: applied as reviewed, or refused
        if a.locked or a.frozen:
            raise UsageError("a saved plan fixes its lock: apply it without --locked or --frozen")
        loaded, lock = reviewed_inputs(saved, a.backend, a.progress)
        backend, confirm = saved.backend, _confirm(True, show=False)
    else:
        loaded = load_spec(a.spec)
        lock = choose_lock(loaded, "locked" if a.locked else "frozen" if a.frozen else "default", a.progress)
        backend, confirm = a.backend, _confirm(a.yes, show=not a.json)
    store = Store(a.home)
    with open_builder(loaded, backend, lock) as builder:
        result = run_apply(loaded, builder, store, a.progress, confirm, gate=required_probe_gate(a.progress),
                           open_target=open_target, reviewed=saved)
    if a.json:
        _emit(result.to_dict())
    elif result.status == "unchanged" and result.generation is not None:
        print(f"unchanged: generation {result.generation.number} already is {loaded.spec.metadata.name} "
              f"({loaded.digest[:12]})")
    elif result.status == "declined":
        print("nothing applied: declined at the prompt")
    else:
        print(f"{result.status}: generation {result.generation.number if result.generation else '-'}"
              + (f" (previous: {result.previous.number})" if result.previous else ""))
    return 1 if result.status in ("probes-failed", "declined") else 0


ENV = opt("--env", metavar="GEN|URL", help=f"current (default), a generation number, or a target URL ({backends.forms()})")


@command(ENV, HOME, opt("--timeout", type=positive, default=3600.0, metavar="S",
                        help="Seconds the command may run in a container or on hosts (default 3600)"),
         opt("argv", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="The command and its arguments"))
def cmd_run(a: argparse.Namespace) -> int:
    """Run a command in an environment: its interpreter first on PATH, CUDA_HOME, the spec's env.

    Exit code: the command's own; 127 when it does not exist there; 1 for an envmgr error
    (also an environment that is not there: never the host's python instead).
    On this host (venv, local) the command replaces envmgr, with the terminal and signals;
    in a container or on hosts its output is printed when it ends (every host's, in order)."""
    from envmgr.errors import CommandNotFound
    from envmgr.targets import open_target
    from envmgr.use import choose, command_argv, exec_here, require_present, run_there

    argv = command_argv(a.argv)
    chosen = choose(a.env, a.home)
    try:
        with open_target(chosen.url) as target:
            require_present(chosen, target)
            if target.runs_here:
                exec_here(target, argv)  # returns only by raising
            return run_there(target, argv, a.timeout)
    except CommandNotFound as exc:  # as a shell says it: 127
        return _failed(exc, 127, as_json=False)


@command(ENV, HOME)
def cmd_shell(a: argparse.Namespace) -> int:
    """An interactive shell in an environment ($SHELL here with its env; docker run -it for an image)."""
    from envmgr.targets import open_target
    from envmgr.use import choose, exec_here, require_present, shell_argv

    chosen = choose(a.env, a.home)
    with open_target(chosen.url) as target:
        require_present(chosen, target)
        argv = shell_argv(target)
        print(f"envmgr shell: {chosen.label} (exit the shell to leave it)", file=sys.stderr)
        if target.runs_here:
            exec_here(target, argv)
    os.execv(argv[0], argv)  # the docker CLI, with the terminal
    return 0  # pragma: no cover - exec does not return


@command(ENV, HOME, JSON, opt("--sh", action="store_true", help='Print exports for eval "$(envmgr env --sh)"'))
def cmd_env(a: argparse.Namespace) -> int:
    """The variables commands in an environment get (secrets redacted; --sh reads them when evaluated)."""
    from envmgr.targets import open_target
    from envmgr.use import choose, comment, exports, refusal, require_present, secrecy, shown

    if a.json and a.sh:
        raise UsageError("give --json or --sh, not both")
    chosen = choose(a.env, a.home)
    with open_target(chosen.url) as target:
        require_present(chosen, target)
        env = target.environment()
        secrets = secrecy(env, chosen, target)
        if a.sh:
            out = exports(env, secrets, target)
            sys.stdout.write(out.text)
            for name in out.refused:
                print(refusal(name), file=sys.stderr)
            return 0
        visible = shown(env, secrets)
        interpreter = target.interpreter
    if a.json:
        _emit({"environment": chosen.url, "generation": chosen.generation.number if chosen.generation else None,
               "interpreter": interpreter, "env": visible, "hidden_because": secrets.why})
    else:
        print(comment(f"{chosen.label}; interpreter {interpreter}"))
        if secrets.why:
            print(comment(secrets.why))
        for name, value in visible.items():
            print(f"{name}={value}")
    return 0


@command(opt("--keep", type=int, default=3, metavar="N", help="Keep the N newest generations too (default 3)"),
         opt("--dry-run", action="store_true", help="Only list what would be removed"), HOME, JSON)
def cmd_gc(a: argparse.Namespace) -> int:
    """Remove old generations, their venvs and images, and dangling build stages; sizes shown.

    Never the current generation or the previous good one (what rollback would choose)."""
    from envmgr.gc import collect, garbage, human, kept
    from envmgr.state import Store

    if a.keep < 0:
        raise UsageError(f"--keep {a.keep}: give 0 or more")
    store = Store(a.home)
    # a dry run only reads: it never waits for, nor blocks, an apply
    with contextlib.nullcontext() if a.dry_run else store.locked("gc"):
        items = garbage(store, a.keep)
        kept_numbers = sorted(kept(store, a.keep))
        total = sum(i.size_bytes for i in items)
        freed = 0 if a.dry_run else collect(store, items, lambda line: print(line, file=sys.stderr) if not a.json else None)
    refused = [i for i in items if i.kind == "refused"]
    removable = [i for i in items if i.kind != "refused"]
    if a.json:
        _emit({"dry_run": a.dry_run, "kept": kept_numbers, "items": [i.to_dict() for i in items],
               "total_bytes": total, "freed_bytes": freed, "refused": len(refused)})
        return 1 if refused else 0
    for item in removable if a.dry_run else ():
        where = f" (generation {item.generation})" if item.generation is not None and item.kind != "generation" else ""
        print(f"would remove {item.kind} {item.what}{where}: {human(item.size_bytes)}")
    for item in refused:
        print(f"refused: {item.what} (generation {item.generation}) is not removed: {item.why}", file=sys.stderr)
    verb = "would free" if a.dry_run else "freed"
    print(f"kept generations {', '.join(map(str, kept_numbers)) or 'none'}; {len(removable)} item(s), "
          f"{verb} {human(freed if not a.dry_run else total)}"
          + (f"; {len(refused)} refused (see above: envmgr removes only what is provably its own)" if refused else ""))
    return 1 if refused else 0


@command(HOME, JSON)
def cmd_generations(a: argparse.Namespace) -> int:
    """List the generations: the current one marked, each one's probe gate and date."""
    import time

    from envmgr.records import DamagedRecord
    from envmgr.state import Store

    store = Store(a.home)
    try:
        current: int | None = store.current_number()
        link_problem = None
    except DamagedRecord as exc:
        current, link_problem = None, exc.message
    rows = [{"number": g.number, "current": g.number == current,
             "spec": g.meta.get("spec_name"), "digest": g.meta.get("spec_digest", "")[:12],
             "backend": g.backend, "completed": g.meta.get("completed"), "gate": g.gate}
            for g in store.generations()]
    rows += [{"number": n, "current": n == current, "spec": None, "digest": "", "backend": None,
              "completed": None, "gate": "damaged", "damaged": why} for n, why in store.damaged()]
    rows.sort(key=lambda r: r["number"])
    if a.json:
        _emit(rows)
        return 0
    if not rows:
        print(f"no generations in {store.home}")
    for r in rows:
        if r.get("damaged"):
            print(f"{'*' if r['current'] else ' '} {r['number']:3}  damaged: {r['damaged']}")
            continue
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r["completed"])) if r["completed"] else "?"
        print(f"{'*' if r['current'] else ' '} {r['number']:3}  {str(r['spec']):20} {r['digest']}  "
              f"gate {r['gate']:11} {when}  {r['backend']}")
    if link_problem:
        print(f"current: {link_problem}", file=sys.stderr)
    return 0


@command(opt("--to", type=int, metavar="N", help="Generation number (default: the one before)"),
         opt("--force", action="store_true",
             help="Switch even to a generation that failed its probe gate, was interrupted or lost its environment"),
         HOME, JSON)
def cmd_rollback(a: argparse.Namespace) -> int:
    """Make an earlier generation current again (nothing is rebuilt or deleted).

    Refused, unless --force, for a generation that failed its probe gate, whose apply was
    interrupted before the gate decided, or whose environment is gone; without --to, the
    newest earlier generation that can be used is chosen."""
    from envmgr.apply import rollback
    from envmgr.state import Store

    target, current = rollback(Store(a.home), a.to, a.force)
    if a.json:
        _emit({"current": target.number, "spec": target.meta.get("spec_name"), "backend": target.backend,
               "previous": current, "forced": bool(a.force)})
    else:
        print(f"current -> generation {target.number} ({target.meta.get('spec_name')})"
              + (f", was {current}" if current is not None else ""))
    return 0


@command(HOME, JSON)
def cmd_status(a: argparse.Namespace) -> int:
    """Compare what the current generation has installed with its lock: exit 0 as locked,
    2 on drift, 1 when its environment is missing."""
    from envmgr.apply import generation_state
    from envmgr.state import Store
    from envmgr.targets import open_target

    store = Store(a.home)
    current = store.current()
    if current is None:
        raise UsageError(f"no current generation in {store.home}", hint="run `envmgr apply SPEC` first")
    with open_target(current.backend) as built:
        drift, missing = generation_state(current, built)
    spec_file = current.meta.get("spec_file") if isinstance(current.meta.get("spec_file"), str) else "SPEC"
    fix = (f"`envmgr apply {spec_file}` builds a new generation as locked (this one is left as it is), "
           "`envmgr rollback` goes back to the previous one") if drift or missing else None
    if a.json:
        _emit({"generation": current.number, "spec": current.meta.get("spec_name"),
               "backend": current.backend, "missing": missing,
               "drift": None if missing else drift.to_dict(), "drifted": bool(drift) and not missing, "fix": fix})
    else:
        print(f"generation {current.number}: {current.meta.get('spec_name')} via {current.backend}")
        if missing:
            print(f"environment missing: {missing}; {fix}")
        else:
            print("drift:\n  " + "\n  ".join(drift.lines()) + f"\nto fix: {fix}" if drift else "no drift: installed = lock")
    if missing:
        return 1
    return 2 if drift else 0


@command(opt("--target", metavar="URL", help="Target URL to probe (default: the current generation, else local://)"),
         opt("--spec", type=Path, metavar="SPEC", help="Spec giving the target arch and GPU count, and the predictions"),
         opt("--only", metavar="IDS", help="Comma-separated probe ids"),
         opt("--python", metavar="PY", help="Interpreter of the environment"),
         opt("--timeout", type=positive, metavar="S", help="Seconds per probe (default: each probe's own)"),
         HOME, JSON)
def cmd_probe(a: argparse.Namespace) -> int:
    """Run capability probes inside an environment; each result beside the rules' prediction.

    Exit 0 when nothing is wrong; 1 when a probe errs, a probe disagrees with its prediction,
    or a probe fails that neither a rule nor the spec's probes.expected_fail foresaw."""
    from envmgr.probes.session import probe_environment

    report = probe_environment(target=a.target, spec_path=a.spec, only=a.only.split(",") if a.only else None,
                               python=a.python, timeout=a.timeout, home=a.home, progress=a.progress)
    if a.json:
        _emit(report.to_dict())
    else:
        from envmgr.report.console import render_probes

        render_probes(report)
    return 0 if report.ok else 1


@command(opt("log", type=Path, metavar="LOG", help="SGLang server log"), JSON)
def cmd_triage(a: argparse.Namespace) -> int:
    """Explain a server log: exit 0 no known failure, 1 a failure, 2 only feature-off warnings (--json: a list)."""
    from envmgr.bench.render import exit_code, read_findings, render_findings

    findings = read_findings(a.log)
    if a.json:
        _emit([f.to_dict() for f in findings])
    else:
        render_findings(str(a.log), findings)
    return exit_code(findings)


@command(SPEC,
         opt("--config", action="append", default=[], metavar="NAME", help="Benchmark config to run (repeat; default: all in the spec)"),
         opt("--env", action="append", default=[], metavar="GEN|URL",
             help="Environment: a generation number, 'current' or a target URL (repeat; default: current)"),
         opt("--dry-run", action="store_true", help="Show each cell's command and checks; launch nothing"),
         opt("--rerun", action="store_true", help="Run cells again even where a result is recorded"),
         HOME, JSON)
def cmd_bench(a: argparse.Namespace) -> int:
    """Launch each benchmark config in each environment, load it, record the results.

    Resumable: cells with a recorded result for the same command are not run again.
    Exit 0 when every cell ran its load; 1 when any crashed, hung, timed out or was skipped."""
    from envmgr.bench.matrix import prepare, run_matrix

    cells = prepare(a.spec, a.config, a.env, a.home)
    if a.dry_run:
        if a.json:
            _emit([{"env": c.env.info.label, "config": c.config, "argv": list(c.command.argv),
                    "env_vars": c.shown_env, "load_argv": list(c.load_argv),
                    "problems": [p.to_dict() for p in c.problems], "would_launch": not c.blocked,
                    "expected": c.expected.to_dict()} for c in cells])
        else:
            from envmgr.report.console import render_cells

            render_cells(cells)
        return 1 if any(c.blocked for c in cells) else 0
    run = run_matrix(cells, rerun=a.rerun, progress=a.progress)
    if a.json:
        _emit([r.to_dict() for r in run.results])
    else:
        from envmgr.report.bench import comparison, render_terminal
        from envmgr.report.printer import visible

        render_terminal(comparison(run.results))
        for cell, result in zip(run.cells, run.results, strict=True):  # a failure's evidence, where to read more
            if result.outcome in ("ok", "skipped"):
                continue
            print(visible(f"{cell.config} @ {cell.env.info.label} {result.outcome}; server log: "
                          f"{cell.dir / (result.server_log or 'server.log')}"))
            for line in result.log_tail:  # the server's own lines: shown, never obeyed
                print(visible(f"  | {line}"))
    return 0 if all(r.ok for r in run.results) else 1


@command(opt("--results", type=Path, metavar="DIR", help="A folder of recorded results (default: those of the generations)"),
         opt("--env", dest="generation", type=int, action="append", default=[], metavar="N", help="Only these generations (repeat)"),
         opt("--out", type=Path, default=Path("envmgr-report"), metavar="DIR",
             help="Where report.html, throughput.png and report.json go (default: envmgr-report)"),
         opt("--force", action="store_true", help="Replace the report files already in DIR"),
         HOME, JSON)
def cmd_report(a: argparse.Namespace) -> int:
    """Compare benchmark results side by side: a terminal table, HTML and a PNG plot."""
    from envmgr.bench.collect import results_in_store, results_under
    from envmgr.report.bench import comparison, render_terminal, write_report

    cells = results_under(a.results) if a.results else results_in_store(a.home, a.generation)
    if not cells:
        raise UsageError("no benchmark results to report",
                         hint="run `envmgr bench SPEC` first, or give --results FOLDER")
    written = write_report(cells, a.out, force=a.force)
    if a.json:
        _emit({name: str(path) for name, path in written.items()})
    else:
        render_terminal(comparison(cells))
        print("\n".join(f"wrote {path}" for path in written.values()))
    return 0


@command(opt("spec", type=Path, nargs="?", metavar="SPEC",
             help="Spec file (default: the current generation's, when --hosts is not given)"),
         opt("--hosts", action="append", metavar="URL",
             help="testinfra host URLs (local://, docker://CONTAINER, ssh://user@host, "
                  "ansible://GROUP?inventory=FILE); repeat or comma-separate "
                  "(default: the current generation: its venv with its env, or a throwaway container of its image)"),
         opt("--lock", type=Path, metavar="FILE", help="Lock file: packages must equal their locked versions"),
         opt("--python", default="python3", metavar="PY",
             help="Interpreter of the environment, e.g. /opt/envmgr/venv/bin/python (default: python3)"),
         HOME, JSON)
def cmd_verify(a: argparse.Namespace) -> int:
    """Check hosts against SPEC with testinfra (default: the current generation): exit 0 all pass, 1 a check failed or an error."""
    from envmgr.verify.run import render, results_document, verify_generation, verify_hosts

    if a.hosts:
        if a.spec is None:
            raise UsageError("give the SPEC to verify the hosts against", hint="envmgr verify SPEC --hosts URL")
        done = verify_hosts(a.spec, a.hosts, a.lock, a.python)
    else:
        generation = _current_generation(a.home)
        if generation is None:
            raise UsageError("no current generation to verify, and no --hosts given",
                             hint="envmgr verify SPEC --hosts URL, or `envmgr apply SPEC` first")
        done = verify_generation(generation, a.spec)
    if a.json:
        _emit(results_document(done.spec_path, done.spec, done.hosts, done.results))
    else:
        render(done.spec.metadata.name, done.results)
    return 0 if done.ok else 1


@command()
def cmd_schema(a: argparse.Namespace) -> int:
    """Print the spec's JSON Schema (for editor completion and validation)."""
    from envmgr.spec.schema import shipped_schema_text

    sys.stdout.write(shipped_schema_text())
    return 0


# ---------------------------------------------------------------------------------------------
# Parsing and the entry point


@command(opt("shell", choices=("bash", "zsh"), help="The shell the script is for"))
def cmd_completion(a: argparse.Namespace) -> int:
    """Print a completion script: eval "$(envmgr completion bash)" in ~/.bashrc (zsh: in ~/.zshrc)."""
    from envmgr.completion import script

    parser = build_parser()
    print(script(parser, parser.commands, a.shell), end="")
    return 0


def build_parser() -> Parser:
    parser = Parser(
        prog="envmgr", description="Declarative environment and upgrade manager for GPU inference hosts.",
        epilog="`envmgr COMMAND --help` says what each command takes and what its exit codes mean.")
    parser.commands = {}
    parser.add_argument("--version", action="version", version=f"envmgr {__version__}")
    parser.add_argument("--debug", action="store_true", help="Show tracebacks (also ENVMGR_DEBUG=1)")
    # how much progress shows on stderr: before the command (envmgr -q apply) or after it; the
    # command's copies default to SUPPRESS so that they never undo what was given before it
    loudness(parser, default=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    common = Parser(add_help=False)
    loudness(common, default=argparse.SUPPRESS)
    for name, func, options in COMMANDS:
        doc = inspect.cleandoc(func.__doc__ or "")
        summary = " ".join(doc.split("\n\n")[0].split())  # the first paragraph, whole
        sub = commands.add_parser(name, help=summary, description=doc, parents=[common],
                                  epilog=f"exit codes: {EXIT_CODES[name]}; {USAGE} a command line it rejects",
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        for o in options:
            sub.add_argument(*o.names, **o.kwargs)
        sub.set_defaults(func=func)
        parser.commands[name] = sub
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console entry point: envmgr errors become a message and exit 1, not a traceback; under
    ``--json`` the same error is also a JSON object on stdout, with the same exit code."""
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv or os.environ.get("ENVMGR_DEBUG") == "1"
    # known before parsing (an argument error has no parsed args), and never from a command's own
    # arguments after `--` (envmgr run -- tool --json)
    as_json = "--json" in (argv[:argv.index("--")] if "--" in argv else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return USAGE
        from envmgr.report.progress import TerminalProgress

        args.progress = TerminalProgress(verbose=args.verbose, quiet=args.quiet)
        try:
            with stop_on_signals():
                code = args.func(args)
                sys.stdout.flush()  # here, not at exit: a reader that has gone is seen below
                return code
        finally:
            args.progress.close()
    except BadArguments as exc:  # argparse's own message, after the usage line it printed
        return _failed(UsageError(exc.message, hint=f"`envmgr {exc.command} --help` lists the options"
                                  if exc.command else "`envmgr --help` lists the commands"), USAGE, as_json,
                       show=False)
    except SystemExit as exc:  # --help, --version
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except EnvmgrError as exc:
        if debug:
            raise
        return _failed(exc, 1, as_json)
    except BrokenPipeError as exc:
        if not stdout_closed():  # a pipe of envmgr's own (a socket, a tool's stdin): an error
            return _failed(EnvmgrError(f"{exc.strerror or exc}", hint="--debug shows where it happened"), 1,
                           as_json, kind="OSError")
        return reader_gone()
    except OSError as exc:  # the machine said no (a full disk, a path that vanished): not a bug
        if debug:
            raise
        where = f": {exc.filename}" if exc.filename else ""
        error = EnvmgrError(f"{exc.strerror or exc}{where}", hint="--debug shows where it happened")
        return _failed(error, 1, as_json, kind="OSError")
    except Terminated as exc:
        name = signal.Signals(exc.signum).name
        return _failed(EnvmgrError(f"stopped by {name}"), 128 + exc.signum, as_json, kind=name, plain=True)
    except KeyboardInterrupt:
        return _failed(EnvmgrError("interrupted"), 130, as_json, kind="KeyboardInterrupt", plain=True)


def _failed(error: EnvmgrError, code: int, as_json: bool, *, kind: str | None = None,
            show: bool = True, plain: bool = False) -> int:
    """Say what went wrong on stderr (``error: ...`` and ``hint: ...``), and under ``--json`` as
    ``{"error": {...}, "exit_code": N}`` on stdout; return the exit code."""
    if show:
        print(error.message if plain else f"error: {error.message}", file=sys.stderr)
        if error.hint:
            print(f"hint: {error.hint}", file=sys.stderr)
    if as_json:
        data = error.to_dict()
        if kind:
            data["error"]["type"] = kind
        _emit({**data, "exit_code": code})
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
