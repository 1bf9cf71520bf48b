"""How bad a finding is: one vocabulary and one order for the compat rules, the flag checks,
log triage and the benchmark matrix (errors first)."""

from __future__ import annotations

from typing import Literal, Protocol

Severity = Literal["error", "warning", "info"]
ORDER: dict[str, int] = {"error": 0, "warning": 1, "info": 2}


class HasSeverity(Protocol):
    @property
    def severity(self) -> str: ...  # read-only: frozen dataclasses and models have it so


def rank(finding: HasSeverity) -> int:
    """The sort key that puts errors first, then warnings, then infos."""
    return ORDER[finding.severity]
