"""The ``envmgr`` command: parse arguments, call the library, render the result.

Exit codes: 0 success; 1 an error (or, for ``validate``, an error finding; for ``triage``,
a known failure in the log; for ``bench``, a cell that did not run its load);
2 for ``plan`` when there are changes (like terraform's ``-detailed-exitcode``).
Heavy modules are imported inside the commands so ``envmgr --help`` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from envmgr import __version__
from envmgr.errors import EnvmgrError, UsageError

app = typer.Typer(
    name="envmgr",
    help="Declarative environment and upgrade manager for GPU inference hosts.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

SpecArg = Annotated[Path, typer.Argument(help="Spec file (YAML, apiVersion: envmgr/v1)",
                                         show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for machines")]
FactsOpt = Annotated[Optional[Path], typer.Option(
    "--facts", help="Observed facts (from `envmgr facts --json`) instead of this host's")]


def _version(value: bool) -> None:
    if value:
        print(f"envmgr {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks")] = False,
) -> None:
    """Declarative environment and upgrade manager for GPU inference hosts."""


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


@app.command()
def validate(spec: SpecArg, json_: JsonOpt = False, facts: FactsOpt = None) -> None:
    """Check a spec against the compatibility rules: exit 0 without error findings, 1 with."""
    from envmgr.compat import check
    from envmgr.spec import load_spec

    loaded = load_spec(spec)
    findings = check(loaded, _load_facts(facts))
    errors = sum(f.severity == "error" for f in findings)
    if json_:
        _emit({"spec": str(spec), "name": loaded.spec.metadata.name, "digest": loaded.digest,
               "ok": errors == 0, "findings": [f.to_dict() for f in findings]})
    else:
        from envmgr.report.console import render_findings

        render_findings(loaded, findings)
    raise typer.Exit(1 if errors else 0)


@app.command()
def plan(
    spec: SpecArg,
    from_: Annotated[Optional[Path], typer.Option(
        "--from", help="Plan from another spec (an environment realized from it)")] = None,
    facts: FactsOpt = None,
    backend: Annotated[Optional[str], typer.Option(
        "--backend", help="ansible://GROUP?inventory=FILE: check mode (--check --diff) on the hosts")] = None,
    json_: JsonOpt = False,
) -> None:
    """What applying SPEC would change: exit 0 no changes, 2 changes, 1 error."""
    from envmgr.compat import check
    from envmgr.plan import plan as make_plan
    from envmgr.plan import state_from_facts, state_from_spec
    from envmgr.spec import load_spec

    loaded = load_spec(spec)
    if backend is not None:
        if from_ is not None or facts is not None:
            raise UsageError("give --backend, or --from/--facts, not both")
        raise typer.Exit(_plan_on_hosts(loaded, backend, json_))
    observed = _load_facts(facts)
    if from_ is not None:
        if facts is not None:
            raise UsageError("give --from or --facts, not both")
        base = load_spec(from_)
        current = state_from_spec(base.spec, f"spec {base.spec.metadata.name} ({from_})")
    else:
        if observed is None:
            from envmgr.backends.local import LocalBackend
            from envmgr.facts import collect_facts

            with LocalBackend() as local:
                observed = collect_facts(local)
        current = state_from_facts(observed, "local://" if facts is None else str(facts))
    actions = make_plan(current, loaded.spec)
    findings = check(loaded, observed)
    if json_:
        _emit({"spec": str(spec), "name": loaded.spec.metadata.name, "from": current.label,
               "changes": len(actions), "actions": [a.to_dict() for a in actions],
               "findings": [f.to_dict() for f in findings]})
    else:
        from envmgr.report.console import render_plan

        render_plan(loaded, current.label, actions, findings)
    raise typer.Exit(2 if actions else 0)


def _plan_on_hosts(loaded, url: str, json_: bool) -> int:
    """Check mode on the backend's hosts: per-host changes; 2 when any host would change.
    A host that fails or is unreachable even in check mode raises (BackendError: exit 1)."""
    from envmgr.backends import open_backend

    with open_backend(url) as target:
        if not hasattr(target, "check"):
            raise UsageError(f"{url}: plan --backend needs a backend with a check mode",
                             hint="use ansible://GROUP?inventory=FILE")
        report = target.check(loaded, _progress)
    if json_:
        _emit({"spec": str(loaded.path), "name": loaded.spec.metadata.name, "backend": target.url,
               "changes": len(report.changed_hosts), "hosts": report.to_dict()["hosts"]})
    else:
        print(report.changes_text())
    return 2 if report.changed_hosts else 0


@app.command()
def facts(
    json_: JsonOpt = False,
    python: Annotated[str, typer.Option(help="Interpreter whose packages to list")] = "python3",
) -> None:
    """What this host has now: driver, GPUs, CUDA toolkits, nvcc/ptxas, Python packages, env."""
    from envmgr.backends.local import LocalBackend
    from envmgr.facts import collect_facts

    with LocalBackend() as local:
        observed = collect_facts(local, python=python)
    if json_:
        print(observed.model_dump_json(indent=2))
    else:
        from envmgr.report.console import render_facts

        render_facts(observed)


HomeOpt = Annotated[Optional[Path], typer.Option(
    "--home", envvar="ENVMGR_HOME", help="State directory (default: ~/.local/state/envmgr)")]


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _confirm(yes: bool, show: bool):
    """Show the plan (on stderr, so --json stays clean), then ask unless --yes."""
    def ask(actions) -> bool:
        if show:
            from envmgr.report.console import render_actions, stderr_console

            render_actions(list(actions), stderr_console())
        if yes:
            return True
        if not sys.stdin.isatty():
            raise UsageError("apply needs a confirmation and stdin is not a terminal",
                             hint="review with `envmgr plan`, then pass --yes")
        return typer.confirm(f"apply these {len(actions)} change(s)?", default=False)
    return ask


@app.command()
def apply(
    spec: SpecArg,
    backend: Annotated[Optional[str], typer.Option(
        "--backend", help="venv://[PATH], docker://REPOSITORY[?base=IMAGE&wheelhouse=1], "
                          "ansible://GROUP?inventory=FILE (default: the spec's)")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before applying")] = False,
    home: HomeOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Build SPEC as a new generation beside the current one, then switch to it."""
    from envmgr.apply import apply as run_apply
    from envmgr.backends import default_url, open_backend
    from envmgr.spec import load_spec
    from envmgr.state import Store

    loaded = load_spec(spec)
    store = Store(home)
    target = open_backend(backend or default_url(loaded.spec))
    try:
        from envmgr.probes.session import required_probe_gate

        result = run_apply(loaded, target, store, _progress, _confirm(yes, show=not json_),
                           gate=required_probe_gate(_progress), open_backend=open_backend)
    finally:
        target.close()
    if json_:
        _emit(result.to_dict())
    elif result.status == "unchanged":
        print(f"unchanged: generation {result.generation.number} already is {loaded.spec.metadata.name} "
              f"({loaded.digest[:12]})")
    elif result.status == "declined":
        print("nothing applied")
    else:
        print(f"{result.status}: generation {result.generation.number}"
              + (f" (previous: {result.previous.number})" if result.previous else ""))
    raise typer.Exit(1 if result.status == "probes-failed" else 0)


@app.command()
def generations(home: HomeOpt = None, json_: JsonOpt = False) -> None:
    """List the generations; the current one is marked."""
    from envmgr.state import Store

    store = Store(home)
    current = store.current()
    rows = [{"number": g.number, "current": current is not None and g.number == current.number,
             "spec": g.meta.get("spec_name"), "digest": g.meta.get("spec_digest", "")[:12],
             "backend": g.meta.get("backend"), "completed": g.meta.get("completed")}
            for g in store.generations()]
    if json_:
        _emit(rows)
        return
    if not rows:
        print(f"no generations in {store.home}")
    for r in rows:
        print(f"{'*' if r['current'] else ' '} {r['number']:3}  {r['spec']:20} {r['digest']}  {r['backend']}")


@app.command()
def rollback(
    to: Annotated[Optional[int], typer.Option("--to", help="Generation number (default: the one before)")] = None,
    home: HomeOpt = None,
) -> None:
    """Make an earlier generation current again (nothing is rebuilt or deleted)."""
    from envmgr.state import Store

    store = Store(home)
    with store.locked():
        current = store.current()
        if to is None:
            older = [g for g in store.generations() if current is None or g.number < current.number]
            if not older:
                raise UsageError("no earlier generation to roll back to",
                                 hint="`envmgr generations` lists them")
            to = older[-1].number
        target = store.get(to)
        store.switch(target.number)
    print(f"current -> generation {target.number} ({target.meta.get('spec_name')})"
          + (f", was {current.number}" if current else ""))


@app.command()
def status(home: HomeOpt = None, json_: JsonOpt = False) -> None:
    """Compare what the current generation has installed with its lock: exit 2 on drift."""
    from envmgr.apply import generation_drift
    from envmgr.backends import open_backend
    from envmgr.state import Store

    store = Store(home)
    current = store.current()
    if current is None:
        raise UsageError(f"no current generation in {store.home}", hint="run `envmgr apply SPEC` first")
    built = open_backend(current.meta["backend"])
    try:
        drift = generation_drift(current, built)
    finally:
        built.close()
    if json_:
        _emit({"generation": current.number, "spec": current.meta.get("spec_name"),
               "backend": current.meta.get("backend"), "drift": drift.to_dict(), "drifted": bool(drift)})
    else:
        print(f"generation {current.number}: {current.meta.get('spec_name')} via {current.meta.get('backend')}")
        print("drift:\n  " + "\n  ".join(drift.lines()) if drift else "no drift: installed = lock")
    raise typer.Exit(2 if drift else 0)


@app.command()
def probe(
    target: Annotated[Optional[str], typer.Option(
        "--target", help="Backend URL to probe (default: the current generation, else local://)")] = None,
    spec: Annotated[Optional[Path], typer.Option(
        "--spec", help="Spec giving the target arch and GPU count, and the predictions")] = None,
    only: Annotated[Optional[str], typer.Option("--only", help="Comma-separated probe ids")] = None,
    python: Annotated[Optional[str], typer.Option(help="Interpreter of the environment")] = None,
    timeout: Annotated[Optional[float], typer.Option(help="Seconds per probe (default: each probe's own)")] = None,
    home: HomeOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Run capability probes inside an environment; each result beside the rules' prediction.

    Exit 0 when nothing is wrong; 1 when a probe errs, a probe disagrees with its prediction,
    or a probe fails that neither a rule nor the spec's probes.expected_fail foresaw."""
    from envmgr.probes.session import probe_environment

    report = probe_environment(target=target, spec_path=spec, only=only.split(",") if only else None,
                               python=python, timeout=timeout, home=home, progress=_progress)
    if json_:
        _emit(report.to_dict())
    else:
        from envmgr.report.console import render_probes

        render_probes(report)
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def triage(
    log: Annotated[Path, typer.Argument(help="SGLang server log", show_default=False)],
    json_: JsonOpt = False,
) -> None:
    """Explain a server log: exit 0 no known failure, 1 findings (--json: a list of them)."""
    from envmgr.bench.render import triage_command

    raise typer.Exit(triage_command(log, json_))


@app.command()
def bench(
    spec: SpecArg,
    config: Annotated[Optional[list[str]], typer.Option(
        "--config", help="Benchmark config to run (repeat; default: all in the spec)")] = None,
    env: Annotated[Optional[list[str]], typer.Option(
        "--env", help="Environment: a generation number, 'current' or a backend URL (repeat; default: current)")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show each cell's command and checks; launch nothing")] = False,
    rerun: Annotated[bool, typer.Option("--rerun", help="Run cells again even where a result is recorded")] = False,
    home: HomeOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Launch each benchmark config in each environment, load it, record the results.

    Resumable: cells with a recorded result for the same command are not run again.
    Exit 0 when every cell ran its load; 1 when any crashed, hung, timed out or was skipped."""
    from envmgr.bench.matrix import prepare, run_matrix

    cells = prepare(spec, config or [], env or [], home)
    if dry_run:
        if json_:
            _emit([{"env": c.env.info.label, "config": c.config, "argv": list(c.command.argv),
                    "env_vars": c.command.env, "load_argv": list(c.load_argv),
                    "problems": list(c.problems), "would_launch": not c.blocked} for c in cells])
        else:
            from envmgr.report.console import render_cells

            render_cells(cells)
        raise typer.Exit(1 if any(c.blocked for c in cells) else 0)
    run = run_matrix(cells, rerun=rerun, progress=_progress)
    if json_:
        _emit([r.to_dict() for r in run.results])
    else:
        from envmgr.report.bench import comparison, render_terminal
        from envmgr.report.console import stdout_console

        render_terminal(comparison(run.results), stdout_console())
    raise typer.Exit(0 if all(r.ok for r in run.results) else 1)


@app.command()
def report(
    results: Annotated[Optional[Path], typer.Option(
        "--results", help="A folder of recorded results (default: those of the generations)")] = None,
    generation: Annotated[Optional[list[int]], typer.Option(
        "--env", help="Only these generations (repeat)")] = None,
    out: Annotated[Path, typer.Option("--out", help="Where report.html, throughput.png and report.json go")]
        = Path("envmgr-report"),
    home: HomeOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Compare benchmark results side by side: a terminal table, HTML and a PNG plot."""
    from envmgr.bench.collect import results_in_store, results_under
    from envmgr.report.bench import comparison, render_terminal, write_report

    cells = results_under(results) if results else results_in_store(home, generation or [])
    if not cells:
        raise UsageError("no benchmark results to report",
                         hint="run `envmgr bench SPEC` first, or give --results FOLDER")
    written = write_report(cells, out)
    if json_:
        _emit({name: str(path) for name, path in written.items()})
    else:
        from envmgr.report.console import stdout_console

        render_terminal(comparison(cells), stdout_console())
        print("\n".join(f"wrote {path}" for path in written.values()))


@app.command()
def verify(
    spec: SpecArg,
    hosts: Annotated[list[str], typer.Option(
        "--hosts", help="testinfra host URLs (local://, docker://CONTAINER, ssh://user@host, "
                        "ansible://GROUP?ansible_inventory=FILE); repeat or comma-separate")],
    lock: Annotated[Optional[Path], typer.Option(
        "--lock", help="Lock file: packages must equal their locked versions")] = None,
    python: Annotated[str, typer.Option(
        help="Interpreter of the environment, e.g. /opt/envmgr/venv/bin/python")] = "python3",
    json_: JsonOpt = False,
) -> None:
    """Check hosts against SPEC with testinfra: exit 0 all pass, 1 a check failed or an error."""
    from envmgr.verify.run import verify_command

    raise typer.Exit(verify_command(spec, hosts, lock, python, json_))


@app.command()
def schema() -> None:
    """Print the spec's JSON Schema (for editor completion and validation)."""
    from envmgr.spec.schema import json_schema

    _emit(json_schema())


def main(argv: list[str] | None = None) -> int:
    """Console entry point: envmgr errors become a message and exit 1, not a traceback."""
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv or os.environ.get("ENVMGR_DEBUG") == "1"
    try:
        # standalone mode: usage errors print their message and exit 2
        app(args=argv, prog_name="envmgr")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except EnvmgrError as exc:
        if debug:
            raise
        print(f"error: {exc.message}", file=sys.stderr)
        if exc.hint:
            print(f"hint: {exc.hint}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
