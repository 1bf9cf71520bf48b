"""Human output of triage findings, the findings of a log file and their exit code, for
``envmgr triage LOG`` (``cli.cmd_triage``: read, then render or emit JSON, like every command).

Exit codes of ``envmgr triage``: 0 the log shows no known failure, 1 it shows at least one
(like ``envmgr validate`` with an error finding), and 1 with a message for an unreadable log
(an ``EnvmgrError`` the CLI prints). ``--json`` prints a list of finding objects, most specific
first, each with at least id, line (1-based), message, fix and values.
"""

from __future__ import annotations

from pathlib import Path

from envmgr.bench.triage import triage_file
from envmgr.errors import UsageError
from envmgr.findings import Finding
from envmgr.report.printer import Printer, stdout_printer


def read_findings(path: Path) -> list[Finding]:
    """The findings of the log at PATH; an unreadable log is a UsageError."""
    try:
        return triage_file(path)
    except OSError as exc:
        raise UsageError(f"cannot read log {path}: {exc.strerror or exc}",
                         hint="give the server log, e.g. the launcher's server.log") from exc


def exit_code(findings: list[Finding]) -> int:
    """0 when none, 1 when a failure, 2 when only warnings (a feature the server turned off)."""
    if any(f.fatal for f in findings):
        return 1
    return 2 if findings else 0


def render_findings(label: str, findings: list[Finding], out: Printer | None = None) -> None:
    """Root cause first: id and where, then what it means, the fix, and the log line."""
    out = out or stdout_printer()
    if not findings:
        out.line((f"{label}: no known failure signature", "green"))
        return
    out.line((label, "bold"), f": {len(findings)} finding(s), most specific first")
    for finding in findings:
        what = (finding.id, "bold red") if finding.fatal else (
            f"warning: {finding.id}" + (f" (feature off: {finding.feature})" if finding.feature else ""), "bold yellow")
        out.line(what, (f"  line {finding.line}{_ranks(finding)}", "dim"))
        out.indented(finding.message, 4)
        out.indented(f"fix: {finding.fix}", 4, "green")
        out.indented(f"log: {finding.text}", 4, "dim")


def _ranks(finding: Finding) -> str:
    if not finding.ranks:
        return f", seen {finding.count}x" if finding.count > 1 else ""
    return f", ranks {', '.join(finding.ranks)} ({finding.count} lines)"
