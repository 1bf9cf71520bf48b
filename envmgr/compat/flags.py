"""SGLang's server flags per release, and the check of a benchmark config's flags against them.

The flags are data (``sglang_flags.yaml``, read from each release's argparse parser); this
module only answers questions about them. ``check_flags`` is what ``envmgr bench`` runs before
a launch: a flag the environment's sglang does not know would otherwise cost a server start
(minutes of weight loading on a big model) to learn from argparse's one-line usage error.

Rules the check follows:
- names are resolved as argparse does: exact spellings (canonical, aliases, ``--no-X``), then
  an unambiguous prefix (``--tp`` -> ``--tp-size``), which is reported because a later release
  can add a flag that makes it ambiguous;
- a release outside the verified range downgrades "not known" to a warning: envmgr cannot tell
  a new (or very old) flag from a typo there;
- ``sglang_version=None`` checks names and kinds only (no spans, no choices).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Literal

import yaml
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from envmgr.datafiles import load_shipped, parse_yaml
from envmgr.errors import KnowledgeBaseError
from envmgr.findings import Finding
from envmgr.severity import Severity
from envmgr.severity import rank as severity_rank
from envmgr.spec.models import FlagName, FlagValue

HELP = "check `python -m sglang.launch_server --help`"


# ---------------------------------------------------------------------------------------------
# The data file


def _check_version(value: str) -> str:
    try:
        Version(value)
    except InvalidVersion:
        raise ValueError(f"{value!r} is not a PEP 440 version") from None
    return value


# str, strictly: an unquoted `0.6` in the YAML would be a float and silently compare wrong.
Release = Annotated[str, Field(strict=True), AfterValidator(_check_version)]


class Span(BaseModel):
    """The releases a spelling exists in: [since, removed) less missing_in."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    since: Release | None = None
    removed: Release | None = None
    missing_in: list[Release] = []

    @model_validator(mode="after")
    def _ordered(self) -> "Span":
        if self.since and self.removed and Version(self.since) >= Version(self.removed):
            raise ValueError(f"since {self.since} is not before removed {self.removed}")
        return self

    def has(self, version: Version) -> bool:
        if self.since and version < Version(self.since):
            return False
        if self.removed and version >= Version(self.removed):
            return False
        # a gap names plain releases; 0.5.10.post1 is missing when 0.5.10 is
        return all(Version(v) != Version(version.base_version) for v in self.missing_in)


class Spelling(Span):
    name: FlagName


def _spelling(raw: Any) -> Any:
    # An alias is usually just its name: it spans the releases its flag spans.
    return {"name": raw} if isinstance(raw, str) else raw


class FlagInfo(Span):
    kind: Literal["bare", "value", "optional"]
    type: Literal["int", "float"] | None = None
    deprecated: Release | None = None
    replacement: str | None = None
    sets: FlagName | None = None
    aliases: list[Spelling] = []
    negations: list[Spelling] = []
    choices: list[str | int | float] | None = None
    choices_from: Release | None = None
    choices_until: Release | None = None
    choices_since: dict[str, Release] = {}
    choices_removed: dict[str, Release] = {}
    note: str = ""

    @field_validator("aliases", "negations", mode="before")
    @classmethod
    def _names(cls, raw: Any) -> Any:
        return [_spelling(x) for x in raw] if isinstance(raw, list) else raw

    @model_validator(mode="after")
    def _choices_consistent(self) -> "FlagInfo":
        listed = {str(c) for c in self.choices or []}
        stray = sorted((set(self.choices_since) | set(self.choices_removed)) - listed)
        if stray:
            raise ValueError(f"choices_since/choices_removed name values not in choices: {stray}")
        if self.choices is None and (self.choices_from or self.choices_until):
            raise ValueError("choices_from/choices_until without choices")
        if self.kind == "bare" and (self.choices or self.type):
            raise ValueError("a bare flag has no choices or type")
        return self

    def choices_at(self, version: Version) -> list[str] | None:
        """The values argparse accepts at ``version``; None when it checks none."""
        if self.choices is None:
            return None
        era = Span(since=self.choices_from, removed=self.choices_until)
        if not era.has(version):
            return None
        return [str(c) for c in self.choices if self.choice_span(str(c)).has(version)]

    def choice_span(self, value: str) -> Span:
        return Span(since=self.choices_since.get(value), removed=self.choices_removed.get(value))


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str
    url: str = ""
    how: str


class FlagData(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    sources: list[Source] = Field(min_length=1)
    verified: list[Release] = Field(min_length=1)
    flags: dict[FlagName, FlagInfo] = Field(min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> "FlagData":
        if [Version(v) for v in self.verified] != sorted(Version(v) for v in self.verified):
            raise ValueError("verified: list the releases oldest first")
        seen: dict[str, str] = {}
        for canon, info in self.flags.items():
            for spelling in [canon, *(a.name for a in info.aliases), *(n.name for n in info.negations)]:
                if spelling in seen:
                    raise ValueError(f"{spelling} is a spelling of both {seen[spelling]} and {canon}")
                seen[spelling] = canon
        bad_sets = sorted(f"{c} sets {i.sets}" for c, i in self.flags.items() if i.sets and i.sets not in self.flags)
        if bad_sets:
            raise ValueError(f"`sets` names unknown flags: {bad_sets}")
        return self


@dataclass(frozen=True)
class Entry:
    """One spelling as argparse sees it: the flag it belongs to and its own span."""

    spelling: str
    canonical: str
    info: FlagInfo
    span: Span
    negation: bool = False


@dataclass(frozen=True)
class FlagTable:
    data: FlagData
    entries: dict[str, Entry]

    @property
    def first(self) -> Version:
        return Version(self.data.verified[0])

    @property
    def last(self) -> Version:
        return Version(self.data.verified[-1])

    def verified(self, version: Version) -> bool:
        """Whether ``version`` is inside the range whose parsers were read."""
        return self.first <= Version(version.base_version) <= self.last


def parse_flag_data(text: str, origin: str = "sglang_flags.yaml") -> FlagTable:
    """Validate flag data; malformed data is a ``KnowledgeBaseError`` (a bug in envmgr)."""
    try:
        data = FlagData.model_validate(parse_yaml(text))
    except (yaml.YAMLError, ValidationError, ValueError) as exc:
        raise KnowledgeBaseError(f"{origin}: {exc}",
                                 hint="the flag data shipped with envmgr is broken; report it") from exc
    return FlagTable(data, _index(data))


def _index(data: FlagData) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    for canon, info in data.flags.items():
        entries[canon] = Entry(canon, canon, info, info)
        for alias in info.aliases:
            span = alias if alias.model_fields_set - {"name"} else info
            entries[alias.name] = Entry(alias.name, canon, info, span)
        for neg in info.negations:
            span = neg if neg.model_fields_set - {"name"} else info
            entries[neg.name] = Entry(neg.name, canon, info, span, negation=True)
    return entries


@lru_cache(maxsize=1)
def load_flag_table() -> FlagTable:
    """The flag data shipped with envmgr (read once per process, cached across runs)."""
    return load_shipped("envmgr.compat", "sglang_flags.yaml", parse_flag_data)


# ---------------------------------------------------------------------------------------------
# Questions about flags


def canonical_flag(name: str) -> str:
    """The flag a spelling belongs to (``--tensor-parallel-size`` -> ``--tp-size``).

    A ``--no-X`` negation is its own spelling and comes back unchanged, as does a name envmgr
    does not know (prefixes are not expanded: that depends on the release).
    """
    entry = load_flag_table().entries.get(name)
    return entry.canonical if entry and not entry.negation else name


def setting(flags: Mapping[str, Any], canonical: str) -> Any:
    """The value a config gives the flag ``canonical`` (``--tp-size``) under any of its spellings:
    the name itself, an alias (``--tensor-parallel-size``), or a prefix argparse can only read as
    it in every release envmgr knows (``--tp``). None when the config does not set it."""
    names = [name for name in flags if _spelled(name) == canonical]
    if not names:
        return None
    return flags[canonical] if canonical in names else flags[names[0]]


@lru_cache(maxsize=4096)
def _spelled(name: str) -> str | None:
    """The canonical flag of a spelling, or of a prefix of spellings that all belong to one flag."""
    entries = load_flag_table().entries
    entry = entries.get(name)
    if entry is not None:
        return None if entry.negation else entry.canonical
    owners = {e.canonical for s, e in entries.items() if s.startswith(name) and not e.negation}
    return owners.pop() if len(owners) == 1 else None


def known_flags(version: str | None = None) -> set[str]:
    """Every spelling ``launch_server`` accepts at ``version`` (all releases when None)."""
    table = load_flag_table()
    parsed = parse_release(version)
    return {s for s, e in table.entries.items() if parsed is None or e.span.has(parsed)}


def parse_release(version: str | None) -> Version | None:
    """``0.5.9``, ``==0.5.9`` or ``0.5.15.post1`` as a Version; None for None."""
    if version is None:
        return None
    try:
        return Version(version.strip().removeprefix("=="))
    except InvalidVersion:
        raise ValueError(f"{version!r} is not an sglang version") from None


# ---------------------------------------------------------------------------------------------
# The check


@dataclass
class _Check:
    """State of one check_flags call: the table, the release and who said what."""

    table: FlagTable
    version: Version | None
    where: Callable[[str], str]
    problems: list[Finding]
    setting_given: dict[str, str]

    @property
    def label(self) -> str:
        return f"sglang {self.version}" if self.version else "any known sglang"

    @property
    def unsure(self) -> bool:
        # Outside the parsers read, "not known" may just be newer or older than the data.
        return self.version is not None and not self.table.verified(self.version)

    def add(self, severity: Severity, id_: str, flag: str, message: str, fix: str,
            edit: dict[str, FlagValue] | None = None) -> None:
        at = self.where(flag) if flag else ""  # a problem of the version, not of one flag
        self.problems.append(Finding(id=id_, severity=severity, message=message, fix=fix, field=at,
                                     flag=flag, edit=tuple((edit or {}).items())))

    def present(self, entry: Entry) -> bool:
        return self.version is None or entry.span.has(self.version)


def check_flags(flags: Mapping[str, FlagValue], sglang_version: str | None,
                where: Callable[[str], str] | None = None) -> list[Finding]:
    """Problems of ``flags`` (name -> value, as ``Benchmarks.flags_of`` gives) for a release.

    ``where`` turns a flag name into the spec field it came from (default: the name). With
    ``sglang_version`` None only names and kinds are checked. Errors come first.
    """
    check = _Check(load_flag_table(), None, where or (lambda name: name), [], {})
    try:
        check.version = parse_release(sglang_version)
    except ValueError as exc:
        # The version comes from a lock or a probe; a strange one must not hide the name checks.
        check.add("warning", "flag-version", "", f"{exc}: checking flag names and kinds only",
                  "give the environment an sglang version like 0.5.9")
    for name, value in flags.items():
        if value is None or value is False:
            continue  # dropped by the overlay: not on the command line
        entry = _resolve(check, name)
        if entry is not None:
            _check_one(check, name, entry, value)
    return sorted(check.problems, key=severity_rank)


def _check_one(check: _Check, name: str, entry: Entry, value: FlagValue) -> None:
    if not _check_span(check, name, entry, value):
        return
    _check_deprecated(check, name, entry)
    if _check_kind(check, name, entry, value):
        _check_type(check, name, entry, value)
        _check_choice(check, name, entry, value)
    _check_twice(check, name, entry)


def _resolve(check: _Check, name: str) -> Entry | None:
    """The entry ``name`` stands for, as argparse resolves it; reports what it cannot resolve."""
    entry = check.table.entries.get(name)
    if entry is not None:
        return entry  # a spelling envmgr knows; _check_span says if this release lacks it
    matches = _prefix_matches(check, name)
    flags = sorted({e.canonical for e in matches})
    if len(flags) == 1:
        target = min(matches, key=lambda e: len(e.spelling))
        check.add("info", "flag-abbreviated", name,
                  f"{name} is not a flag of {check.label}; argparse takes it as the abbreviation of {target.spelling}",
                  f"write {target.spelling} in full: a later sglang can add a flag that makes {name} ambiguous")
        return target
    if flags:
        # Without a release the candidates may come from different ones: not sure enough for an error.
        severity: Severity = "warning" if check.version is None else "error"
        check.add(severity, "flag-ambiguous", name,
                  f"{name} is not a flag of {check.label}, and argparse rejects it as an ambiguous "
                  f"abbreviation of {', '.join(sorted(e.spelling for e in matches))}",
                  f"write the flag you mean in full; {HELP}")
        return None
    _unknown(check, name)
    return None


def _prefix_matches(check: _Check, name: str) -> list[Entry]:
    # argparse (allow_abbrev, the default) accepts any prefix of exactly one option string.
    return [e for s, e in check.table.entries.items() if s.startswith(name) and s != name and check.present(e)]


def _unknown(check: _Check, name: str) -> None:
    spellings = [s for s, e in check.table.entries.items() if check.present(e)]
    close = difflib.get_close_matches(name, spellings, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    severity: Severity = "warning" if check.unsure else "error"
    scope = (f"{check.label} (envmgr knows the flags of sglang {check.table.first}..{check.table.last})"
             if check.unsure else check.label)
    check.add(severity, "flag-unknown", name, f"{name} is not a flag of {scope}", f"{hint}{HELP}")


def _check_span(check: _Check, name: str, entry: Entry, value: FlagValue) -> bool:
    """False (and a problem) when the spelling is not in the environment's release."""
    if check.present(entry):
        return True
    assert check.version is not None
    span, have = entry.span, f"this environment has {check.version}{_silently(check, name)}"
    other = _other_spelling(check, entry)
    # The same setting under a spelling this release has (a removed deprecated flag: what it `sets`).
    edit = {name: False, other: value} if other else None
    if span.since and check.version < Version(span.since):
        fix = f"upgrade sglang to >= {span.since}, or drop the flag"
        fix = f"write {other} (the same flag in {check.version})" if other else fix
        check.add("error", "flag-too-new", name, f"{name} appears in sglang {span.since}; {have}", fix, edit)
    elif span.removed and check.version >= Version(span.removed):
        replacement = entry.info.replacement if entry.spelling == entry.canonical else None
        fix = (f"use {other}" if other else f"use {replacement} instead" if replacement
               else "drop the flag, or pin sglang below " + span.removed)
        note = f" ({entry.info.note})" if entry.info.note else ""
        sets = entry.info.sets if entry.spelling == entry.canonical else None
        if edit is None and sets and check.present(check.table.entries[sets]):
            edit = {name: False, sets: value}
        check.add("error", "flag-removed", name, f"{name} was removed in sglang {span.removed}; {have}{note}",
                  fix, edit)
    else:
        check.add("error", "flag-missing", name, f"{name} is not a flag of sglang {check.version}{_silently(check, name)}",
                  f"write {other}" if other else f"drop the flag; {HELP}", edit)
    return False


def _silently(check: _Check, name: str) -> str:
    """What argparse makes of a spelling its release lacks: the abbreviation of the one flag it
    begins (worse than an error: silent), or an ambiguous option when it begins several."""
    matches = _prefix_matches(check, name)
    targets = {e.canonical for e in matches}
    if len(targets) > 1:
        return f", where argparse stops with 'ambiguous option: {name} could match {', '.join(sorted(targets))}'"
    if not targets:
        return ""
    target = min(matches, key=lambda e: len(e.spelling))
    return f", where argparse silently takes {name} as the abbreviation of {target.spelling}"


def _other_spelling(check: _Check, entry: Entry) -> str | None:
    """Another spelling of the same flag that the release has (an alias that came or went)."""
    if entry.negation:
        return None
    for e in check.table.entries.values():
        if e.canonical == entry.canonical and not e.negation and e is not entry and check.present(e):
            return e.spelling
    return None


def _check_deprecated(check: _Check, name: str, entry: Entry) -> None:
    info = entry.info
    if check.version is None or not info.deprecated or check.version < Version(info.deprecated):
        return
    fix = f"use {info.replacement} instead" if info.replacement else "drop the flag"
    note = f"; {info.note}" if info.note else ""
    check.add("info", "flag-deprecated", name,
              f"{name} is deprecated since sglang {info.deprecated} (still accepted by {check.version}{note})", fix)


def _check_kind(check: _Check, name: str, entry: Entry, value: FlagValue) -> bool:
    """False (and a problem) when a value is given to a bare flag or withheld from a valued one."""
    kind = entry.info.kind
    if kind == "value" and value is True:
        check.add("error", "flag-needs-value", name, f"`{name}: true` makes no sense: {name} takes a value",
                  f"give {name} a value, or drop it; {HELP}")
        return False
    if kind == "bare" and value is not True:
        check.add("error", "flag-takes-no-value", name,
                  f"`{name}: {value}` makes no sense: {name} is a switch that takes no value",
                  f"write `{name}: true` to set it, or false/null to leave it out")
        return False
    return True


def _check_type(check: _Check, name: str, entry: Entry, value: FlagValue) -> None:
    if entry.info.type is None or value is True:
        return
    convert = int if entry.info.type == "int" else float
    try:
        convert(str(value))  # argparse converts the one argv item envmgr passes
    except ValueError:
        what = "an integer" if entry.info.type == "int" else "a number"
        check.add("error", "flag-bad-value", name, f"{name} takes {what}; {value!r} is not one",
                  f"give {name} a single {entry.info.type} (envmgr passes the value as one argument)")


def _check_choice(check: _Check, name: str, entry: Entry, value: FlagValue) -> None:
    if check.version is None or value is True:
        return
    allowed = entry.info.choices_at(check.version)
    text = str(value)  # argparse compares the converted value; str() matches int choices too
    if allowed is None or text in allowed:
        return
    close = difflib.get_close_matches(text, allowed, n=1, cutoff=0.6)
    fix = f"{'did you mean ' + close[0] + '? ' if close else ''}pick one of: {', '.join(allowed)}"
    span = entry.info.choice_span(text)
    if text in {str(c) for c in entry.info.choices or []}:
        # a value of another release: its span is known, so this is certain
        when = (f"appears in sglang {span.since}" if span.since and check.version < Version(span.since)
                else f"was removed in sglang {span.removed}")
        check.add("error", "flag-bad-choice", name,
                  f"{name} {text}: the value {when}; this environment has {check.version}", fix)
        return
    check.add("warning" if check.unsure else "error", "flag-bad-choice", name,
              f"{name}: {text!r} is not one of the choices of {check.label}", fix)


def _check_twice(check: _Check, name: str, entry: Entry) -> None:
    """One setting given through two spellings: argparse silently keeps the last one."""
    setting = entry.canonical
    info = entry.info
    if info.sets and info.deprecated and check.version and check.version >= Version(info.deprecated):
        # a deprecated spelling writes its replacement's setting only from its deprecation on
        setting = info.sets
    first = check.setting_given.setdefault(setting, name)
    if first == name:
        return
    check.add("error", "flag-duplicate", name,
              f"{first} and {name} set the same thing ({setting}); sglang keeps whichever comes last",
              f"keep one of {first} and {name}")
