"""Drift: what is installed in an environment vs what its generation locked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from envmgr.lock import inherited_versions, locked_versions

# Installed by venv/image creation itself, not by the lock: never drift.
BOOTSTRAP_PACKAGES = frozenset({"pip", "setuptools", "wheel"})


@dataclass(frozen=True)
class Drift:
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (locked, installed)
    missing: dict[str, str] = field(default_factory=dict)  # locked but not installed
    extra: dict[str, str] = field(default_factory=dict)  # installed but not locked

    def __bool__(self) -> bool:
        return bool(self.changed or self.missing or self.extra)

    def lines(self) -> list[str]:
        out = [f"{n}: locked {a}, installed {b}" for n, (a, b) in sorted(self.changed.items())]
        out += [f"{n}: locked {v}, not installed" for n, v in sorted(self.missing.items())]
        out += [f"{n}: installed {v}, not in the lock" for n, v in sorted(self.extra.items())]
        return out

    def to_dict(self) -> dict:
        return {"changed": {k: {"locked": a, "installed": b} for k, (a, b) in self.changed.items()},
                "missing": self.missing, "extra": self.extra}


def compare(lock: str, installed: Mapping[str, str], provided: Mapping[str, str] | None = None) -> Drift:
    """Installed vs locked. A lock's inherited packages must be there at their recorded
    versions; what the base interpreter ``provided`` (its packages show through) is not extra."""
    locked = {**inherited_versions(lock), **locked_versions(lock)}
    base = provided or {}
    present = dict(installed)
    return Drift(
        changed={n: (v, present[n]) for n, v in locked.items() if n in present and present[n] != v},
        missing={n: v for n, v in locked.items() if n not in present},
        extra={n: v for n, v in present.items()
               if n not in locked and n not in BOOTSTRAP_PACKAGES and base.get(n) != v},
    )
