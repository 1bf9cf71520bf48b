"""Human and machine output of triage findings, and what ``envmgr triage LOG`` does.

Exit codes of ``envmgr triage``: 0 the log shows no known failure, 1 it shows at least one
(like ``envmgr validate`` with an error finding), and 1 with a message for an unreadable log
(an ``EnvmgrError`` the CLI prints). ``--json`` prints a list of finding objects, most specific
first, each with at least id, line (1-based), message, fix and values.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from envmgr.bench.triage import Finding, read_log, triage_text
from envmgr.report.console import stdout_console
from envmgr.errors import UsageError


def triage_command(path: Path, as_json: bool) -> int:
    """Read the log at PATH, print its findings; 0 when none, 1 when any."""
    findings = triage_text(_read(path))
    if as_json:
        print(json.dumps([f.to_dict() for f in findings], indent=2))
    else:
        render_findings(str(path), findings)
    return 1 if findings else 0


def _read(path: Path) -> str:
    try:
        return read_log(path)
    except OSError as exc:
        raise UsageError(f"cannot read log {path}: {exc.strerror or exc}",
                         hint="give the server log, e.g. the launcher's server.log") from exc


def render_findings(label: str, findings: list[Finding], console: Console | None = None) -> None:
    """Root cause first: id and where, then what it means, the fix, and the log line."""
    console = console or stdout_console()
    if not findings:
        console.print(f"[green]{label}: no known failure signature[/]")
        return
    console.print(f"[bold]{label}[/]: {len(findings)} finding(s), most specific first")
    for finding in findings:
        head = Text()
        head.append(finding.id, style="bold red")
        head.append(f"  line {finding.line}{_ranks(finding)}", style="dim")
        console.print(head)
        _indented(console, finding.message)
        _indented(console, f"fix: {finding.fix}", style="green")
        _indented(console, f"log: {finding.text}", style="dim")


def _ranks(finding: Finding) -> str:
    if not finding.ranks:
        return f", seen {finding.count}x" if finding.count > 1 else ""
    return f", ranks {', '.join(finding.ranks)} ({finding.count} lines)"


def _indented(console: Console, text: str, style: str = "") -> None:
    console.print(Padding(Text(text, style=style), (0, 0, 0, 4), expand=False))
