"""Terminal rendering with rich. Only the CLI calls this; it returns nothing."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

if TYPE_CHECKING:
    from envmgr.compat import Finding
    from envmgr.facts.model import Facts
    from envmgr.plan import Action
    from envmgr.spec import LoadedSpec

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _console(stderr: bool = False) -> Console:
    # Piped output (CI logs, files) is not wrapped at 80 columns.
    stream = sys.stderr if stderr else sys.stdout
    return Console(highlight=False, stderr=stderr, width=None if stream.isatty() else 160)


def stderr_console() -> Console:
    return _console(stderr=True)


def stdout_console() -> Console:
    return _console()


def render_findings(loaded: LoadedSpec, findings: list[Finding], console: Console | None = None) -> None:
    console = console or _console()
    spec = loaded.spec
    chain = " <- ".join(str(p) for p in loaded.chain)
    console.print(f"[bold]{spec.metadata.name}[/] ({chain}) on {spec.hardware.gpu.count}x "
                  f"{spec.hardware.gpu.arch} over {spec.hardware.interconnect}")
    if not findings:
        console.print("[green]no findings: every rule envmgr knows is satisfied[/]")
        return
    for f in findings:
        head = Text()
        head.append(f"{f.severity.upper():7} ", style=STYLE[f.severity])
        head.append(f.rule, style="bold")
        if f.where:
            head.append(f"  {f.where}", style="dim")
        console.print(head)
        if f.configs:
            _indented(console, f"configs: {', '.join(f.configs)}")
        _indented(console, f.message)
        _indented(console, f"fix: {f.fix}", style="green")
        _indented(console, f"source: {f.source}", style="dim")
    counts = {s: sum(f.severity == s for f in findings) for s in STYLE}
    console.print(f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} note(s)")


def _indented(console: Console, text: str, style: str = "") -> None:
    console.print(Padding(Text(text, style=style), (0, 0, 0, 8), expand=False))


_ACTION_STYLE = {"install": "green", "add": "green", "set": "green", "create": "green",
                 "upgrade": "cyan", "select": "cyan", "change": "yellow", "rebuild": "yellow",
                 "downgrade": "magenta", "remove": "red", "unset": "red"}


def _bare(value: str | None) -> str:
    """``==2.9.1`` reads as ``2.9.1``; ranges stay as written."""
    if value and value.startswith("==") and "," not in value:
        return value[2:]
    return value or ""


def _change(before: str | None, after: str | None) -> str:
    if before and after:
        return f"{_bare(before)} -> {_bare(after)}"
    return _bare(after) if after else f"(was {_bare(before)})"


def render_plan(loaded: LoadedSpec, label: str, actions: list[Action],
                findings: list[Finding], console: Console | None = None) -> None:
    console = console or _console()
    console.print(f"[bold]plan[/]: {label} -> {loaded.spec.metadata.name} ({loaded.path})")
    render_actions(actions, console)
    blocking = [f for f in findings if f.severity != "info"]
    if blocking:
        console.print()
        console.print("[bold]compatibility[/] (`envmgr validate` for details):")
        for f in blocking:
            configs = f" [config {', '.join(f.configs)}]" if f.configs else ""
            console.print(Padding(Text(f"{f.severity.upper():7} {f.rule}{configs}: {f.message}",
                                       style=STYLE[f.severity]), (0, 0, 0, 2), expand=False))


def render_actions(actions: list[Action], console: Console | None = None) -> None:
    console = console or _console()
    if not actions:
        console.print("[green]no changes[/]")
    for i, a in enumerate(actions, 1):
        line = Text(f"{i:3}. ")
        line.append(a.kind, style=_ACTION_STYLE.get(a.kind.split(".")[1], ""))
        if a.reboot:
            line.append(" (reboot)", style="bold red")
        line.append(f"  {a.target}  ", style="bold")
        line.append(_change(a.before, a.after))
        console.print(line)
        _indented(console, a.reason, style="dim")
    if actions:
        reboots = sum(a.reboot for a in actions)
        console.print(f"{len(actions)} change(s)" + (f", {reboots} needing a reboot" if reboots else ""))


def render_facts(facts: Facts, console: Console | None = None) -> None:
    console = console or _console()
    console.print(f"[bold]driver[/]: {facts.driver_version or '-'}"
                  + (f" (CUDA {facts.cuda_driver_version})" if facts.cuda_driver_version else "")
                  + (f"  [red]{facts.nvml_error}[/]" if facts.nvml_error else ""))
    for g in facts.gpus:
        mem = f", {g.memory_mib} MiB" if g.memory_mib else ""
        console.print(f"  gpu {g.index}: {g.name} ({g.arch}{mem})")
    console.print(f"[bold]/usr/local/cuda[/] -> {facts.cuda_link or '-'}")
    for t in facts.toolkits:
        console.print(f"  toolkit {t.version or '?'} at {t.path} ({t.source})")
    origins: dict[tuple[str, str, str], list[str]] = {}
    for c in facts.compilers:  # one line per binary, with every way it is found
        origins.setdefault((c.kind, c.version, c.path), []).append(c.origin)
    for (kind, version, path), found in origins.items():
        console.print(f"  {kind} {version} at {path} (found via {', '.join(found)})", markup=False)
    jit = facts.jit_nvcc()
    console.print(f"[bold]FlashInfer JIT nvcc[/]: {jit.path + ' ' + jit.version if jit else '-'}")
    if facts.python:
        py = facts.python
        console.print(f"[bold]python[/]: {py.version} ({py.executable}), {len(py.packages)} packages")
        for name in sorted(py.packages):
            if name.startswith(("torch", "flashinfer", "sglang", "sgl-", "nvidia-", "triton")):
                console.print(f"  {name}=={py.packages[name]}")
    if facts.env:
        console.print("[bold]env[/]:")
        for k in sorted(facts.env):
            console.print(f"  {k}={facts.env[k]}", markup=False)
    for fact, why in sorted(facts.missing.items()):
        console.print(f"[dim]missing {fact}: {why}[/]")


_STATUS_STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow", "error": "bold magenta"}


def render_probes(report, console: Console | None = None) -> None:
    console = console or _console()
    console.print(f"[bold]probes[/] in {report.target} ({report.python})"
                  + (f", predictions from spec {report.spec}" if report.spec else ""))
    for r in report.results:
        line = Text(f"{r.probe:28}")
        line.append(f"{r.status:6}", style=_STATUS_STYLE.get(r.status, ""))
        verdict = report.verdict(r)
        p = report.predictions.get(r.probe)
        if p is not None and p.outcome is not None:
            line.append(f" predicted {p.outcome:4} ")
            line.append(verdict, style="bold red reverse" if verdict == "DISAGREE" else "dim")
        line.append(f"  {r.wall_s:5.1f}s", style="dim")
        console.print(line)
        _indented(console, r.summary, style="red" if report.unexpected(r) else "")
        if verdict == "DISAGREE":
            _indented(console, f"the rules ({', '.join(p.rules) or 'none fired'}) predicted {p.outcome}: "
                               "a rule is wrong or the stack is broken", style="bold red")
    if report.recorded:
        console.print(f"recorded in {report.recorded}", style="dim")
    console.print("[green]ok[/]" if report.ok else "[bold red]unexpected results above[/]")


def render_cells(cells, console: Console | None = None) -> None:
    """``envmgr bench --dry-run``: each cell's command, env and what the checks say."""
    import shlex

    console = console or _console()
    for cell in cells:
        head = Text()
        head.append(f"{cell.env.info.label} x {cell.config}", style="bold")
        head.append("  would be skipped" if cell.blocked else "  would launch",
                    style="red" if cell.blocked else "green")
        console.print(head)
        _indented(console, "$ " + shlex.join(cell.command.argv), style="cyan")
        if cell.command.env:
            _indented(console, "env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in cell.command.env.items()))
        _indented(console, "load: " + shlex.join(cell.load_argv), style="dim")
        for problem in cell.problems:
            style = {"error": "red", "warning": "yellow"}.get(problem["severity"], "dim")
            _indented(console, f"{problem['severity']}: {problem['id']}: {problem['message']}", style=style)
            _indented(console, f"    fix: {problem['fix']}", style="green")
