"""A saved plan: ``envmgr plan SPEC -o PLAN``, then ``envmgr apply PLAN`` (terraform's
``plan -out`` / ``apply PLAN``): what was reviewed is what gets applied, or nothing is.

The file (JSON, secrets redacted) records what the plan was made against: the spec (its path and
digest), the committed lock it installs (its digest; none: apply resolves), the current
generation (its number and spec digest; none: the first), the backend URL given (none: the
spec's), and the actions and steps. ``apply PLAN`` loads the spec again and refuses the plan,
before a generation is started, when any of them changed, or when planning again under the
store's lock gives other actions or steps; otherwise it applies without asking (the plan was the
question).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envmgr.errors import StateError, UsageError
from envmgr.userfiles import write_user_file

if TYPE_CHECKING:
    from envmgr.builders.base import Step
    from envmgr.lockfile import Locked
    from envmgr.plan import Action
    from envmgr.secrets import Redactor
    from envmgr.spec.load import LoadedSpec
    from envmgr.state import Generation

FORMAT = "envmgr-plan/v1"
MAX_BYTES = 64 * 1024 * 1024  # a plan of 20,000 actions is a few MB; more is not one


@dataclass(frozen=True)
class SavedPlan:
    spec: str  # absolute path of the spec file
    spec_digest: str
    lock_digest: str | None
    generation: int | None  # the current generation it was planned from
    generation_spec_digest: str | None
    backend: str | None  # the --backend URL given, None: the spec's realize.backend
    builder: str
    actions: list[dict]
    steps: list[dict]
    format: str = FORMAT

    @classmethod
    def made(cls, loaded: LoadedSpec, lock_digest: str | None, current: Generation | None, backend: str | None,
             builder: str, actions: Sequence[Action], steps: Sequence[Step], redact: Redactor) -> SavedPlan:
        return cls(str(loaded.path.resolve()), loaded.digest, lock_digest,
                   current.number if current is not None else None,
                   str(current.meta.get("spec_digest")) if current is not None else None, backend, builder,
                   *_reviewed(actions, steps, redact))

    def write(self, path: Path, protected: Sequence[Path]) -> Path:
        """To ``path``, a file the user named: a saved plan there is replaced, anything else refused."""
        if path.exists() and not path.is_symlink() and path.is_file() and read_plan(path, quiet=True) is None:
            raise UsageError(f"{path} exists and is not a saved envmgr plan", hint="give another -o PLAN")
        return write_user_file(path, json.dumps(asdict(self), indent=2) + "\n", force=True, protected=protected,
                               what="the plan")

    def check_inputs(self, loaded: LoadedSpec, lock_digest: str | None, backend: str | None) -> None:
        """The spec, lock and backend are those it was made against (before the store is locked)."""
        if loaded.digest != self.spec_digest:
            raise StateError(f"the plan is stale: {self.spec} changed since it was made (digest "
                             f"{loaded.digest[:12]}, the plan's {self.spec_digest[:12]})",
                             hint=f"review a new one: envmgr plan {self.spec} -o PLAN")
        if lock_digest != self.lock_digest:
            raise StateError(f"the plan is stale: the committed lock changed since it was made (now "
                             f"{_short(lock_digest)}, the plan's {_short(self.lock_digest)})",
                             hint=f"review a new one: envmgr plan {self.spec} -o PLAN")
        if backend is not None and backend != self.backend:
            raise UsageError(f"the plan was made for {self.backend or 'the spec backend'}, not {backend}",
                             hint="apply it without --backend, or make a plan for that backend")

    def check_generation(self, current: Generation | None) -> None:
        """Under the store's lock: the current generation is still the one it was made from."""
        now = (current.number, str(current.meta.get("spec_digest"))) if current is not None else (None, None)
        if now != (self.generation, self.generation_spec_digest):
            raise StateError(f"the plan is stale: it was made from {_generation(self.generation)}, "
                             f"the current one now is {_generation(now[0])}",
                             hint=f"review a new one: envmgr plan {self.spec} -o PLAN")

    def check_plan(self, actions: Sequence[Action], steps: Sequence[Step], redact: Redactor) -> None:
        """Planning again gives the very actions and steps that were reviewed."""
        if _reviewed(actions, steps, redact) != (self.actions, self.steps):
            raise StateError("the plan is stale: planning again gives other changes (the environment it "
                             "was planned from changed)", hint=f"review a new one: envmgr plan {self.spec} -o PLAN")


def _reviewed(actions: Sequence[Action], steps: Sequence[Step], redact: Redactor) -> tuple[list[dict], list[dict]]:
    data = redact.data({"actions": [a.to_dict() for a in actions], "steps": [s.to_dict() for s in steps]})
    return json.loads(json.dumps(data["actions"])), json.loads(json.dumps(data["steps"]))


def _short(digest: str | None) -> str:
    return "none" if digest is None else digest[:12]


def _generation(number: int | None) -> str:
    return "no generation" if number is None else f"generation {number}"


def read_plan(path: Path, quiet: bool = False) -> SavedPlan | None:
    """The saved plan in ``path``, None when the file is not one (a spec); a file that says it is
    one but is damaged raises, unless ``quiet``."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None
        with path.open("rb") as f:
            if f.read(1) != b"{":
                return None  # YAML specs do not start with a brace; a plan always does
            data: Any = json.loads(b"{" + f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    try:
        plan = SavedPlan(**data)
        if not (isinstance(plan.spec, str) and isinstance(plan.actions, list) and isinstance(plan.steps, list)
                and (plan.generation is None or isinstance(plan.generation, int))):
            raise TypeError("wrong field types")
    except TypeError as exc:
        if quiet:
            return None
        raise StateError(f"{path}: a damaged envmgr plan ({exc})", hint="make it again: envmgr plan SPEC -o PLAN") from None
    return plan


def reviewed_inputs(saved: SavedPlan, backend: str | None, progress) -> tuple[LoadedSpec, Locked | None]:
    """The spec and lock ``apply PLAN`` applies: those the plan was made against, or it is refused."""
    from envmgr.lockfile import choose_lock
    from envmgr.spec import load_spec

    loaded = load_spec(Path(saved.spec))
    lock = choose_lock(loaded, "default", progress)
    saved.check_inputs(loaded, lock.digest if lock is not None else None, backend)
    return loaded, lock
