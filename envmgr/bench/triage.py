"""Triage of SGLang server logs: which known failure this is, and what to change.

The signatures are data (``signatures.yaml``); this module only matches them. The same code
serves ``envmgr triage LOG`` (``triage_text``/``triage_lines``) and the benchmark launcher,
which feeds a live log line by line into a ``Triage`` (``feed`` returns the new findings as
they become certain, ``close`` releases the rest when the server is gone).

Rules the matching follows:
- each line is cleaned first: ANSI colours, ``[2026-01-01 12:00:00 TP3]``/``[DP0 TP1 EP1]``
  prefixes, docker-compose and logging prefixes are removed, the rank is kept;
- a root cause is reported once per log however many ranks print it (``ranks`` and ``count``
  say who and how often);
- a signature listed in another's ``supersedes`` is dropped when the other is found too
  (a graph-capture failure caused by FlashInfer's arch gate is ``flashinfer_arch_unsupported``);
  live, such a generic finding waits ``hold_lines`` lines for its more specific cause;
- a failure followed within ``recovered.within`` lines by the program saying it retries
  another way or falls back is no finding; live, a fatal finding waits those lines for it;
- ``findings()`` is the authority: with every line fed and ``close()`` called it equals the
  batch result, values recomputed from the whole log.
"""

from __future__ import annotations

import io
import re
import signal
import string
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache, partial
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from envmgr import severity
from envmgr.bench import prefilter as prefilter_module
from envmgr.bench.fallback import FallbackRules, FirstFailure
from envmgr.bench.library_errors import REFERENCES
from envmgr.bench.memory import kv_pool_sizing
from envmgr.bench.naming import named_in_chain
from envmgr.bench.prefilter import LiteralIndex, Prefilter
from envmgr.bench.values import Value, display, to_value
from envmgr.datafiles import load_shipped, parse_yaml
from envmgr.errors import KnowledgeBaseError
from envmgr.findings import Finding

# ---------------------------------------------------------------------------------------------
# The data file


class NearbyRule(BaseModel):
    """A line that must be near the match: one of the ``before`` lines before it, or of the
    ``after`` lines after it (a chained exception prints the error first, its frames later)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    regex: re.Pattern[str]
    before: int = Field(0, ge=0)
    after: int = Field(0, ge=0)

    @field_validator("regex", mode="before")
    @classmethod
    def _compile(cls, raw: Any) -> re.Pattern[str]:
        return _compile_regex(raw, fold=False)  # a path, a frame: case matters

    @model_validator(mode="after")
    def _somewhere(self) -> "NearbyRule":
        if self.before == 0 and self.after == 0:
            raise ValueError("near: give `before` or `after` (how many lines to look at)")
        return self


class Wording(BaseModel):
    """One way a root cause is printed, and where that wording was seen: a ``regex``, or
    ``anchors``: phrases that must all occur in the line, in that order, with anything between
    (the exception type and the distinctive phrase), so the variants of one wording match
    without a regex each. Spaces in an anchor match any run of whitespace."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    regex: re.Pattern[str]
    source: tuple[str, ...] = ()  # one place it was seen, or several: one wording, one regex

    @field_validator("source", mode="before")
    @classmethod
    def _one_or_more(cls, raw: Any) -> Any:
        return (raw,) if isinstance(raw, str) and raw else () if raw == "" else raw

    @model_validator(mode="before")
    @classmethod
    def _anchors_to_regex(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and "anchors" in raw:
            if "regex" in raw:
                raise ValueError("give a wording `regex` or `anchors`, not both")
            raw = dict(raw)
            raw["regex"] = anchors_regex(raw.pop("anchors"))
        return raw

    @field_validator("regex", mode="before")
    @classmethod
    def _compile(cls, raw: Any) -> re.Pattern[str]:
        return _compile_regex(raw)


def anchors_regex(anchors: Any) -> str:
    """``["CalledProcessError", "ninja"]`` -> ``CalledProcessError.*?ninja``, each phrase literal."""
    if not isinstance(anchors, list) or not anchors or not all(isinstance(a, str) and a.strip() for a in anchors):
        raise ValueError(f"anchors must be a list of non-empty phrases, got {anchors!r}")
    phrases = [r"\s+".join(re.escape(word) for word in a.split()) for a in anchors]
    return ".*?".join(phrases)


class FeatureOff(BaseModel):
    """A warning that the server turned a feature off and runs on without it. The config asked
    for it when one of ``asked_by`` is on its command line, or (a default-on feature) when none
    of ``on_unless`` is."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    feature: str
    asked_by: list[str] = []
    on_unless: list[str] = []

    @model_validator(mode="after")
    def _asked_somehow(self) -> "FeatureOff":
        if not self.asked_by and not self.on_unless:
            raise ValueError(f"feature_off {self.feature!r}: give asked_by or on_unless (which flags ask for it)")
        return self

    def asked(self, argv: Iterable[str]) -> bool:
        flags = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
        if self.asked_by:
            return bool(flags & set(self.asked_by))
        return not flags & set(self.on_unless)


class ContextRule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    regex: re.Pattern[str]
    reduce: Literal["min", "max", "first", "last"] = "last"

    @field_validator("regex", mode="before")
    @classmethod
    def _compile(cls, raw: Any) -> re.Pattern[str]:
        return _compile_regex(raw, need_groups=True, fold=False)


class Signature(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str
    priority: int
    severity: Literal["error", "warning"] = "error"  # warning: the server may run on (feature_off)
    feature_off: FeatureOff | None = None
    patterns: list[Wording] = Field(min_length=1)
    near: NearbyRule | None = None
    context: list[ContextRule] = []
    compute: str | None = None
    keep_text: list[str] = []
    supersedes: list[str] = []
    # it says only that a process died: a failure line before it that no signature explains
    # is the cause, and comes first (unclassified_failure), the wrapper after it
    wrapper: bool = False
    message: list[str] = Field(min_length=1)
    fix: list[str] = Field(min_length=1)
    sources: list[str] = Field(min_length=1)

    @field_validator("patterns", mode="before")
    @classmethod
    def _wordings(cls, raw: Any) -> list[Any]:
        if not isinstance(raw, list):
            raise ValueError("patterns must be a list of regexes (or {regex, source})")
        return [{"regex": p} if isinstance(p, (str, re.Pattern)) else p for p in raw]

    @model_validator(mode="after")
    def _feature_off_is_a_warning(self) -> "Signature":
        if self.feature_off is not None and self.severity != "warning":
            raise ValueError(f"{self.id}: a feature_off signature is a warning (the server runs on)")
        return self

    @property
    def regexes(self) -> list[re.Pattern[str]]:
        return [w.regex for w in self.patterns]

    @field_validator("compute")
    @classmethod
    def _known_compute(cls, name: str | None) -> str | None:
        if name is not None and name not in COMPUTE:
            raise ValueError(f"unknown compute {name!r}; known: {sorted(COMPUTE)}")
        return name


class RecoveryRule(BaseModel):
    """A line that says the program recovered from the failures of the ``within`` lines before
    it (it retries another way, falls back): those are not the log's failure."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    within: int = Field(ge=1)
    patterns: list[re.Pattern[str]] = Field(min_length=1)
    # a line that only offers the user a way to fall back ("You can suppress this exception and
    # fall back to eager by setting:"): the program did not
    offers: list[re.Pattern[str]] = []

    @field_validator("patterns", "offers", mode="before")
    @classmethod
    def _compile(cls, raw: Any) -> list[re.Pattern[str]]:
        return [_compile_regex(p) for p in raw or []]

    def says_recovered(self, text: str) -> bool:
        return any(p.search(text) for p in self.patterns) and not any(p.search(text) for p in self.offers)


class SignatureSet(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    hold_lines: int = Field(ge=0)
    recovered: RecoveryRule | None = None
    ignore_lines: list[re.Pattern[str]] = []
    unclassified: FallbackRules | None = None  # None: a log no signature explains is quiet
    signatures: list[Signature] = Field(min_length=1)

    @field_validator("ignore_lines", mode="before")
    @classmethod
    def _compile_ignores(cls, raw: Any) -> list[re.Pattern[str]]:
        return [_compile_regex(p) for p in raw or []]

    def by_id(self) -> dict[str, Signature]:
        return {s.id: s for s in self.signatures}

    def superseded_by(self) -> dict[str, set[str]]:
        """id -> ids of the signatures that explain it better."""
        result: dict[str, set[str]] = {}
        for sig in self.signatures:
            for generic in sig.supersedes:
                result.setdefault(generic, set()).add(sig.id)
        return result

    def matched_patterns(self) -> list[re.Pattern[str]]:
        """Every regex a log line is matched against: signature and context patterns, and the
        ``near`` ones that look after a match (those looking before read the history back)."""
        fallback = self.unclassified.patterns() if self.unclassified else []
        fallback += self.recovered.patterns if self.recovered else []
        fallback += self.ignore_lines  # a benign line wrapped in two: its second half is read too
        return [p for s in self.signatures
                for p in (*s.regexes, *(c.regex for c in s.context),
                          *((s.near.regex,) if s.near and s.near.after else ()))] + fallback

    def check_consistency(self) -> None:
        ids = [s.id for s in self.signatures]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"duplicate signature ids: {duplicates}")
        if self.unclassified and self.unclassified.id in ids:
            raise ValueError(f"unclassified.id {self.unclassified.id!r} is also a signature id")
        unknown = sorted({g for s in self.signatures for g in s.supersedes} - set(ids))
        if unknown:
            raise ValueError(f"supersedes names unknown ids: {unknown}")
        rules = self.unclassified
        propagated = rules.propagated if rules else None
        named = {"words": set(rules.words),
                 "library_errors": {f for codes in (rules.library_errors or {}).values() for f in codes.values()},
                 "propagated.family": {propagated.family} if propagated and propagated.family else set()} \
            if rules else {}
        for field_name, families in named.items():
            wrong = sorted(f for f in families if f not in ids or self.by_id()[f].severity != "error")
            if wrong:
                raise ValueError(f"unclassified.{field_name} names no error signature: {wrong}")
        prefilter_for(self)  # every pattern has a literal to find it by (built once: Triage reuses it)


def _compile_regex(raw: Any, need_groups: bool = False, fold: bool = True) -> re.Pattern[str]:
    """Wordings match in any case (``fold``): "CUDA Error:" and "CUDA error:" are one wording.
    ``near`` and ``context`` rules keep case: they name files, frames and logged fields."""
    if isinstance(raw, re.Pattern):
        return raw
    if not isinstance(raw, str):
        raise ValueError(f"a regex must be a string, got {raw!r}")
    try:
        compiled = re.compile(raw, re.IGNORECASE if fold else 0)
    except re.error as exc:
        raise ValueError(f"invalid regex {raw!r}: {exc}") from exc
    if need_groups and not compiled.groupindex:
        raise ValueError(f"a context regex needs named groups: {raw!r}")
    return compiled


def parse_signatures(text: str, origin: str = "signatures.yaml") -> SignatureSet:
    """Validate signature data; malformed data is a ``KnowledgeBaseError`` (a bug in envmgr)."""
    try:
        loaded = SignatureSet.model_validate(parse_yaml(text))
        loaded.check_consistency()
    except (yaml.YAMLError, ValidationError, ValueError) as exc:
        raise KnowledgeBaseError(f"{origin}: {exc}") from exc
    return loaded


@lru_cache(maxsize=1)
def load_signatures() -> SignatureSet:
    """The signatures shipped with envmgr (read once per process, cached across runs)."""
    return load_shipped("envmgr.bench", "signatures.yaml", parse_signatures)


# id of a set (and whether the automaton is installed) -> (the set, its prefilter, its wordings'
# index). Building them reads ~700 regexes' syntax trees (~50 ms), and every Triage needs them;
# kept here rather than on the model so that a set still pickles and compares as plain data. The
# set is held so its id is not reused while the entry lives.
@dataclass(frozen=True)
class WordingIndex:
    """A set's wordings numbered in its order: which may match a line, each signature's numbers,
    and the position of the signature each number belongs to."""
    literals: LiteralIndex
    numbers: dict[str, range]
    owner: tuple[int, ...]
    ignores: LiteralIndex  # which of the set's ignore_lines may match a line
    contexts: LiteralIndex  # which of context_rules may match a line
    context_rules: tuple[ContextRule, ...]  # every signature's context rules, in the set's order


_COMPILED: dict[tuple[int, bool], tuple[SignatureSet, Prefilter, WordingIndex]] = {}


def _compiled_for(signatures: SignatureSet) -> tuple[SignatureSet, Prefilter, WordingIndex]:
    key = (id(signatures), prefilter_module.BytesAhoCorasick is not None)
    cached = _COMPILED.get(key)
    if cached is None or cached[0] is not signatures:
        if len(_COMPILED) >= 8:  # tests build many small sets; keep memory bounded
            _COMPILED.clear()
        numbers, at = {}, 0
        for signature in signatures.signatures:
            numbers[signature.id] = range(at, at + len(signature.regexes))
            at += len(signature.regexes)
        context_rules = tuple(rule for signature in signatures.signatures for rule in signature.context)
        wordings = WordingIndex(LiteralIndex([p for signature in signatures.signatures for p in signature.regexes]),
                                numbers, tuple(k for k, s in enumerate(signatures.signatures) for _ in s.regexes),
                                LiteralIndex(signatures.ignore_lines),
                                LiteralIndex([rule.regex for rule in context_rules]), context_rules)
        cached = _COMPILED[key] = (signatures, Prefilter(signatures.matched_patterns()), wordings)
    return cached


def prefilter_for(signatures: SignatureSet) -> Prefilter:
    """The literal prefilter of a signature set (which lines may match), built once per set."""
    return _compiled_for(signatures)[1]


def index_for(signatures: SignatureSet) -> WordingIndex:
    """Which wordings may match a line, built once per set."""
    return _compiled_for(signatures)[2]


# ---------------------------------------------------------------------------------------------
# Cleaning a log line

# A line at least this long may have been soft-wrapped (a terminal at 80 columns, a renderer):
# a wording may begin at its end and go on in the next line, so a match across the two counts.
WRAP_MIN = 60


# How the two halves of a wrapped line join: at a space (a renderer wraps between words) or
# with nothing between (a terminal cuts at its width, in the middle of a word).
WRAP_GLUE = (" ", "")


def may_continue(raw: str) -> bool:
    """Whether the next line may be the rest of this one's sentence."""
    return len(raw.rstrip()) >= WRAP_MIN


# An unprefixed line (a traceback frame) belongs to the rank of the prefixed line that started
# the traceback, when that line is at most this many lines before it.
RANK_WINDOW = 200
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
RANK_TOKEN = re.compile(r"\b(?:DP|TP|EP|PP|CP|ATTN_TP|ATTN_DP|MOE_EP)\d+\b")
LEVEL = r"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
# One prefix at a time, repeated: what other tools put before the line a program printed.
PREFIXES = (
    re.compile(r"^[\w.-]+\s+\|\s?"),  # docker compose: "svc-1  | "
    # Python logging's "%(asctime)s - %(name)s - %(levelname)s - " (a time zone too, as a formatter with %z gives it)
    re.compile(r"^\d{4}-\d\d-\d\d[ T][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\s+-\s+[\w.]+\s+-\s+(?P<level>[A-Z]+)\s+-\s+"),
    # the same without the time or without the name ("distributed.utils - ERROR - ", dask's; "%(asctime)s - %(levelname)s - ",
    # its time maybe the time of day alone, datefmt="%H:%M:%S": "04:42:20 - ERROR - ")
    re.compile(rf"^(?:\d{{4}}-\d\d-\d\d[ T][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?|\d\d:\d\d:\d\d(?:[.,]\d+)?|[\w.]+)\s+-\s+(?P<level>{LEVEL}|FATAL)\s+-\s+"),
    # HAMi-core, the vGPU layer under a pod's CUDA (its LOG_ERROR / LOG_WARN / LOG_INFO / LOG_DEBUG / LOG_MSG,
    # src/include/log_utils.h): "[HAMI-core ERROR (pid:565 thread=1402 file.c:831)]: ", "[HAMI-core Warn(565:1402:file.c:99)]: "
    re.compile(r"^\[HAMI-core (?P<level>ERROR|Warn|Info|Debug|Msg) ?\([^)]*\)\]:\s*"),
    # Weights & Biases' terminal messages (wandb/errors/term.py: termerror, termwarn): "wandb: ERROR ", "wandb: WARNING "
    re.compile(r"^wandb: (?P<level>ERROR|WARNING) "),
    # LMCache's "[%(asctime)s] LMCache %(levelname)s: " (lmcache/logging.py build_format), its time stripped before
    re.compile(rf"^LMCache (?P<level>{LEVEL}):\s*"),
    # NVIDIA's profilers and tools (Nsight Compute's ncu, Nsight Systems): "==ERROR== ", "==WARNING== "
    re.compile(r"^==(?P<level>ERROR|WARNING|Error|Warning)==\s*"),
    # spdlog's default pattern, "[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] " (the logger's name only where it has one;
    # https://github.com/gabime/spdlog/wiki/3.-Custom-formatting): C++ programs' "[2024-12-21 15:30:42.811]
    # [console] [error] ", its levels in lower case; and Taichi's "%^[%L %D %X.%e %t] " (taichi/util/logging.cpp),
    # the level a letter: "[E 04/17/23 11:09:22.656 3152] "
    re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}\] (?:\[[^\[\]]+\] )?"
               r"\[(?P<level>trace|debug|info|warning|error|critical)\] "),
    re.compile(r"^\[(?P<glog>[TDIWEC]) \d\d/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}(?: \d+)?\] "),
    re.compile(r"^\[(?P<inner>(?:\d{4}-\d\d-\d\d[ T][\d:.,]+)?(?:\s*(?:DP|TP|EP|PP|CP|ATTN_TP"
               r"|ATTN_DP|MOE_EP)\d+)*)\]\s*"),  # SGLang: "[2026-01-01 12:00:00 TP3] "
    # Ray and vLLM workers: "(RayWorkerWrapper pid=1)", "(VllmWorker rank=0 pid=2)", "(pid=3, ip=10.0.0.1)"
    # (Ray Serve names its replicas "ServeReplica:app:Deployment")
    # (SkyPilot's: "(task, pid=2846)", "(sky-service-7080, pid=2846)")
    re.compile(r"^\((?:[\w.:-]+,? )?(?:rank=\d+ )?pid=\d+(?:, ip=[\d.]+)?\)\s*"),
    # Open MPI's --tag-output (mpirun, Horovod): "[1,18]<stdout>:" ([jobid,rank]<stream>)
    re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:\s?"),
    # vLLM: "ERROR 05-12 10:11:12 [file.py:123] " (older: "INFO 04-28 20:50:23 file.py:791] ";
    # NIM: "ERROR 2025-07-21 14:34:24.934 file.py:62] ")
    re.compile(rf"^(?P<level>{LEVEL}) (?:\d{{4}}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+\.py:\d+\] ?"),
    # Python logging's default format ("ERROR:torch.distributed...:") and uvicorn's ("INFO:     ")
    re.compile(rf"^(?P<level>{LEVEL}):(?:[\w.]+:|\s+)"),
    # "2024-06-25 16:32:00,563 xinference.api.restful_api 3118895 ERROR    "
    re.compile(rf"^\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d[.,]\d+ [\w.]+ \d+ (?P<level>{LEVEL})\s+"),
    # Rust tracing (the router, dynamo): "2025-05-28T03:35:37.857Z ERROR engine.run_mp_engine: "
    re.compile(rf"^\d{{4}}-\d\d-\d\dT[\d:.]+Z\s+(?P<level>{LEVEL})\s+[\w.:-]+: "),
    # TensorFlow's C++ log (tsl's logging): "2021-05-06 11:02:45.581257: W tensorflow/.../dso_loader.cc:64] "
    re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<glog>[IWEF]) [\w./-]+:\d+\] "),
    # glog (torch's C++ side): "W0527 09:20:36.761000 140735466850080 torch/distributed/api.py:857] "
    re.compile(r"^(?P<glog>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w./-]+:\d+\] "),
    re.compile(r"^\[rank\d+\]:\s?"),  # torch elastic: "[rank0]: "
    # pytest's report marks the exception's lines with "E" and the indent ("E       ValueError: ...";
    # _pytest/_code/code.py: fail_marker + indentstr[1:])
    re.compile(r"^E {3,}(?=\S)"),
    # a bracketed number a launcher or supervisor puts first (a pid, a rank, a device): PyInstaller's
    # "[45748] ", a process supervisor's "[37723] " before llama-server's log, Monarch's "[0] [0] "
    re.compile(r"^\[\d+\]\s+(?=\S)"),
    # torch's C++ log (c10): "[E ProcessGroupNCCL.cpp:475] ", "[W1203 12:00:00.123456 99 Module.cpp:12] "
    # (a Windows build's source path too: "[W C:\\actions-runner\\...\\interface.cpp:47] ")
    re.compile(r"^\[(?P<glog>[IWEF])(?:\d{4} \d\d:\d\d:\d\d\.\d+ \d+)? ?(?:[A-Za-z]:)?[\w./\\-]+:\d+\]\s*"),
    # TensorRT-LLM's Python logger: "[11/02/2025-22:00:50] [TRT-LLM] [E] " (not TensorRT's own "[TRT] [E]":
    # its builder logs a tactic's failed allocation at E and goes on to the next tactic)
    re.compile(r"^(?:\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] )?\[TRT-LLM\] \[(?P<glog>[IWEFVD])\] "),
    # TensorRT-LLM and other C++ loggers: "[TensorRT-LLM][ERROR] "; Python loggers that bracket every field,
    # the level last ("[root][2024-08-22 08:43:02][303769][Thread-9][/x/engine.py:step():131][ERROR] ")
    re.compile(rf"^(?:\[[^\[\]]+\])+\[(?P<level>{LEVEL})\]\s*"),
    # FastChat and loguru-style: "2023-11-10 17:45:27 | ERROR | asyncio | "
    re.compile(rf"^\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \| (?P<level>{LEVEL})\s*\| (?:[\w.:<>-]+ \| |[\w.:<>-]+ - )?"),
    re.compile(r"^\[[\w.-]+\]\s+\|\s?"),  # a bracketed service name: "[llama-cpp] | "
    # CI logs (Buildkite "  | [2024-09-05T00:38:34Z] ") and build logs quoting a step ("  > ")
    re.compile(r"^\s*[|>]\s"),
    re.compile(r"^\[\d{4}-\d\d-\d\dT[\d:.]+Z\]\s*"),
    re.compile(rf"^\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? (?P<level>{LEVEL}) \d+ \[[\w./-]+:\d+\] ?"),
    # syslog / journalctl: "Jun 30 11:07:05 gpu-0 kernel: ", "2026-06-30T11:07:05.1+00:00 host kernel: "
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ [\w./-]+(?:\[\d+\])?: "),
    re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:?\d\d)? [\w.-]+ [\w./-]+(?:\[\d+\])?: "),
    re.compile(r"^\[\s*\d+\.\d+\]\s*"),  # dmesg: "[ 7386.259769] "
    # zerolog's console writer (LocalAI: "10:25PM DBG GRPC(model-127.0.0.1:42747): stderr ")
    re.compile(r"^\d{1,2}:\d\d(?:AM|PM) (?P<glog>DBG|INF|WRN|ERR|FTL) (?:GRPC\([^)]*\): (?:stderr|stdout) ?)?"),
    # a timestamp, then the level (Go, Rust's env_logger, many servers): "2026-09-06 12:21:46.013  ERROR ",
    # or glued to it (Open WebUI's container log: "2025-09-17 19:30:48.747524+00:00ERROR [root] ")
    re.compile(rf"^\[?\d{{4}}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s*\[?(?P<level>{LEVEL}|FATAL|TRACE)\]?:?\s+"),
    # llama.cpp's common log (minutes.seconds.ms.us, then a level letter): "1.06.520.077 E "
    re.compile(r"^\d+\.\d\d\.\d{3}\.\d{3} (?P<glog>[IWED]) "),
    # a time of day in brackets, then the level (rich's logging handler: "[12/01/26 16:10:33] INFO     "),
    # maybe after the stream it relays: "[16:10:33] stdout/ERROR  "
    re.compile(rf"^\[(?:\d\d/\d\d/\d\d )?\d\d:\d\d:\d\d(?:[.,]\d+)?\]\s+(?:[\w.-]+/)?(?P<level>{LEVEL}|FATAL)\s+"),
    # logfmt (Go's slog, logrus: Ollama, the container toolkit): 'time=... level=ERROR source=x.go:1 msg='
    re.compile(rf"^(?:time=\S+ )?level=(?P<level>{LEVEL}|error|warning|warn|info|debug|fatal) (?:source=\S+ )?msg="),
    # Slurm's own error lines, and a plugin's after them ("slurmstepd: error: pyxis:     [ERROR] ...",
    # src/common/log.c: "%s: error: %s" with the program's name)
    re.compile(r"^(?:slurmstepd|slurmd|srun|sbatch|salloc)(?:\[\d+\])?: (?P<level>error|fatal): (?:pyxis: +)?"),
    # the kubelet's container log files (/var/log/pods: CRI's "<RFC 3339 time> <stream> <P|F> <line>")
    re.compile(r"^\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d) (?:stdout|stderr) [FP] "),
    # BuildKit's plain progress (docker build): "#12 76.00 " or, copied from its console view, "76.00 ": the
    # step's seconds to four significant digits (0.092, 3.020, 52.30, 132.3), then the step's output
    re.compile(r"^(?:#\d+ )?(?:\d\.\d{3}|\d\d\.\d\d|\d{3}\.\d|\d{4}\.) +(?=\S)"),
    # a C/C++ tool's own warning line ("warning: failed to mlock ...", llama.cpp's LLAMA_LOG_WARN; gcc's "warning: ")
    re.compile(r"^(?P<level>[Ww]arning):\s+"),
    # a bare timestamp, last (any prefix above that begins with one is more specific): `docker logs
    # --timestamps` ("2024-02-09T17:32:34.123456789Z "), Docker Desktop's log view ("2024-02-09 17:32:34 ")
    re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+"),
)
# Whether any prefix matches at a line's start, in one regex: most candidate lines (a traceback's
# frames) have none, and thirty tries each cost more than cleaning the rest. Its groups are not
# captured (the names repeat); no prefix refers back to a group.
PREFIX_GATE = re.compile(re.sub(r"\(\?P<\w+>", "(?:", "|".join(f"(?:{p.pattern})" for p in PREFIXES)))
GLOG_LEVELS = {"E": "ERROR", "F": "FATAL", "W": "WARNING", "I": "INFO", "D": "DEBUG", "V": "DEBUG",  # glog's, llama.cpp's, TensorRT's letters
               "C": "CRITICAL", "T": "TRACE",  # spdlog's (Taichi's)
               "DBG": "DEBUG", "INF": "INFO", "WRN": "WARNING", "ERR": "ERROR", "FTL": "FATAL"}  # zerolog's
# What a tool appends: Ray's de-duplication note.
SUFFIXES = (re.compile(r"\s*\[repeated \d+x across cluster\]$"),)
# an issue's Markdown around a whole pasted line: "**AttributeError: ...**", "`Error: ...`" (a
# backtick inside a wording, TGI's "`inputs` tokens + ...", stays)
MARKDOWN_WRAP = re.compile(r"^(\*\*|`{1,3})(?=[^\s*])(?P<inner>[^`]*?[^\s*])\1$")  # not Slurm's "*** JOB ... ***"
# rich's boxes around tracebacks and panels ("│ ... │", "╭──╮"): framing, not text. (A literal
# a box character splits in the raw line is not found by the prefilter; never seen.)
BOX = re.compile(r"[\u2500-\u257f]+")


@dataclass(frozen=True)
class CleanLine:
    text: str               # what the patterns see
    rank: str | None        # "TP3", "DP0 TP1 EP1"; None when the line carries none
    prefixed: bool = False  # a timestamp/rank/logger prefix was removed
    level: str | None = None  # the logging level a removed prefix named ("ERROR")


def clean_line(raw: str) -> CleanLine:
    """Strip colours, box characters and prefixes; keep the rank of a ``[... TP3]`` prefix and
    the level of a logging prefix."""
    text = BOX.sub("", ANSI.sub("", raw).replace("\r", "")).rstrip()
    rank: str | None = None
    level: str | None = None
    prefixed = False
    changed = True
    while changed and PREFIX_GATE.match(text):
        changed = False
        for prefix in PREFIXES:
            match = prefix.match(text)
            if match and match.end() > 0:
                inner = match.groupdict().get("inner") or ""
                if "inner" in match.groupdict() and not inner.strip():
                    continue  # "[]" is content, not a prefix
                ranks = RANK_TOKEN.findall(inner)
                rank = " ".join(ranks) if ranks else rank
                level = ((match.groupdict().get("level") or "").upper()  # "Warn", "error": one spelling
                         or GLOG_LEVELS.get(match.groupdict().get("glog") or "") or level)
                text = text[match.end():]
                changed = prefixed = True
                break  # the next prefix is looked for from the first (most specific) again
    for suffix in SUFFIXES:
        text = suffix.sub("", text)
    wrapped = MARKDOWN_WRAP.match(text.strip())
    text = wrapped.group("inner") if wrapped else text
    return CleanLine(text=text.strip(), rank=rank, prefixed=prefixed, level=level)


# ---------------------------------------------------------------------------------------------
# Values and their derivations


def driver_cuda(values: dict[str, Value]) -> dict[str, Value]:
    """torch prints the driver's CUDA as an integer: 12020 -> "12.2"."""
    found = values.get("driver_cuda_number")
    if not isinstance(found, int):
        return {}
    return {"driver_cuda": f"{found // 1000}.{(found % 1000) // 10}"}


def signal_name(code: int | None) -> str | None:
    """The signal that ended a process, from its exit code: -9 (Python's) or 137 (a shell's)
    -> "SIGKILL"; None for a normal exit."""
    if not isinstance(code, int) or 0 <= code <= 128:
        return None
    number = -code if code < 0 else code - 128
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_signal(values: dict[str, Value]) -> dict[str, Value]:
    """A negative exit code is the signal that ended the process: -9 -> SIGKILL, and why."""
    code = values.get("exit_code")
    name = signal_name(code) if isinstance(code, int) and code < 0 else None
    if name is None or name.startswith("signal "):
        return {}
    derived: dict[str, Value] = {"exit_signal": f"killed by {name}"}
    if name == "SIGKILL":
        derived["exit_signal_fix"] = (
            "find who sent SIGKILL: the kernel's OOM killer logs `Out of memory: Killed process "
            f"{values.get('pid')}` (`dmesg -T | grep -i kill`, `journalctl -k`): give the host more "
            "RAM or lower what the server keeps in it (fewer --tokenizer-worker-num, a smaller "
            "--max-running-requests); otherwise a supervisor or an operator killed it.")
    elif name == "SIGSEGV" or name == "SIGBUS" or name == "SIGABRT":
        derived["exit_signal_fix"] = (
            f"the process crashed ({name}) in native code: read its last lines above, and check "
            "that the kernel packages (sglang-kernel, flashinfer) match this torch and CUDA.")
    return derived


def http_port_of_grpc(values: dict[str, Value]) -> dict[str, Value]:
    """SGLang 0.5.11 derives grpc_port = port + 10000: the HTTP port it was given."""
    grpc = values.get("grpc_port")
    return {"http_port": grpc - 10000} if isinstance(grpc, int) and grpc > 10000 else {}


# Derived sentences for the fix templates; they are not values read from the log.
PROSE = frozenset({"sizing", "no_room", "exit_signal_fix", "piecewise_cuda_graph_tokens"})

COMPUTE: dict[str, Callable[[dict[str, Value]], dict[str, Value]]] = {
    "kv_pool_sizing": kv_pool_sizing,
    "driver_cuda": driver_cuda,
    "exit_signal": exit_signal,
    "http_port_of_grpc": http_port_of_grpc,
}


# ---------------------------------------------------------------------------------------------
# Findings


@dataclass
class _Hit:
    """The first match of a signature, plus who else printed it."""

    signature: Signature
    line: int
    text: str
    rank: str | None
    values: dict[str, Value]
    ranks: list[str] = field(default_factory=list)
    count: int = 1
    reported: bool = False
    quiet: bool = False  # the program logged it at a quiet level (WARNING, INFO): it went on past it

    def order(self) -> tuple:
        """Root cause first: errors before warnings, what the program logged as an error before
        what it logged as a warning and survived, the most specific, then the earliest."""
        return (severity.rank(self.signature), self.quiet, -self.signature.priority, self.line)


class Triage:
    """Incremental triage: feed lines as the log grows, get findings as soon as they are sure.

    Only lines the literal prefilter lets through are cleaned and matched; the lines before
    one (for ``near`` and the rank of a traceback) are read back when needed, from
    the last ``window`` lines fed, or from the block for ``feed_block``.
    """

    def __init__(self, signatures: SignatureSet | None = None) -> None:
        self._set = signatures or load_signatures()
        self._superseded_by = self._set.superseded_by()
        self._prefilter = prefilter_for(self._set)
        self._wordings = index_for(self._set)
        self._cleaned: dict[str, CleanLine] = {}  # the last lines cleaned: a line is looked at again as the next one's "before"
        self._hits: dict[str, _Hit] = {}
        self._context: dict[str, Value] = {}
        self._line_no = 0
        self.window = max([RANK_WINDOW] + [s.near.before for s in self._set.signatures if s.near])
        self._history: deque[str] = deque(maxlen=self.window)  # raw lines fed, for look-backs
        # matches waiting for their `near` line after them: (signature, line, values, line no, last line no)
        self._awaiting: list[tuple[Signature, CleanLine, dict[str, Value], int, int]] = []
        rules = self._set.unclassified
        self._first_failure = FirstFailure(rules) if rules else None
        self._closed = False

    # -- feeding ------------------------------------------------------------------------------
    def feed(self, raw_line: str) -> list[Finding]:
        """Take one log line; return the findings that became certain with it."""
        self._line_no += 1
        if self._worth_examining(raw_line, self._history[-1] if self._history else None):
            self._examine(raw_line, lambda: reversed(self._history))
        self._history.append(raw_line)
        return self._release(final=False) if self._hits else []

    def feed_block(self, block: bytes, before: bytes = b"") -> bytes:
        """Take whole lines (``block`` ends with a newline): the batch path, which finds the
        candidate lines of the whole block in one pass. ``before`` is what the previous call
        returned: the last ``window`` lines, for look-backs across blocks."""
        at = 0  # the offset of line self._line_no + 1 in block
        # the last line before the block: a wording wrapped from it into the block's first line
        carried = before[before.rfind(b"\n", 0, len(before) - 1) + 1:] if before else b""
        starts = deque(s - len(carried) for s in self._prefilter.line_starts(carried + block))
        follow = None  # the line after a candidate that may go on into it: examined too (as feed does)
        if starts and starts[0] < 0:
            starts.popleft()  # that line was examined with the block before
            follow = 0 if may_continue(carried.decode("utf-8", "replace")) else None
        if self._message_wanted(self._line_no + 1):
            follow = 0  # the block before ended with a header: its message is this block's first line
        while starts or follow is not None:
            if follow is not None and (not starts or follow < starts[0]):
                start, follow, candidate = follow, None, False  # not followed in its turn
            else:
                start, candidate = starts.popleft(), True
                follow = None if follow == start else follow
            if start >= len(block):
                break
            self._line_no += block.count(b"\n", at, start) + 1
            end = block.index(b"\n", start)
            raw = block[start:end].decode("utf-8", "replace")
            if self._worth_examining(raw, next(_lines_before(block, start, before, 1), None)):
                self._examine(raw, partial(_lines_before, block, start, before, self.window))
            at = end + 1
            if (candidate and may_continue(raw)) or self._message_wanted(self._line_no + 1):
                follow = at  # as feed does: a line with a needle may go on into the next; a wanted one is seen whatever it says
        self._line_no += block.count(b"\n", at)
        return _last_lines(before, block, self.window)

    def _worth_examining(self, raw: str, before: str | None) -> bool:
        """Whether the line just counted may state anything: a needle of its own, a wording wrapped
        into it from the line ``before``, or a line the fallback wants whatever it says. feed and
        feed_block ask this of the same lines (feed_block's candidates are more: both halves of a
        wrapped needle, the line after any candidate), so both examine the same ones."""
        return self._prefilter.may_match(raw) or self._message_wanted(self._line_no) or (
            before is not None and may_continue(before)
            and any(self._prefilter.may_match(before + glue + raw) for glue in WRAP_GLUE))

    def _message_wanted(self, line_no: int) -> bool:
        """Whether the fallback needs line ``line_no`` whatever it says: a header's message."""
        return self._first_failure is not None and self._first_failure.wants_line(line_no)

    def close(self) -> list[Finding]:
        """The log ended (the server is gone): release findings held for a better cause, and
        the unclassified failure when no signature explains the log."""
        self._awaiting.clear()  # their line after never came
        released = self._release(final=True)
        if not self._closed:
            self._closed = True
            unclassified = self._unclassified()
            if unclassified is not None:
                released.append(unclassified)
        return released

    def pending(self) -> bool:
        """A fatal cause is held back, waiting for lines that may explain it better (the
        launcher releases it with ``close`` when the server has gone quiet instead)."""
        return any(not h.reported and not self._is_superseded(h) and h.signature.severity == "error"
                   for h in self._hits.values())

    def findings(self) -> list[Finding]:
        """Every root cause so far, most specific first, values from the whole log."""
        hits = [h for h in self._hits.values() if not self._is_superseded(h)]
        hits.sort(key=_Hit.order)
        found = [self._render(h) for h in hits]
        unclassified = self._unclassified() if self._closed else None
        return ([unclassified] if unclassified else []) + found  # it comes only without an error

    def _unclassified(self) -> Finding | None:
        """Where the log failed, when it failed and no signature says why."""
        failure = self._first_failure.found() if self._first_failure else None
        # a cause found says why (a wrapper after this failure line is superseded by it, so it does not)
        if failure is None or any(h.signature.severity == "error" and not self._is_superseded(h)
                                  for h in self._hits.values()):
            return None
        rules = self._set.unclassified
        assert rules is not None
        ranks = (failure.rank,) if failure.rank else ()
        failure, naming = named_in_chain(rules, failure)
        if naming.family is not None:  # no wording matched, but its CUDA/NVML error, its words or a public report name it
            signature = self._set.by_id()[naming.family]
            values = self._values_for(signature, {})
            message = naming.frame.format(message=fill_template(signature.message, values), **naming.fills)
            resembled = (naming.resembled.source,) if naming.resembled else ()
            return Finding(
                id=signature.id, severity=signature.severity, title=signature.title, line=failure.line,
                text=failure.text, message=message,
                fix=fill_template(signature.fix, values), rank=failure.rank, ranks=ranks,
                values={"kind": failure.kind, "named_by": naming.named_by, **naming.values},
                priority=signature.priority, sources=resembled + tuple(_sources(signature)))
        message = fill_template([rules.message], {"text": failure.text})
        fix = rules.fix[failure.kind]
        error = naming.library_error
        if error is not None:  # a CUDA or NVML error of no family: the library's own words say what it is
            message = f"{message} ({error.describe()})"
            fix = rules.library_error_fix.format(library=error.library, name=error.name,
                                                 reference=REFERENCES[error.library])
        return Finding(
            id=rules.id, severity="error", title=rules.title, line=failure.line, text=failure.text,
            message=message, fix=fix, rank=failure.rank, ranks=ranks,
            values={"kind": failure.kind, **naming.values},
            sources=(REFERENCES[error.library],) if error is not None else ())

    def _clean(self, raw: str) -> CleanLine:
        """clean_line, remembered for the last few lines (each is cleaned again as its next line's
        line before, to find a wording wrapped across the two)."""
        line = self._cleaned.get(raw)
        if line is None:
            if len(self._cleaned) >= 4:
                self._cleaned.clear()
            line = self._cleaned[raw] = clean_line(raw)
        return line

    def _examine(self, raw_line: str, recent: Callable[[], Iterator[str]]) -> None:
        """Match one candidate line; ``recent()`` yields the raw lines before it, latest first."""
        line = self._clean(raw_line)
        if self._ignored(line) or self._ends_an_ignored_line(line, recent):
            return
        self._collect_context(line.text)
        if self._awaiting:
            self._confirm_awaiting(line)
        rank: str | None = None
        ranked = matched = False
        index = self._wordings.literals
        possible = index.possible(line.text)  # the wordings whose literals the line has
        joined = [(seen, cut, index.possible(seen.text)) for seen, cut in self._joined(line, recent)]
        # only the signatures with a wording that may match the line, or the line wrapped into it, in their order
        candidates = sorted({self._wordings.owner[n] for n in possible.union(*(p for _, _, p in joined))})
        for signature in (self._set.signatures[k] for k in candidates):
            seen, at = line, self._line_no
            values = self._match(signature, line, recent, at, possible)
            if values is None:
                for seen, cut, in_joined in joined:
                    at = self._line_no - 1  # the wording begins on the line before
                    values = self._match(signature, seen, recent, at, in_joined, straddle=cut)
                    if values is not None:
                        break
            if values is not None:
                matched = True
                if not ranked:  # looked up once, and only for a line that matched
                    rank, ranked = self._rank_of(line, recent), True
                self._record(signature, seen, rank, values, at=at)
        if self._first_failure is not None:
            self._first_failure.track(self._line_no, line.text)
        if not matched and self._first_failure is not None:
            self._first_failure.see(self._line_no, line.text, line.level, lambda: self._rank_of(line, recent),
                                    lambda: self._clean(next(recent(), "")).text)
        # after matching: a line that says it fell back recovers from what it says itself too
        # ("'hf_xet' is not installed. Falling back to regular HTTP download")
        if self._set.recovered and self._set.recovered.says_recovered(line.text):
            self._recover(self._line_no - self._set.recovered.within)

    def _recover(self, after: int) -> None:
        """The program recovered from what it printed after line ``after``: those failures
        (not yet reported: a live one waits for this) are not the log's."""
        self._hits = {i: h for i, h in self._hits.items()
                      if h.reported or h.signature.severity != "error" or h.line <= after}
        if self._first_failure is not None:
            self._first_failure.forget_after(after)

    def _ignore_matches(self, text: str) -> Iterator[re.Match[str]]:
        """Where the ignore_lines whose literals ``text`` has match it."""
        for k in self._wordings.ignores.possible(text):
            match = self._set.ignore_lines[k].search(text)
            if match:
                yield match

    def _ignored(self, line: CleanLine) -> bool:
        return next(self._ignore_matches(line.text), None) is not None

    def _ends_an_ignored_line(self, line: CleanLine, recent: Callable[[], Iterator[str]]) -> bool:
        """Whether this line is the rest of a benign line wrapped in two: then neither half is a
        failure, and what the line before was taken for is forgotten."""
        for seen, (first_ends, second_begins) in self._joined(line, recent):
            for match in self._ignore_matches(seen.text):
                if match.start() < first_ends and match.end() > second_begins:
                    self._forget_line(self._line_no - 1)
                    return True
        return False

    def _forget_line(self, line_no: int) -> None:
        """What line ``line_no`` was taken for (not yet reported) was a misreading."""
        self._hits = {i: h for i, h in self._hits.items() if h.reported or h.line != line_no}
        self._awaiting = [w for w in self._awaiting if w[3] != line_no]
        if self._first_failure is not None:
            self._first_failure.forget_line(line_no)

    def _joined(self, line: CleanLine, recent: Callable[[], Iterator[str]]) -> list[tuple[CleanLine, tuple[int, int]]]:
        """The line before and this one as one line, each way they may have been wrapped
        (when the one before is long enough to have been), with where the second begins."""
        before_raw = next(recent(), None)
        if before_raw is None or not may_continue(before_raw):
            return []
        before = self._clean(before_raw)
        if not before.text or self._ignored(before):
            return []
        return [(CleanLine(before.text + glue + line.text, before.rank or line.rank, before.prefixed, before.level),
                 (len(before.text), len(before.text) + len(glue))) for glue in WRAP_GLUE]

    def _rank_of(self, line: CleanLine, recent: Callable[[], Iterator[str]]) -> str | None:
        # Traceback lines carry no prefix; they belong to the rank whose prefixed line started
        # the traceback: the nearest prefixed line before, when it says Traceback or exception
        # (a guess when ranks interleave), within RANK_WINDOW lines.
        if line.prefixed:
            return line.rank
        for raw in islice(recent(), RANK_WINDOW):
            before = clean_line(raw)
            if before.prefixed:
                starts = "Traceback" in before.text or "exception" in before.text.lower()
                return before.rank if starts else None
        return None

    def _collect_context(self, text: str) -> None:
        rules = self._wordings.context_rules
        for k in sorted(self._wordings.contexts.possible(text)):  # in the set's order: "last" reduces by it
            match = rules[k].regex.search(text)
            if match:
                for name, raw in match.groupdict().items():
                    if raw is not None:
                        self._reduce(name, to_value(raw, name), rules[k].reduce)

    def _reduce(self, name: str, value: Value, how: str) -> None:
        old = self._context.get(name)
        if old is None or how == "last":
            self._context[name] = value
        elif how == "min" and _comparable(old, value):
            self._context[name] = min(old, value)
        elif how == "max" and _comparable(old, value):
            self._context[name] = max(old, value)

    def _match(self, signature: Signature, line: CleanLine, recent: Callable[[], Iterator[str]],
               at: int, possible: frozenset[int], straddle: tuple[int, int] | None = None) -> dict[str, Value] | None:
        """The values of the signature's first wording in the line (of those in ``possible``, the
        numbers of the wordings whose literals the line has). With ``straddle`` (a joined
        line: where its first half ends, where its second begins) only a match from the first
        half into the second counts, and only if the first half alone does not match (then it
        is that line's)."""
        for number, pattern in zip(self._wordings.numbers[signature.id], signature.regexes, strict=True):
            if number not in possible:
                continue  # it has none of this wording's literals: the regex cannot match
            match = pattern.search(line.text)
            if match and straddle is not None and (
                    not (match.start() < straddle[0] and match.end() > straddle[1])
                    or pattern.search(line.text[:straddle[0]])):
                match = None  # within one half, or the line before matched alone: that line's
            if match:
                values = {k: to_value(v, k, signature.keep_text)
                          for k, v in match.groupdict().items() if v is not None}
                rule = signature.near
                if rule is None or (rule.before and any(rule.regex.search(clean_line(raw).text)
                                                        for raw in islice(recent(), rule.before))):
                    return values
                if rule.after:  # the line that says where may come later (a chained exception)
                    self._awaiting.append((signature, line, values, at, self._line_no + rule.after))
                return None
        return None

    def _confirm_awaiting(self, line: CleanLine) -> None:
        """Matches whose ``near`` line is this one become hits; those past their window go."""
        keep = []
        for waiting in self._awaiting:
            signature, first, values, line_no, last = waiting
            if self._line_no > last:
                continue
            assert signature.near is not None
            if signature.near.regex.search(line.text):
                self._record(signature, first, first.rank, values, at=line_no)
            else:
                keep.append(waiting)
        self._awaiting = keep

    def _record(self, signature: Signature, line: CleanLine, rank: str | None,
                values: dict[str, Value], at: int | None = None) -> None:
        hit = self._hits.get(signature.id)
        if hit is None:
            rules = self._set.unclassified
            quiet = rules is not None and (line.level or "").upper() in rules.quiet_levels
            hit = _Hit(signature, at or self._line_no, line.text, rank, values, quiet=quiet)
            self._hits[signature.id] = hit
        else:
            hit.count += 1
            for name, value in values.items():  # a later line may carry what the first lacked
                hit.values.setdefault(name, value)
        if rank and rank not in hit.ranks:
            hit.ranks.append(rank)

    # -- releasing ----------------------------------------------------------------------------
    def _release(self, final: bool) -> list[Finding]:
        ready = [h for h in self._hits.values()
                 if not h.reported and not self._is_superseded(h)
                 and (final or self._waited_enough(h))]
        ready.sort(key=_Hit.order)
        for hit in ready:
            hit.reported = True
        return [self._render(h) for h in ready]

    def _waited_enough(self, hit: _Hit) -> bool:
        waited = self._line_no - hit.line
        recovery = self._set.recovered
        if recovery and hit.signature.severity == "error" and waited < recovery.within:
            return False  # the program may yet say it recovered from it
        if hit.signature.id not in self._superseded_by and not hit.signature.wrapper:
            return True  # nothing can explain it better: report at once
        return waited >= self._set.hold_lines

    def _is_superseded(self, hit: _Hit) -> bool:
        if any(better in self._hits for better in self._superseded_by.get(hit.signature.id, ())):
            return True
        if not hit.signature.wrapper:
            return False
        # a wrapper says only that something died: any cause found, or a failure line before it, says more
        if any(h.signature.severity == "error" and not h.signature.wrapper for h in self._hits.values()):
            return True
        failure = self._first_failure.found() if self._first_failure else None
        return failure is not None and failure.line < hit.line

    # -- rendering ----------------------------------------------------------------------------
    def _render(self, hit: _Hit) -> Finding:
        signature = hit.signature
        values = self._values_for(signature, hit.values)
        numbers = {k: v for k, v in values.items() if k not in PROSE}
        return Finding(
            id=signature.id, line=hit.line, title=signature.title,
            message=fill_template(signature.message, values),
            fix=fill_template(signature.fix, values), values=numbers, text=hit.text,
            rank=hit.rank, ranks=tuple(hit.ranks), count=hit.count,
            priority=signature.priority, sources=tuple(_sources(signature)),
            severity=signature.severity,
            feature=signature.feature_off.feature if signature.feature_off else None)

    def _values_for(self, signature: Signature, own: dict[str, Value]) -> dict[str, Value]:
        # The matched line's own numbers win over the same names read elsewhere in the log.
        names = {n for rule in signature.context for n in rule.regex.groupindex}
        values = {n: self._context[n] for n in sorted(names) if n in self._context}
        values.update(own)
        if signature.compute:
            values.update(COMPUTE[signature.compute](values))
        return values


def _sources(signature: Signature) -> list[str]:
    """The signature's sources, then those of its wordings (each wording says where it was seen)."""
    out = list(signature.sources)
    for wording in signature.patterns:
        out += [source for source in wording.source if source not in out]
    return out


def _comparable(a: Value, b: Value) -> bool:
    return isinstance(a, (int, float)) == isinstance(b, (int, float))


FORMATTER = string.Formatter()


def fill_template(templates: list[str], values: dict[str, Value]) -> str:
    """The first template whose placeholders all have values, filled in."""
    for template in templates:
        names = {name for _, name, _, _ in FORMATTER.parse(template) if name}
        if names <= values.keys():
            return template.format_map({n: display(values[n]) for n in names})
    return templates[-1].split("{")[0].rstrip(" :(") + "."


# ---------------------------------------------------------------------------------------------
# Batch entry points


CHUNK = 1 << 20  # bytes read at a time: memory stays flat however big the log


def triage_lines(lines: Iterable[str], signatures: SignatureSet | None = None) -> list[Finding]:
    """Findings of a whole log given as lines, fed one by one as the launcher does."""
    triage = Triage(signatures)
    for line in lines:
        triage.feed(line.rstrip("\n"))
    triage.close()
    return triage.findings()


def triage_stream(stream: BinaryIO, signatures: SignatureSet | None = None, block: int = CHUNK) -> list[Finding]:
    """Findings of a log read from a binary stream in blocks of ``block`` bytes, in constant
    memory. Lines are split on \n only, so line numbers match editors even where progress bars
    use \r; bytes that are not UTF-8 read as U+FFFD."""
    triage = Triage(signatures)
    before, partial = b"", b""
    while chunk := stream.read(block):
        data = partial + chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            before = triage.feed_block(data[:cut], before)
        partial = data[cut:]
    if partial:  # the last line has no newline
        triage.feed_block(partial + b"\n", before)
    triage.close()
    return triage.findings()


def triage_file(path: Path, signatures: SignatureSet | None = None) -> list[Finding]:
    """Findings of the log at ``path`` (streamed; an ``OSError`` when it cannot be read)."""
    with open(path, "rb") as stream:
        return triage_stream(stream, signatures)


def triage_text(text: str, signatures: SignatureSet | None = None) -> list[Finding]:
    """Findings of a whole log held as text (as ``triage_file`` reads it)."""
    return triage_stream(io.BytesIO(text.encode("utf-8", "replace")), signatures)


def _lines_before(block: bytes, start: int, before: bytes, limit: int) -> Iterator[str]:
    """The lines before offset ``start`` of ``block``, then those of ``before``, latest first."""
    for buffer, end in ((block, start - 1), (before, len(before) - 1)):
        while end >= 0 and limit > 0:  # end: the newline that ends the line
            begin = buffer.rfind(b"\n", 0, end) + 1
            yield buffer[begin:end].decode("utf-8", "replace")
            end, limit = begin - 1, limit - 1


def _last_lines(before: bytes, block: bytes, count: int) -> bytes:
    """The last ``count`` whole lines of ``before + block`` (fewer when there are fewer)."""
    for buffer in (block, before + block):  # the second only for a block shorter than that
        at = len(buffer) - 1
        for _ in range(count):
            at = buffer.rfind(b"\n", 0, at)
            if at < 0:
                break
        else:
            return buffer[at + 1:]
    return before + block
