"""``advise --write CHILD.yaml``: the spec that extends the advised one with the best move.

The file is a user's (``envmgr.userfiles``): refused when it is the spec, one it extends or the
``--from`` spec, or anything but a regular file, and written atomically.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from envmgr.compat.advise import Advice, best, child_spec
from envmgr.userfiles import check_writable, write_user_file

if TYPE_CHECKING:
    from envmgr.spec.load import LoadedSpec

WHAT = "the child spec"


def write_child(loaded: LoadedSpec, spec_path: Path, advice: list[Advice], target: Path, *, force: bool = False,
                protected: Sequence[Path] = ()) -> Path | None:
    """Write the child of ``spec_path`` that takes ``best(advice)`` to ``target``; None when no
    move clears any blocker (nothing written). An unwritable ``target`` is refused either way."""
    target = Path(os.path.abspath(target))
    guarded = [*loaded.chain, *protected]
    check_writable(target, force=force, protected=guarded, what=WHAT)
    chosen = best(advice)
    if chosen is None:
        return None
    parent = os.path.relpath(spec_path.resolve(), target.parent)  # extends: relative to the child
    name = f"{loaded.spec.metadata.name}-{chosen.suffix}"
    return write_user_file(target, yaml.safe_dump(child_spec(parent, name, chosen, loaded.spec), sort_keys=False),
                           force=force, protected=guarded, what=WHAT)
