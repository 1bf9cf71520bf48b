"""Name a failure no wording matched by the public report it most resembles.

When the fallback finds where a log failed but neither a signature nor the failure line's own
words (``unclassified: words``) name the family, the failure line and the line before it are
compared with labelled excerpts of public issue threads (``known_failures.yaml``, built by
tools/triage-corpus/build.py from the labelled rounds under tests/fixtures/triage/). The
comparison is TF-IDF cosine over words and word pairs; the nearest excerpt names the family when
it is at least ``NAMING_SIMILARITY`` alike, and the finding cites that excerpt's thread.

The threshold and the window were chosen by leaving one round out at a time on rounds 1-5
(``python benchmarks/triage_resemblance.py``): of the 57 held-out failures neither a wording nor
the line's words named, at 0.5 it named 7 right and 1 wrong (0.6: 4 and 1; 0.4: 7 and 2). The
similarity is the lesser of the window's and the failure line's alone: a bare ``CUDA error``
line must not be named by an excerpt whose line *before* it is that line. Where both failure
lines are a frame and a reason (``Failed to initialize NVML: Unknown Error``), the reasons must be
alike too: one frame with another reason is another failure (leaving one round out on rounds 1-7,
this turned 9 right and 4 wrong into 8 right and 3 wrong).
An excerpt labelled ``unclassified_failure`` that is nearest keeps the failure unclassified.
A bare exception type (``AssertionError``) is named by no report, and a reason is compared without
the source place it was raised at (``(samplingConfig.h:46)``): neither says what went wrong, and
both made reports of one codebase look alike (leaving one round out on rounds 1-15: 23 right and
7 wrong became 23 right and 5 wrong). subprocess's own words for a failed command ("returned
non-zero exit status 255") are left out too: only the command says what failed (a DeepSpeed ssh
check was named a FlashInfer build by them, round 25; leaving one round out on rounds 1-24 gives
35 right and 5 wrong with or without them).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from envmgr.datafiles import parse_yaml

CORPUS = Path(__file__).with_name("known_failures.yaml")
NAMING_SIMILARITY = 0.5
LINES_BEFORE = 1  # the failure line and this many before it are compared
UNCLASSIFIED = "unclassified_failure"
_BARE_EXCEPTION = re.compile(r"[\w.]*(?:Error|Exception)")
_SOURCE_PLACE = re.compile(r"\s*\(?[\w./-]+\.\w+:\d+\)?")  # (samplingConfig.h:46): where it was raised
_WORD = re.compile(r"[a-z][a-z0-9_]+|\d{1,3}(?!\d)")
# subprocess's words for any command that failed (CPython's CalledProcessError.__str__: "Command
# '...' returned non-zero exit status N." / "died with <Signals.SIGKILL: 9>."): only the command
# says what failed, so two of them are alike only by their commands
_COMMAND_FAILED = re.compile(r"returned non-zero exit status -?\d+\.?|died with <Signals\.\w+: \d+>\.?")


def tokens(text: str) -> list[str]:
    """Words (and short numbers: an errno, a port's digits are not) and adjacent word pairs."""
    words = _WORD.findall(_COMMAND_FAILED.sub("", text.lower()))
    return words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]


@dataclass(frozen=True)
class Resemblance:
    family: str
    source: str
    similarity: float


class Corpus:
    """Labelled excerpts as unit TF-IDF vectors: of the failure line with the lines before it,
    and of the failure line alone (a line before that matches is context, not the failure)."""

    def __init__(self, examples: list[tuple[str, str, list[str]]]) -> None:  # (family, source, lines)
        counted = [(family, source, Counter(tokens("\n".join(lines))), Counter(tokens(lines[-1] if lines else "")),
                    Counter(tokens(reason(lines[-1] if lines else ""))))
                   for family, source, lines in examples]
        frequency: Counter[str] = Counter()
        for _, _, counts, _, _ in counted:
            frequency.update(counts.keys())
        n = len(counted)
        self._idf = {t: math.log((n + 1) / (d + 1)) + 1 for t, d in frequency.items()}
        self._vectors = [(family, source, self._vector(window), self._vector(line), self._vector(why))
                         for family, source, window, line, why in counted]

    def _vector(self, counts: Counter[str]) -> dict[str, float]:
        weights = {t: (1 + math.log(k)) * self._idf[t] for t, k in counts.items() if t in self._idf}
        norm = math.sqrt(sum(w * w for w in weights.values())) or 1.0
        return {t: w / norm for t, w in weights.items()}

    def nearest(self, lines: list[str]) -> Resemblance | None:
        """The most alike excerpt, by the least of the similarities: of the windows, of the
        failure lines, and of their reasons where both give one."""
        window = self._vector(Counter(tokens("\n".join(lines))))
        line = self._vector(Counter(tokens(lines[-1] if lines else "")))
        given = reason(lines[-1] if lines else "")
        why = self._vector(Counter(tokens(given)))  # empty when its words are none the corpus knows
        best: Resemblance | None = None
        for family, source, their_window, their_line, their_why in self._vectors:
            similarity = min(_cosine(window, their_window), _cosine(line, their_line))
            if given and their_why:
                similarity = min(similarity, _cosine(why, their_why))
            if similarity > 0 and (best is None or similarity > best.similarity):
                best = Resemblance(family, source, round(similarity, 3))
        return best


def reason(line: str) -> str:
    """What a ``frame: reason`` line says went wrong: the text after its last ``": "``
    ("Failed to initialize NVML: Unknown Error" -> "Unknown Error"); "" for a line of no such form
    or a reason of no words (an errno and a sentence in another script).
    Two lines of one frame ("Failed to initialize NVML: ...") with other reasons are other failures."""
    head, colon, tail = _SOURCE_PLACE.sub("", line).rpartition(": ")
    return tail if colon and head and re.search(r"[a-z]{2,}", tail.lower()) else ""  # words, not a bare code


def _cosine(a: dict[str, float], b: dict[str, float]) -> float:
    if len(b) < len(a):
        a, b = b, a
    return sum(w * b.get(t, 0.0) for t, w in a.items())


def load_corpus(path: Path = CORPUS) -> Corpus:
    data = parse_yaml(path.read_text(encoding="utf-8")) or {}  # libyaml where built in: 5x faster
    return Corpus([(e["family"], e["source"], e["lines"]) for e in data.get("excerpts", [])])


@cache
def _shipped() -> Corpus:
    return load_corpus()  # read on the first unexplained failure only: a clean log never pays


def family_resembled(lines: list[str], corpus: Corpus | None = None) -> Resemblance | None:
    """The family of the nearest labelled excerpt, when it is alike enough to name it."""
    if lines and _BARE_EXCEPTION.fullmatch(lines[-1].strip()):
        return None  # "AssertionError" alone says nothing of the cause another report could share
    nearest = (corpus or _shipped()).nearest(lines)
    if nearest is None or nearest.family == UNCLASSIFIED or nearest.similarity < NAMING_SIMILARITY:
        return None
    return nearest
