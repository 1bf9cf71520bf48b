"""Which log lines can match any triage pattern: a literal prefilter.

Running 40-odd regexes on every line of a 100 MB server log costs about a minute; almost
every line of a running server (batch statistics, HTTP access lines) matches none of them.
Every pattern has a literal that each of its matches must contain ("Not enough memory.",
"KeyError: "): ``required_literals`` reads it from the pattern's syntax tree, and
``Prefilter`` finds all of them at once, in C (Aho-Corasick, ``ahocorasick_rs``; a loop of
``bytes.find`` where that is not installed), over big blocks of the log. Only the lines it
finds are cleaned and matched.

Exactness: the needles and the text are compared lower-cased (ASCII), so a pattern written
with ``(?i)`` is found in any ASCII case. Cleaning a line (``triage.clean_line``) only removes
a prefix, ANSI colour codes and carriage returns, so a literal in the cleaned text is in the
raw line unless one of those was inside it: lines with ``ESC`` or ``CR`` are always candidates.
(Not covered: non-ASCII characters that Python's ``(?i)`` folds to ASCII, like the Kelvin
sign for "k".)
"""

from __future__ import annotations

import re
import re._constants as sre  # the syntax tree of a compiled pattern; stable across 3.11-3.13
import re._parser as sre_parse
from bisect import bisect_right
from collections.abc import Iterable

NEWLINE = re.compile(b"\n")
MIN_LITERAL = 3  # shorter literals occur on most lines: they would filter nothing
ALWAYS = ("\x1b", "\r")  # cleaning removes these, so a literal may straddle them

try:  # Aho-Corasick in Rust: all needles in one pass, ~0.7 GB/s here
    from ahocorasick_rs import BytesAhoCorasick
except ImportError:  # pragma: no cover - ahocorasick_rs is a dependency; a bare install still works
    BytesAhoCorasick = None  # type: ignore[assignment,misc]


def required_literals(pattern: re.Pattern[str]) -> frozenset[str] | None:
    """Lower-cased literals one of which every match of ``pattern`` contains; None when the
    pattern has no such literal of ``MIN_LITERAL`` characters (it could match anything)."""
    return _best(_sequence(sre_parse.parse(pattern.pattern, pattern.flags)))


def _sequence(items: Iterable) -> list[frozenset[str]]:
    """The literal sets a sequence of regex items requires (each set: one of them occurs)."""
    options: list[frozenset[str]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            options.append(frozenset(["".join(run)]))
            run.clear()

    for op, arg in items:
        if op is sre.LITERAL and arg < 128:
            run.append(chr(arg).lower())
            continue
        flush()
        if op is sre.SUBPATTERN:
            inner = _best(_sequence(arg[-1]))
        elif op is sre.ATOMIC_GROUP:
            inner = _best(_sequence(arg))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            inner = _best(_sequence(arg[2])) if arg[0] >= 1 else None
        elif op is sre.BRANCH:
            branches = [_best(_sequence(b)) for b in arg[1]]
            inner = frozenset().union(*(b for b in branches if b)) if branches and all(branches) else None
        else:  # classes, ANY, anchors, lookarounds, back-references: no literal to rely on
            inner = None
        if inner:
            options.append(inner)
    flush()
    return options


# Words on most lines of a busy server log (SGLang's "Prefill batch", "Decode batch", request
# logs): a set made of one of them is a poor needle, whatever its length. Any required set is
# exact; this only chooses among them.
COMMON = frozenset({"prefill", "decode", "request", "requests", "address", "number", "weight", "weights",
                    "content", "model", "memory", "token", "tokens", "length", "context", "batch", "cache",
                    "server", "loading", "running", "http", "info", "warning", "available", "is not"})


def _best(options: list[frozenset[str]]) -> frozenset[str] | None:
    """The set whose shortest literal is longest (the rarest needles), if long enough; a
    literal that is one of the COMMON words counts as short."""
    def length(literal: str) -> int:
        return 0 if literal.strip() in COMMON else len(literal)

    scored = [(min(map(length, o)), -len(o), o) for o in options if o]
    if not scored:
        return None
    best, _, chosen = max(scored, key=lambda s: (s[0], s[1]))
    if best >= MIN_LITERAL:
        return chosen
    # every set has a common word: take the longest anyway (still exact, only less selective)
    fallback = [(min(map(len, o)), -len(o), o) for o in options if o]
    size, _, chosen = max(fallback, key=lambda s: (s[0], s[1]))
    return chosen if size >= MIN_LITERAL else None


def minimal(needles: Iterable[str]) -> list[str]:
    """Needles without those containing another: where "out of memory" occurs, so does every
    line "CUDA out of memory" could flag."""
    ordered = sorted(set(needles), key=len)
    kept: list[str] = []
    for needle in ordered:
        if not any(k in needle for k in kept):
            kept.append(needle)
    return kept


class Prefilter:
    """Finds the lines that contain at least one needle, in blocks of bytes or one by one."""

    def __init__(self, patterns: Iterable[re.Pattern[str]]) -> None:
        needles: set[str] = set(ALWAYS)
        for pattern in patterns:
            literals = required_literals(pattern)
            if literals is None:
                raise ValueError(f"pattern {pattern.pattern!r} has no literal of {MIN_LITERAL}+ characters "
                                 "that every match contains: it would have to run on every log line")
            needles |= literals
        self.needles = minimal(needles)
        self._encoded = [n.encode() for n in self.needles]
        self._automaton = BytesAhoCorasick(self._encoded) if BytesAhoCorasick is not None else None

    def spans(self, lowered: bytes) -> list[tuple[int, int]]:
        """(start, end) of needles in already lower-cased bytes (unordered, may repeat a line)."""
        if self._automaton is not None:
            return [(start, end) for _, start, end in self._automaton.find_matches_as_indexes(lowered)]
        found = []
        for needle in self._encoded:
            at = lowered.find(needle)
            while at != -1:
                found.append((at, at + len(needle)))
                at = lowered.find(needle, at + 1)
        return found

    def line_starts(self, block: bytes) -> list[int]:
        """Sorted offsets of the starts of the lines of ``block`` that contain a needle, or a
        needle that goes on into the next line (a wrapped wording: at a space, where the
        newline reads as one, or in the middle of a word, where it reads as nothing). A match
        marks every line it touches."""
        lowered = block.lower()
        starts: set[int] = set()
        for start, end in self.spans(lowered.replace(b"\n", b" ")):
            crossed = block.count(b"\n", start, end)
            if crossed > 1:
                continue  # over three lines or more: triage joins only a line and the one before
            starts.add(block.rfind(b"\n", 0, start) + 1)
            if crossed:
                starts.add(block.rfind(b"\n", 0, end) + 1)
        newlines = [m.start() for m in NEWLINE.finditer(block)]
        # where each line after a newline begins in the block without its newlines
        joined_at = [at - k for k, at in enumerate(newlines)]
        for start, end in self.spans(lowered.replace(b"\n", b"")):
            first, last = bisect_right(joined_at, start), bisect_right(joined_at, end - 1)
            if last == first + 1:  # within one line the first pass found it; over three, triage cannot
                starts.update(newlines[i - 1] + 1 if i else 0 for i in (first, last))
        return sorted(starts)

    def may_match(self, line: str) -> bool:
        """Whether one line can match (the same answer ``line_starts`` gives for it)."""
        lowered = line.encode("utf-8", "replace").lower()
        if self._automaton is not None:
            return bool(self._automaton.find_matches_as_indexes(lowered))
        return any(needle in lowered for needle in self._encoded)


class LiteralIndex:
    """Which of a list of patterns may match a text: those one of whose required literals it
    contains (as exact as the prefilter, whose rules it shares). A candidate line is matched
    only against these; a traceback's frame line contains a needle of a few patterns, not of
    the other few hundred."""

    def __init__(self, patterns: Iterable[re.Pattern[str]]) -> None:
        by_literal: dict[str, set[int]] = {}
        anywhere = set()  # patterns without a literal: always candidates
        for number, pattern in enumerate(patterns):
            literals = required_literals(pattern)
            if literals is None:
                anywhere.add(number)
                continue
            for literal in literals:
                by_literal.setdefault(literal, set()).add(number)
        self._anywhere = frozenset(anywhere)
        self._literals = list(by_literal)
        self._patterns = [frozenset(by_literal[literal]) for literal in self._literals]
        self._encoded = [literal.encode() for literal in self._literals]
        self._automaton = BytesAhoCorasick(self._encoded) if BytesAhoCorasick is not None and self._encoded else None

    def possible(self, text: str) -> frozenset[int]:
        """The numbers (in the order given) of the patterns that may match ``text``."""
        lowered = text.encode("utf-8", "replace").lower()
        if self._automaton is not None:
            found = {number for number, _, _ in self._automaton.find_matches_as_indexes(lowered, overlapping=True)}
        else:
            found = {number for number, literal in enumerate(self._encoded) if literal in lowered}
        return self._anywhere.union(*(self._patterns[number] for number in found))
