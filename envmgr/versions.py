"""Small version helpers shared by the rules and the planner (PEP 440 via packaging)."""

from __future__ import annotations

import re

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


def exact_pin(specifier: str | None) -> str | None:
    """The version of an exact pin (``==2.9.1``), else None (ranges, wildcards)."""
    if not specifier:
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
