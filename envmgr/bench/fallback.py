"""Where a log failed when no signature explains it: the fallback behind ``unclassified_failure``.

Triage must never say "no known failure" of a log that ends in a traceback. What counts as a
failure line is data (``signatures.yaml``, ``unclassified:``); this module only keeps, per
kind, the first such line since the server was last ready:

- ``exception``: a Python exception line (``RuntimeError: ...``, ``torch.OutOfMemoryError``),
  or whatever line of that form ends a traceback's frames, however its class is called
  (``StopIteration``, ``queue.Empty``); Python prints a chained traceback's original exception
  first, so the first one is the innermost cause, while Java and .NET print each cause after the
  exception it caused (``inner_exception``: "Caused by: ", " ---> "), so there the last one is;
- ``error``: a line at level ERROR/CRITICAL/FATAL (from its logging prefix) or one a program
  prints as fatal (``error: ...``, ``Segmentation fault``, a Rust panic); where such a line is
  only a header whose message is the next line (``message_follows``: a Rust panic's location,
  CMake's ``CMake Error at ... (message):``), the next line is the failure line;
- ``statement``: a program's own sentence that something failed, with no exception, level or
  exit code to say so (``ggml_cuda_init: failed to initialize CUDA: ...``, a kernel's ``GPU has
  fallen off the bus``); a line at a quiet level (INFO, WARNING) or one that says the problem
  was handled (falls back, retries, skips) is none;
- ``exit``: a process that exited with a non-zero code.

The finding is the first exception, else the first error line, else the first statement,
else the first exit; but where the exception only says a build command failed (``build_failed``:
ninja's CalledProcessError), the build's own error line before it is the failure. A ready
line clears what came before it (a caught traceback during start-up is not the failure), and
after it an error line is one request's (a 404), not the server's: only an exception or an
exit counts then. Once a shutdown was asked for (``SIGTERM received``), what follows is the
shutdown, not a failure; an exception Python says it ignored ("Exception ignored in") is none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from envmgr.bench import library_errors
from envmgr.bench.library_errors import LibraryError

Kind = Literal["exception", "error", "statement", "exit"]
KINDS: tuple[Kind, ...] = ("exception", "error", "statement", "exit")  # in order of preference
# The names of what a line is about, in a structured log's fields (klog's and logfmt's
# pod="default/nccl-test-worker-0"): users choose them, so their words name no family.
_NAMED_THINGS = re.compile(r'(?i)\b(?:pod|node|namespace|container|claim|job|deployment|service|replica)="[^"]*"')


def _compile_all(raw: Any) -> list[re.Pattern[str]]:
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise ValueError(f"expected a list of regexes, got {raw!r}")
    out = []
    for pattern in raw:
        try:
            out.append(re.compile(pattern))  # case matters here: an exception's class name
        except re.error as exc:
            raise ValueError(f"invalid regex {pattern!r}: {exc}") from exc
    return out


class TracebackRules(BaseModel):
    """How a Python traceback ends: the exception's own line comes at most ``within`` lines
    after its last frame line (the frame's source line and carets between them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    frame: re.Pattern[str]
    within: int = Field(ge=1)
    exception: re.Pattern[str]

    @field_validator("frame", "exception", mode="before")
    @classmethod
    def _compile(cls, raw: Any) -> re.Pattern[str]:
        return _compile_all([raw])[0]


class PropagatedRules(BaseModel):
    """A warning that is the failure when, within ``within`` lines, a trace says its error was
    returned up to the caller (NCCL warns of what it goes on from too, but traces only what it
    returns: "transport/net_ib.cc:937 -> 2")."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    warning: re.Pattern[str]
    trace: re.Pattern[str]
    within: int = Field(ge=1)
    # the family such a failure is, where no wording matched it: the library's own (NCCL's warning is NCCL failing)
    family: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_]*$")

    @field_validator("warning", "trace", mode="before")
    @classmethod
    def _compile(cls, raw: Any) -> re.Pattern[str]:
        return _compile_all([raw])[0]


class FallbackRules(BaseModel):
    """The ``unclassified:`` section of signatures.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    levels: list[str] = Field(min_length=1)  # logging levels that make a line an error line
    exception: list[re.Pattern[str]] = Field(min_length=1)
    error: list[re.Pattern[str]] = Field(min_length=1)
    # a program's own sentence that something failed, and what makes such a sentence benign
    statement: list[re.Pattern[str]] = []
    handled: list[re.Pattern[str]] = []
    quiet_levels: list[str] = []  # a line at one of these levels states no failure
    message_follows: list[re.Pattern[str]] = []  # an error line whose message is the next line
    exit: list[re.Pattern[str]] = Field(min_length=1)  # with a group `code`: 0 is no failure
    ready: list[re.Pattern[str]] = Field(min_length=1)
    # an error line that is the server's, not one request's, even once it serves (before it too): it says so
    fatal: list[re.Pattern[str]] = []
    stop: list[re.Pattern[str]] = Field(min_length=1)
    # a line that says the exception after it was caught and is harmless ("Exception ignored in")
    ignored_exception: list[re.Pattern[str]] = []
    # an exception that wraps another one raised elsewhere, with a group `inner` naming its type
    # (Ray's "RayTaskError(ModuleNotFoundError): ray::Actor.fit() ..."): the wrapped exception's
    # own line, printed after it, says what failed
    exception_wrapper: list[re.Pattern[str]] = []
    # an exception line that gives the cause of the exception printed before it (Java's "Caused by: ",
    # .NET's " ---> "): these runtimes print the innermost cause last, so the last such line is the root cause
    inner_exception: list[re.Pattern[str]] = []
    # an exception that says only that a build command failed (subprocess's CalledProcessError for
    # ninja, torch's "Error building extension"): the build's own error line, printed before it, is the failure
    build_failed: list[re.Pattern[str]] = []
    traceback: TracebackRules | None = None  # the line that ends a traceback's frames is its exception
    propagated: PropagatedRules | None = None  # a warning whose error the lines after it pass up
    message: str
    fix: dict[Kind, str]
    # A failure line no wording matched may still name its family in its own words: family ->
    # groups of words, every group must occur in the line (one of its words, in any case). The
    # first family that fits is reported, its message inside ``named_by_words``.
    words: dict[str, list[list[str]]] = {}
    named_by_words: str = '{message} (named by the words of the failure line; no known wording matched)'
    named_by_propagated: str = ('{message} (named by the library that warned of it and passed its error up; '
                                'no known wording matched)')
    # no words either: the labelled public excerpt it most resembles (resemblance.py) names it
    named_by_resemblance: str = ('{message} (named by its resemblance ({similarity}) to a labelled public '
                                 'report, {source}; no known wording matched)')
    # CUDA's and NVML's own errors, whoever prints them (library_errors.py): a line reporting one
    # is a failure line; library -> code -> the family the error names. An error of no family
    # here stays unclassified, explained by the library's documentation of it. None: not read.
    library_errors: dict[str, dict[int, str]] | None = None
    named_by_library_error: str = '{message} (named by the {library} error it reports, {error}; no known wording matched)'
    library_error_fix: str = ("{library} itself reported {name}; look the error up in {library}'s list ({reference}) "
                              "and read the lines before it for the call that got it")

    @field_validator("exception", "error", "statement", "handled", "message_follows", "exit", "ready", "fatal", "stop",
                     "ignored_exception", "exception_wrapper", "inner_exception", "build_failed", mode="before")
    @classmethod
    def _compile(cls, raw: Any) -> list[re.Pattern[str]]:
        return _compile_all(raw)

    @field_validator("exit")
    @classmethod
    def _has_code(cls, patterns: list[re.Pattern[str]]) -> list[re.Pattern[str]]:
        for pattern in patterns:
            if "code" not in pattern.groupindex:
                raise ValueError(f"an exit pattern needs a group `code`: {pattern.pattern!r}")
        return patterns

    @field_validator("fix")
    @classmethod
    def _every_kind(cls, fix: dict[Kind, str]) -> dict[Kind, str]:
        missing = [k for k in KINDS if k not in fix]
        if missing:
            raise ValueError(f"fix: give a hint for every kind; missing {missing}")
        return fix

    @field_validator("words")
    @classmethod
    def _groups_of_words(cls, words: dict[str, list[list[str]]]) -> dict[str, list[list[str]]]:
        for family, groups in words.items():
            if not groups or not all(group and all(w.strip() for w in group) for group in groups):
                raise ValueError(f"words.{family}: give groups of non-empty words")
        return {family: [[w.lower() for w in group] for group in groups] for family, groups in words.items()}

    def family_of(self, text: str) -> str | None:
        """The family a failure line names by its own words, if one does."""
        lowered = _NAMED_THINGS.sub("", text).lower()
        for family, groups in self.words.items():
            if all(any(word in lowered for word in group) for group in groups):
                return family
        return None

    @field_validator("library_errors")
    @classmethod
    def _known_libraries(cls, named: dict[str, dict[int, str]] | None) -> dict[str, dict[int, str]] | None:
        unknown = sorted(set(named or {}) - set(library_errors.REFERENCES))
        if unknown:
            raise ValueError(f"library_errors: unknown libraries {unknown}; known: {sorted(library_errors.REFERENCES)}")
        return named

    def library_error_of(self, text: str) -> LibraryError | None:
        """The CUDA or NVML error a line reports, when those are read."""
        return library_errors.find(text) if self.library_errors is not None else None

    def family_of_library_error(self, error: LibraryError) -> str | None:
        return (self.library_errors or {}).get(error.library, {}).get(error.code)

    def patterns(self) -> list[re.Pattern[str]]:
        """Every pattern a line is matched against (for the literal prefilter)."""
        levels = re.compile("|".join(re.escape(level) for level in self.levels))
        errors = library_errors.patterns() if self.library_errors is not None else []
        frames = [self.traceback.frame] if self.traceback else []
        propagated = [self.propagated.warning, self.propagated.trace] if self.propagated else []
        return [levels, *self.exception, *self.error, *self.statement, *self.exit, *self.ready, *self.fatal,
                *self.stop, *self.ignored_exception, *self.inner_exception, *errors, *frames, *propagated]

    def _handled(self, text: str) -> bool:
        """Whether the line says the program handled what it reports (fell back, skipped, retried)."""
        return any(p.search(text) for p in self.handled)

    def kind_of(self, text: str, level: str | None, serving: bool = False) -> Kind | None:
        """The kind of failure this line states, if any. ``serving``: the server was ready, so
        an error line is one request's (a 404 for an unknown model), not the server's."""
        if any(p.search(text) for p in self.exception):
            return "exception"
        if any(p.search(text) for p in self.fatal):  # the server's failure, before it serves and after
            return "error"
        if serving:
            return self._exit_kind(text)
        upper = (level or "").upper()
        quiet = upper in self.quiet_levels
        # an error wording quoted at a quiet level by a line that says it was handled is none (FlashInfer's
        # autotuner: "WARNING - ... Skipping tactic ... due to failure while profiling: ... Assertion failed")
        if upper in self.levels or (any(p.search(text) for p in self.error) and not (quiet and self._handled(text))):
            return "error"
        # CUDA's or NVML's error, at no quiet level and not handled (a library probe that logs its miss at
        # INFO and goes on; NCCL's "NCCL INFO ... Cuda failure" of a call it ignores)
        if not quiet and self.library_error_of(text) and not self._handled(text):
            return "error"
        if not quiet and any(p.search(text) for p in self.statement) and not self._handled(text):
            return "statement"
        return self._exit_kind(text)

    def _exit_kind(self, text: str) -> Kind | None:
        """"exit" where the line reports a process that exited with a failing code."""
        for pattern in self.exit:
            match = pattern.search(text)
            if match and _failed(match.group("code")):
                return "exit"
        return None


# Exit codes that are no failure: success, and a stop that was asked for (SIGINT, SIGTERM; as
# Python reports them, negative, and as a shell does, 128 + the signal).
NOT_FAILED = frozenset({0, -2, -15, 130, 143})


def _failed(code: str) -> bool:
    try:
        return int(code) not in NOT_FAILED
    except ValueError:
        return False


@dataclass(frozen=True)
class FailureLine:
    kind: Kind
    line: int
    text: str
    rank: str | None
    before: str = ""  # the log line before it, cleaned (compared by resemblance.py)
    outer: FailureLine | None = None  # the exception this one is the cause of (inner_exception: Java, .NET)
    family: str | None = None  # the family the rule that found it names (a propagated NCCL warning: nccl_error)


class FirstFailure:
    """Fed every line no signature matched; ``found()`` is where the log failed, or None."""

    def __init__(self, rules: FallbackRules) -> None:
        self.rules = rules
        self._first: dict[Kind, FailureLine] = {}
        self._stopping = False
        self._serving = False  # a ready line was seen (and nothing has failed since)
        self._skip_exception = False  # the next exception was caught ("Exception ignored in")
        self._header: int | None = None  # the error line kept last says its message is the next line
        self._frame: int | None = None  # the last traceback frame line seen
        self._frames_from: int | None = None  # the first frame line of the last traceback seen
        self._exception_frames_from: int | None = None  # the first frame line of the kept exception's traceback
        self._warning: FailureLine | None = None  # the last warning whose error may be passed up after it

    def track(self, line: int, text: str) -> None:
        """Any line examined, whether a signature matched it or not: where a traceback's frames are."""
        rules = self.rules.traceback
        if rules and rules.frame.search(text):
            if self._frame is None or line - self._frame > rules.within:
                self._frames_from = line  # a new traceback's frames begin
            self._frame = line

    def _after_frame(self, line: int) -> bool:
        """Whether line ``line`` is within reach of the last traceback frame line (its source
        line, carets, the next frame, or the exception's own line)."""
        rules = self.rules.traceback
        return rules is not None and self._frame is not None and 0 < line - self._frame <= rules.within

    def _ends_frames(self, line: int, text: str) -> bool:
        """Whether this line, just after a traceback's frames, is the exception's own line."""
        return self._after_frame(line) and bool(self.rules.traceback and self.rules.traceback.exception.search(text))

    def see(self, line: int, text: str, level: str | None, rank_of: Callable[[], str | None],
            before_of: Callable[[], str] = lambda: "") -> None:
        """One line no signature matched; ``rank_of`` and ``before_of`` (the line before it) are
        asked only for a line that is kept."""
        if any(p.search(text) for p in self.rules.ready):
            self._first.clear()  # it got past them: they were not fatal
            self._stopping, self._serving, self._warning = False, True, None
            return
        if self._stopping:
            return
        self._see_propagated(line, text, rank_of, before_of)
        header, self._header = self._header, None
        kept = self._first.get("error")
        if header is not None and line == header + 1 and text.strip() and kept is not None and kept.line == header:
            # the header only said where; this line says what failed
            self._first["error"] = FailureLine("error", line, text, rank_of(), before_of())
        if any(p.search(text) for p in self.rules.stop):
            self._stopping = True
            return
        if any(p.search(text) for p in self.rules.ignored_exception):
            self._skip_exception = True
            return
        if any(p.search(text) for p in self.rules.inner_exception):
            # the cause of the exception kept before it (or of one the paste cut off): the deeper one says what failed
            self._first["exception"] = FailureLine("exception", line, text, rank_of(), before_of(),
                                                   self._first.get("exception"))
            self._exception_frames_from = None
            return
        kind = self.rules.kind_of(text, level, self._serving)
        if kind is None and self._ends_frames(line, text):
            kind = "exception"
        if kind == "exception" and self._skip_exception:
            self._skip_exception = False
            return
        kept = self._first.get("exception")
        if kind == "exception" and kept is not None and self._wraps(kept.text, text):
            self._first["exception"] = FailureLine(kind, line, text, rank_of(), before_of())
            return
        if kind is not None and kind not in self._first:
            self._first[kind] = FailureLine(kind, line, text, rank_of(), before_of())
            if kind == "exception":
                self._exception_frames_from = self._frames_from if self._after_frame(line) else None
            if kind == "error" and any(p.search(text) for p in self.rules.message_follows):
                self._header = line

    def _see_propagated(self, line: int, text: str, rank_of: Callable[[], str | None],
                        before_of: Callable[[], str]) -> None:
        """A warning is kept aside; a trace of its error soon after makes it a statement of the
        failure (NCCL's sentence, at its only level above INFO)."""
        rules = self.rules.propagated
        if rules is None or self._serving:
            return
        if rules.warning.search(text):
            self._warning = FailureLine("statement", line, text, rank_of(), before_of(), family=rules.family)
            return
        warning = self._warning
        if warning is not None and 0 < line - warning.line <= rules.within and rules.trace.search(text):
            self._warning = None
            kept = self._first.get("statement")
            if kept is None or kept.line > warning.line:
                self._first["statement"] = warning

    def _wraps(self, wrapper: str, text: str) -> bool:
        """Whether ``text`` is the line of the exception that the kept ``wrapper`` line wraps."""
        for pattern in self.rules.exception_wrapper:
            match = pattern.search(wrapper)
            if match and re.match(rf"(?:[A-Za-z_]\w*\.)*{re.escape(match.group('inner'))}(?::|$)", text):
                return True
        return False

    def wants_line(self, line: int) -> bool:
        """Whether line ``line`` must be seen whatever it says: the message of a header before it,
        or a line just after a traceback frame (the next frame, or the exception's line)."""
        return (self._header is not None and line == self._header + 1) or self._after_frame(line)

    def forget_line(self, line: int) -> None:
        """Line ``line`` was no failure (the first half of a benign line wrapped in two)."""
        self._first = {k: f for k, f in self._first.items() if f.line != line}

    def forget_after(self, line: int) -> None:
        """The program recovered from what it printed after ``line``."""
        self._first = {k: f for k, f in self._first.items() if f.line <= line}
        if self._warning is not None and self._warning.line > line:
            self._warning = None

    def found(self) -> FailureLine | None:
        exception, error = self._first.get("exception"), self._first.get("error")
        if exception is not None and error is not None and any(p.search(exception.text) for p in self.rules.build_failed):
            # an error line before the build's traceback (not its "Traceback (most recent call last):" line,
            # which a logger may print as an error): the compiler's error says what failed, the exception
            # only that the build did
            begins = self._exception_frames_from - 1 if self._exception_frames_from else exception.line
            if error.line < begins:
                return error
        return next((self._first[k] for k in KINDS if k in self._first), None)
