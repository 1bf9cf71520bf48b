"""Terminal rendering of the text reports. Only the CLI calls this; it returns nothing.

Plain lines through ``Printer`` (no rich: see ``envmgr.report.printer``); each renderer
takes the printer to write to, stdout's by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from envmgr.report.printer import Printer, stdout_printer

if TYPE_CHECKING:
    from envmgr.builders.base import Step
    from envmgr.compat.advise import Advice
    from envmgr.compat.outcome import Outcome
    from envmgr.facts.model import Facts
    from envmgr.findings import Finding
    from envmgr.plan import Action
    from envmgr.spec import LoadedSpec

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
INDENT = 8


OUTCOME_STYLE = {"runs": "green", "runs without": "yellow", "blocked": "red"}


def render_findings(loaded: LoadedSpec, findings: list[Finding], outcomes: Mapping[str, Outcome] | None = None,
                    out: Printer | None = None) -> None:
    out = out or stdout_printer()
    spec = loaded.spec
    chain = " <- ".join(str(p) for p in loaded.chain)
    out.line((spec.metadata.name, "bold"), f" ({chain}) on {spec.hardware.gpu.count}x "
             f"{spec.hardware.gpu.arch} over {spec.hardware.interconnect}")
    if not findings:
        out.line(("no findings: every rule envmgr knows is satisfied", "green"))
    else:
        _findings(out, findings)
    if outcomes:
        out.line("each config on this stack:")
        for name, outcome in outcomes.items():
            out.indented(f"{name}: {outcome.because}", INDENT, OUTCOME_STYLE[outcome.state])


def _findings(out: Printer, findings: list[Finding]) -> None:
    for f in findings:
        out.line((f"{f.severity.upper():7} ", STYLE[f.severity]), (f.id, "bold"),
                 (f"  {f.where}", "dim") if f.where else "")
        if f.configs:
            out.indented(f"configs: {', '.join(f.configs)}", INDENT)
        out.indented(f.message, INDENT)
        out.indented(f"fix: {f.fix}", INDENT, "green")
        for source in f.sources:
            out.indented(f"source: {source}", INDENT, "dim")
    counts = {s: sum(f.severity == s for f in findings) for s in STYLE}
    out.line(f"{counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} note(s)")


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
                findings: list[Finding], needed: list[Action] | None = None, builder: str = "",
                steps: list[Step] | None = None, out: Printer | None = None, lock: str = "") -> None:
    out = out or stdout_printer()
    out.line(("plan", "bold"), f": {label} -> {loaded.spec.metadata.name} ({loaded.path})")
    if lock:
        out.line(("lock", "bold"), f": {lock}")
    render_actions(actions, out)
    render_steps(steps or [], out, builder)
    if needed:
        out.line()
        out.line(("host prerequisites", "bold"), f" ({builder}:// builds no host: apply checks them, never installs them):")
        for a in needed:
            out.indented(f"{a.kind}  {a.summary()}", 2, "yellow")
    blocking = [f for f in findings if f.severity != "info"]
    if blocking:
        out.line()
        out.line(("compatibility", "bold"), " (`envmgr validate` for details):")
        for f in blocking:
            configs = f" [config {', '.join(f.configs)}]" if f.configs else ""
            out.indented(f"{f.severity.upper():7} {f.id}{configs}: {f.message}", 2, STYLE[f.severity])


def render_actions(actions: list[Action], out: Printer | None = None) -> None:
    out = out or stdout_printer()
    if not actions:
        out.line(("no changes", "green"))
    for i, a in enumerate(actions, 1):
        out.line(f"{i:3}. ", (a.kind, _ACTION_STYLE.get(a.kind.split(".")[1], "")),
                 (" (reboot)", "bold red") if a.reboot else "", (f"  {a.target}  ", "bold"),
                 _change(a.before, a.after))
        out.indented(a.reason, INDENT, "dim")
    if actions:
        reboots = sum(a.reboot for a in actions)
        out.line(f"{len(actions)} change(s)" + (f", {reboots} needing a reboot" if reboots else ""))


def render_steps(steps: list[Step], out: Printer | None = None, builder: str = "") -> None:
    """The builder's steps, as apply executes them."""
    out = out or stdout_printer()
    if not steps:
        return
    out.line()
    out.line(("steps", "bold"), f" (the {builder} builder; apply runs these):" if builder else " (apply runs these):")
    for i, step in enumerate(steps, 1):
        out.indented(f"[{i}/{len(steps)}] {step.summary}", 2)


def render_facts(facts: Facts, out: Printer | None = None) -> None:
    out = out or stdout_printer()
    out.line(("driver", "bold"), f": {facts.driver_version or '-'}",
             f" (CUDA {facts.cuda_driver_version})" if facts.cuda_driver_version else "",
             (f"  {facts.nvml_error}", "red") if facts.nvml_error else "")
    for g in facts.gpus:
        mem = f", {g.memory_mib} MiB" if g.memory_mib else ""
        out.line(f"  gpu {g.index}: {g.name} ({g.arch}{mem})")
    out.line(("/usr/local/cuda", "bold"), f" -> {facts.cuda_link or '-'}")
    for t in facts.toolkits:
        out.line(f"  toolkit {t.version or '?'} at {t.path} ({t.source})")
    origins: dict[tuple[str, str, str], list[str]] = {}
    for c in facts.compilers:  # one line per binary, with every way it is found
        origins.setdefault((c.kind, c.version, c.path), []).append(c.origin)
    for (kind, version, path), found in origins.items():
        out.line(f"  {kind} {version} at {path} (found via {', '.join(found)})")
    jit = facts.jit_nvcc()
    out.line(("FlashInfer JIT nvcc", "bold"), f": {jit.path + ' ' + jit.version if jit else '-'}")
    if facts.python:
        py = facts.python
        out.line(("python", "bold"), f": {py.version} ({py.executable}), {len(py.packages)} packages")
        for name in sorted(py.packages):
            if name.startswith(("torch", "flashinfer", "sglang", "sgl-", "nvidia-", "triton")):
                out.line(f"  {name}=={py.packages[name]}")
    if facts.env:
        out.line(("env", "bold"), ":")
        for k in sorted(facts.env):
            out.line(f"  {k}={facts.env[k]}")
    for fact, why in sorted(facts.missing.items()):
        out.line((f"missing {fact}: {why}", "dim"))


_STATUS_STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow", "error": "bold magenta"}


def render_probes(report, out: Printer | None = None) -> None:
    out = out or stdout_printer()
    out.line(("probes", "bold"), f" in {report.target} ({report.python})",
             f", predictions from spec {report.spec}" if report.spec else "")
    for r in report.results:
        verdict = report.verdict(r)
        p = report.predictions.get(r.probe)
        parts: list = [f"{r.probe:28}", (f"{r.status:6}", _STATUS_STYLE.get(r.status, ""))]
        if p is not None and p.outcome is not None:
            parts += [f" predicted {p.outcome:4} ",
                      (verdict, "bold red reverse" if verdict == "DISAGREE" else "dim")]
        out.line(*parts, (f"  {r.wall_s:5.1f}s", "dim"))
        out.indented(r.summary, INDENT, "red" if report.unexpected(r) else "")
        if verdict == "DISAGREE":
            out.indented(f"the rules ({', '.join(p.rules) or 'none fired'}) predicted {p.outcome}: "
                         "a rule is wrong or the stack is broken", INDENT, "bold red")
    if report.recorded:
        out.line((f"recorded in {report.recorded}", "dim"))
    if not report.tested:
        out.line(("nothing tested: every probe skipped (see why above); no answer is no pass", "bold red"))
    else:
        out.line(("ok", "green") if report.ok else ("unexpected results above", "bold red"))


def render_cells(cells, out: Printer | None = None) -> None:
    """``envmgr bench --dry-run``: each cell's command, env and what the checks say."""
    import shlex

    out = out or stdout_printer()
    for cell in cells:
        out.line((f"{cell.env.info.label} x {cell.config}", "bold"),
                 ("  would be skipped", "red") if cell.blocked else ("  would launch", "green"),
                 (f"; expected: {cell.expected.because}", OUTCOME_STYLE[cell.expected.state]))
        out.indented("$ " + shlex.join(cell.command.argv), INDENT, "cyan")
        if cell.command.env:
            out.indented("env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in cell.shown_env.items()), INDENT)
        out.indented("load: " + shlex.join(cell.load_argv), INDENT, "dim")
        for problem in cell.problems:
            style = {"error": "red", "warning": "yellow"}.get(problem.severity, "dim")
            out.indented(f"{problem.severity}: {problem.id}: {problem.message}", INDENT, style)
            out.indented(f"    fix: {problem.fix}", INDENT, "green")


def _conditions(out: Printer, item: Advice, style: str) -> None:
    """The condition a "no release clears it" sentence holds under, a line per group: the releases
    that would clear it at a cost elsewhere, those that clear it only with flag changes, and what
    blocks it under each of the others."""
    for sentence in item.sentences():
        out.indented(f"  {sentence}", INDENT, style)


def _paste(out: Printer, what: str, fragment: dict) -> None:
    import yaml

    out.indented(f"{what}; paste into the spec (or `envmgr advise SPEC --write CHILD.yaml`):", INDENT, "green")
    for line in yaml.safe_dump(fragment, sort_keys=False).splitlines():
        out.indented(line, INDENT + 2)


def render_advice(loaded: LoadedSpec, advice: list, upgrade=None, from_label: str = "",
                  out: Printer | None = None) -> None:
    """``envmgr advise``: per blocker, the nearest known release that clears it, or why none."""
    from envmgr.compat.advise import STACK

    out = out or stdout_printer()
    spec = loaded.spec
    out.line((spec.metadata.name, "bold"), f" ({loaded.path}) on {spec.hardware.gpu.count}x "
             f"{spec.hardware.gpu.arch}: " + ", ".join(f"{n} {_bare(v)}" for n, v in spec.python.packages.items()))
    if upgrade is not None:
        out.line(f"each config on {from_label}'s stack -> on this one:")
        for change in upgrade:
            style = {"unblocked": "green", "worse": "red", "unchanged": "dim"}.get(change.verdict, "yellow")
            why = lambda rules: f" ({', '.join(rules)})" if rules else ""  # noqa: E731
            out.indented((f"{change.config}: {change.before}{why(change.why_before)} -> "
                          f"{change.after}{why(change.why_after)}: {change.verdict}"), INDENT, style)
    if not advice:
        out.line(("nothing is blocked: no finding on this stack or its configs says it will fail", "green"))
        return
    for item in advice:
        what = "the stack" if item.blocker == STACK else f"config {item.blocker}"
        out.line((what, "bold"), ": blocked by " + ", ".join(f.id for f in item.errors))
        for f in item.errors:
            out.indented(f"{f.id}: {f.fix}", INDENT, "dim")
        if item.fixed_here:
            _paste(out, "flag changes clear it on this stack", item.fragments["flags"])
        if item.fixed_by is not None:
            _paste(out, ("or " if item.fixed_here else "") + f"the release that clears it with the least change: {item.fixed_by.label}"
                   + (" with flag changes" if item.edits else ""), item.fragments["fix"])
        elif item.fixed_here:
            cost = " and without a cost elsewhere" if item.rejected else ""
            out.indented(f"no known sglang release clears it without these flags{cost} "
                         f"({item.checked} checked, newest {item.newest_checked}):", INDENT, "dim")
            _conditions(out, item, "dim")
        else:
            if item.starts_with is not None:
                out.indented(f"{item.starts_with.label} starts it, but {item.feature_off} stays off there",
                             INDENT, "yellow")
            out.indented(f"no known sglang release makes it work on {spec.hardware.gpu.count}x "
                         f"{spec.hardware.gpu.arch} without blocking another config ({item.checked} checked, "
                         f"newest {item.newest_checked}): the fix above is the way, if any", INDENT, "red")
            _conditions(out, item, "red")
            for f in item.still:
                out.indented(f"  on {item.newest_checked}: {f.id}: {f.message}", INDENT, "dim")
