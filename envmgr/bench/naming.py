"""How a failure line that no wording matched is named: by the CUDA or NVML error it reports, by the
rule that found it, by its own words, or by the labelled public report it resembles (resemblance.py);
or left unclassified."""

from __future__ import annotations

from dataclasses import dataclass, field

from envmgr.bench.fallback import FailureLine, FallbackRules
from envmgr.bench.library_errors import LibraryError
from envmgr.bench.resemblance import Resemblance, family_resembled
from envmgr.bench.values import Value


@dataclass(frozen=True)
class Naming:
    """How a failure line no wording matched is named: ``family`` None keeps it unclassified."""

    family: str | None = None
    named_by: str = ""
    frame: str = ""  # the message's frame, formatted with ``fills``
    fills: dict[str, str] = field(default_factory=dict)
    resembled: Resemblance | None = None
    library_error: LibraryError | None = None  # the CUDA or NVML error the line reports

    @property
    def values(self) -> dict[str, Value]:
        return {self.library_error.key: self.library_error.name} if self.library_error else {}


def named_without_wording(rules: FallbackRules, failure: FailureLine) -> Naming:
    """The family of a failure line no wording matched: by the CUDA or NVML error it reports (an
    error of no family is known, so never named by a lookalike), else by the family of the rule
    that found it (a library's warning it passed up is that library's failure), else by the line's
    own words, else by the public report it resembles."""
    error = rules.library_error_of(failure.text)
    if error is not None:
        return Naming(rules.family_of_library_error(error), error.key,
                      rules.named_by_library_error, {"library": error.library, "error": error.describe()},
                      library_error=error)
    if failure.family is not None:
        # before the line's words: "NCCL WARN Could not find real path of /sys/..." is NCCL's topology failing, no model path
        return Naming(failure.family, "propagated", rules.named_by_propagated)
    by_words = _named_by_words(rules, failure.text)
    if by_words is not None:
        return by_words
    resembled = family_resembled([failure.before, failure.text])
    if resembled is None:
        return Naming()
    return Naming(resembled.family, "resemblance", rules.named_by_resemblance,
                  {"source": resembled.source, "similarity": f"{resembled.similarity:.2f}"}, resembled)


def named_in_chain(rules: FallbackRules, failure: FailureLine) -> tuple[FailureLine, Naming]:
    """The innermost exception's naming; where that names no family, an exception it caused may name
    one in its own words (.NET's "IOException: Failed to bind to address" above the SocketException
    whose message is in the system's language): that exception is then the finding's line."""
    naming = named_without_wording(rules, failure)
    outer = failure.outer
    while naming.family is None and outer is not None:
        by_words = _named_by_words(rules, outer.text)
        if by_words is not None:
            return outer, by_words
        outer = outer.outer
    return failure, naming


def _named_by_words(rules: FallbackRules, text: str) -> Naming | None:
    family = rules.family_of(text)
    return Naming(family, "words", rules.named_by_words) if family is not None else None
