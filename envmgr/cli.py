"""The ``envmgr`` command: parse arguments, call the library, render the result.

Exit codes: 0 success; 1 an error (or, for ``validate``, an error finding);
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
    json_: JsonOpt = False,
) -> None:
    """What applying SPEC would change: exit 0 no changes, 2 changes, 1 error."""
    from envmgr.compat import check
    from envmgr.plan import plan as make_plan
    from envmgr.plan import state_from_facts, state_from_spec
    from envmgr.spec import load_spec

    loaded = load_spec(spec)
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
