"""Small version helpers shared by the spec, the rules and the planner (PEP 440 via packaging).

A version that reaches packaging must be of a sane size (``version_size_problem``): the spec
refuses bigger ones, and these helpers treat one from elsewhere as no version at all."""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

# Sizes no real release comes near (the longest on PyPI's GPU stack are like
# 0.6.8.post1, 2.11.0+cu130, 2025.9.1 or 580.95.05): packaging turns every number of a version
# into an int, which Python refuses past 4300 digits, and a spec is checked against these
# before any of its versions is parsed.
MAX_VERSION_CHARS = 64
MAX_RELEASE_DIGITS = 10
MAX_SPECIFIER_CHARS = 256  # a few clauses: '>=2.9,<2.10,!=2.9.3'

_RELEASE = re.compile(r"\s*v?(?:[0-9]+!)?([0-9]+(?:\.[0-9]+)*)", re.IGNORECASE)
_OPERATOR = re.compile(r"^\s*(?:===|==|!=|~=|<=|>=|<|>)?\s*")


def version_size_problem(version: str) -> str | None:
    """Why ``version`` is too big to be a real one (too long, a release number of too many
    digits), or None. Says so in words a spec error can show."""
    if len(version) > MAX_VERSION_CHARS:
        return (f"a version of {len(version):,} characters ({_start(version)}): envmgr takes versions of "
                f"at most {MAX_VERSION_CHARS} characters")
    release = _RELEASE.match(version)
    for number in release.group(1).split(".") if release else ():
        if len(number) > MAX_RELEASE_DIGITS:
            return (f"{_start(version)} has a release number of {len(number)} digits: envmgr takes at most "
                    f"{MAX_RELEASE_DIGITS} digits per number")
    return None


def specifier_size_problem(specifier: str) -> str | None:
    """``version_size_problem`` of a PEP 440 specifier (a bare version, or comma-separated
    clauses like ``>=2.9,<2.10``): each clause's version, then the whole length."""
    for clause in specifier.split(","):
        problem = version_size_problem(_OPERATOR.sub("", clause, count=1).strip())
        if problem:
            return problem
    if len(specifier) > MAX_SPECIFIER_CHARS:
        return (f"a specifier of {len(specifier):,} characters ({_start(specifier)}): envmgr takes "
                f"specifiers of at most {MAX_SPECIFIER_CHARS} characters")
    return None


def _start(text: str) -> str:
    """The first characters of a long value, quoted."""
    return repr(text) if len(text) <= 24 else repr(text[:20]) + "..."


def exact_pin(specifier: str | None) -> str | None:
    """The version of an exact pin (``==2.9.1``), else None (ranges, wildcards)."""
    if not specifier:
        return None
    if specifier_size_problem(specifier):
        return None
    try:
        specs = list(SpecifierSet(specifier))
    except InvalidSpecifier:
        return None
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        try:  # `===weird` is legal PEP 440 but no version the rules can compare
            return str(Version(specs[0].version))
        except InvalidVersion:
            return None
    return None


def lowest_version(specifier: str) -> str | None:
    """The lowest version a specifier allows, from its ==, ===, >=, ~= bounds."""
    if specifier_size_problem(specifier):
        return None
    try:
        bounds = [s.version for s in SpecifierSet(specifier)
                  if s.operator in ("==", "===", ">=", "~=") and "*" not in s.version]
        return max(bounds, key=Version) if bounds else None
    except (InvalidSpecifier, InvalidVersion):
        return None


def local_cuda_tag(version: str | None) -> str | None:
    """``2.9.1+cu128`` -> ``cu128``; None without such a local part."""
    if not version or "+" not in version:
        return None
    local = version.split("+", 1)[1]
    return local if re.fullmatch(r"cu[0-9]{3}", local) else None


def release(version: str) -> str:
    """``13.0.2`` -> ``13.0``."""
    return ".".join(version.split(".")[:2])


def major(version: str | None) -> str | None:
    return version.split(".", 1)[0] if version else None
