"""Every error envmgr raises on purpose is an ``EnvmgrError``.

The CLI catches ``EnvmgrError`` and prints ``str(error)`` plus its ``hint``
(what to do); anything else is a bug and shows a traceback only with ``--debug``.
Errors of libraries (PyYAML, pydantic, subprocess, docker, ansible-runner) are
translated into this tree where envmgr calls them, chained with ``from exc``.

    EnvmgrError                  base; ``.hint`` says what to do
    ├── UsageError               a command-line argument is wrong (bad URL, unknown id)
    ├── SpecError                a spec cannot be read or is invalid; ``.problems`` lists
    │   │                        each one with file:line, field, expected and fix
    │   └── ExtendsError         ``extends:`` names a missing parent or forms a cycle
    ├── KnowledgeBaseError       the compat rule data is malformed (a bug in envmgr's data)
    ├── FactsError               a fact of a target could not be collected or parsed
    ├── StateError               the state directory is busy or damaged
    ├── LoadParseError           bench_serving's output holds no result envmgr can read
    └── BackendError             a target could not run a command, or a builder a step
        ├── CommandNotFound      the program to run does not exist on the target
        ├── CommandTimeout       a command ran past its time limit (its process group was killed)
        ├── LaunchError          a server could not even be started (port taken, no way to host it)
        └── RolloutFailed        a host failed or was unreachable; ``.report`` has every host's result
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class EnvmgrError(Exception):
    """Base of every deliberate envmgr error."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict:
        """The error as ``--json`` prints it: ``{"error": {"type", "message", "hint", ...}}``."""
        return {"error": {"type": type(self).__name__, "message": self.message, "hint": self.hint}}


class UsageError(EnvmgrError):
    """A command-line argument is wrong."""


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with a spec, located as precisely as the YAML allows."""

    file: str
    line: int | None
    field: str
    message: str
    expected: str | None = None
    fix: str | None = None

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        # a key the user wrote may hold a newline or a control character: one problem, one line
        field = self.field if self.field.isprintable() else repr(self.field)[1:-1]
        text = f"{where}: {field or '(document)'}: {self.message}"
        if self.expected:
            text += f"; expected {self.expected}"
        if self.fix:
            text += f" ({self.fix})"
        return text

    def to_dict(self) -> dict:
        return {
            "file": self.file,
            "line": self.line,
            "field": self.field,
            "message": self.message,
            "expected": self.expected,
            "fix": self.fix,
        }


class SpecError(EnvmgrError):
    """A spec cannot be read, or does not validate."""

    def __init__(self, problems: list[SpecProblem], *, hint: str | None = None) -> None:
        self.problems = problems
        count = len(problems)
        head = "invalid spec" if count == 1 else f"invalid spec ({count} problems)"
        body = "\n".join("  " + p.render() for p in problems)
        super().__init__(
            f"{head}:\n{body}",
            hint=hint or "fix the fields named above; `envmgr schema` prints every field",
        )

    def to_dict(self) -> dict:
        out = super().to_dict()
        out["error"]["problems"] = [p.to_dict() for p in self.problems]
        return out


class ExtendsError(SpecError):
    """``extends:`` names a missing parent or forms a cycle."""


class KnowledgeBaseError(EnvmgrError):
    """The compatibility rule data is malformed."""


class FactsError(EnvmgrError):
    """A fact of a target could not be collected or parsed."""


class BackendError(EnvmgrError):
    """A target could not run a command, or a builder a step (library errors translated at its boundary)."""


class CommandNotFound(BackendError):
    """The program to run does not exist on the target."""


class CommandTimeout(BackendError):
    """A command ran past its time limit and its process group was killed."""


class StateError(EnvmgrError):
    """The state directory is busy or damaged."""


class LoadParseError(EnvmgrError):
    """bench_serving's output holds neither its JSON line nor its summary table."""


class LaunchError(BackendError):
    """The server could not even be started (port taken, target cannot host a server)."""


class RolloutFailed(BackendError):
    """A host failed or was unreachable; ``report`` (the rollout's RunReport) has every host's result."""

    def __init__(self, message: str, report: Any, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.report = report

    def to_dict(self) -> dict:
        out = super().to_dict()
        out["error"]["report"] = self.report.to_dict()  # every host's result
        return out
