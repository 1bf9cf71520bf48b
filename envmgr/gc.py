"""``envmgr gc``: what old generations hold, and removing it.

Kept always: the current generation, the previous good one (what ``rollback`` would choose)
and the ``keep`` newest. Of every other generation go its directory, a venv it keeps outside
it (``realize.venv.path``) and its image, unless a kept generation uses the same image (the
same spec content builds the same tag); then the build stages Docker keeps dangling after
each build (label ``dev.envmgr.stage=build``). A fleet generation's hosts are left as they
are: only ``apply`` changes a host.

What may be removed is decided by ``envmgr.confine``: a generation's folder as the store lists
it, never through a link, never while a kept environment lies inside it; a venv outside it
only where it is provably that generation's (``generation-N``, marked by envmgr). Anything a
record names beyond that is ``refused``, with the reason, and removed by nobody.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from envmgr import confine
from envmgr.backends import recorded_target
from envmgr.state import Generation, Store
from envmgr.targets import docker_engine  # imports no docker SDK until asked
from envmgr.targets.base import LEAVES_FOLDER, LEAVES_IMAGE

DEFAULT_KEEP = 3
# Garbage kinds of what a generation's environment leaves outside its folder (Target.leaves):
# a venv made elsewhere (shown as such), an image in the engine
FOLDER, IMAGE = "venv", "image"


@dataclass(frozen=True)
class Garbage:
    kind: str  # generation | venv | image | build-stage | refused
    what: str  # a path or an image id
    size_bytes: int  # what removing it frees (files linked from elsewhere are not counted)
    generation: int | None = None
    why: str = ""  # for `refused`: why the confinement rule keeps it

    def to_dict(self) -> dict:
        return asdict(self)


def kept(store: Store, keep: int) -> set[int]:
    """The generations gc never touches: current, the previous good one, the ``keep`` newest."""
    from envmgr.apply import rollback_refusal

    generations = store.generations()
    current = store.current()
    numbers = {g.number for g in generations[-keep:]} if keep > 0 else set()
    if current is not None:
        numbers.add(current.number)
        older = [g for g in generations if g.number < current.number and rollback_refusal(g) is None]
        if older:
            numbers.add(older[-1].number)
    return numbers


def garbage(store: Store, keep: int = DEFAULT_KEEP) -> list[Garbage]:
    """What ``gc`` would remove, with sizes, and what it refuses to; nothing is removed here."""
    keep_numbers = kept(store, keep)
    generations = store.generations()
    kept_gens = [g for g in generations if g.number in keep_numbers]
    kept_images = {g.location for g in kept_gens if _leaves(g) == LEAVES_IMAGE}
    kept_places = [g.location for g in kept_gens if _leaves(g) == LEAVES_FOLDER and g.location]
    found: list[Garbage] = []
    for gen in generations:
        if gen.number in keep_numbers:
            continue
        inner = next((p for p in kept_places if confine.within(p, gen.path)), None)
        if inner is not None:
            found.append(Garbage("refused", str(gen.path), 0, gen.number,
                                 f"a kept generation's environment {inner} lies inside it"))
            continue
        found.append(Garbage("generation", str(gen.path), 0, gen.number))
        location = gen.location
        if _leaves(gen) == LEAVES_FOLDER and location and not confine.within(location, gen.path):
            why = confine.ownership_problem(store.home, gen.number, location)
            if why is None and any(confine.within(p, location) for p in kept_places):
                why = "a kept generation's environment lies inside it"
            if why is None:
                found.append(Garbage(FOLDER, location, 0, gen.number))
            elif Path(location).exists() or Path(location).is_symlink():
                found.append(Garbage("refused", location, 0, gen.number, why))
        if _leaves(gen) == LEAVES_IMAGE and location and location not in kept_images:
            size = docker_engine.image_size(location)
            if size is not None:
                found.append(Garbage(IMAGE, location, size, gen.number))
                kept_images.add(location)  # two old generations of one image: removed once
    found = _with_sizes(found)
    found += [Garbage("build-stage", image_id, size) for image_id, size in _build_stages(store)]
    return found


def collect(store: Store, items: list[Garbage], progress: Callable[[str], None]) -> int:
    """Remove ``items`` (from ``garbage``; ``refused`` ones are left); the bytes freed."""
    freed = 0
    by_number = {g.number: g for g in store.generations()}
    for item in items:
        if item.kind == "refused":
            progress(f"refused: {item.what} (generation {item.generation}): {item.why}")
            continue
        progress(f"removing {item.kind} {item.what} ({human(item.size_bytes)})")
        if item.kind == "generation" and item.generation is not None:
            store.remove(by_number[item.generation])
        elif item.kind == FOLDER:
            assert item.generation is not None
            why = confine.ownership_problem(store.home, item.generation, item.what)  # again: it may have changed
            if why is not None:
                progress(f"refused: {item.what}: {why}")
                continue
            confine.remove_tree(Path(item.what).parent, item.what, f"the venv of generation {item.generation}")
        else:  # an image or a build stage
            if not docker_engine.remove_image(item.what):
                progress(f"  {item.what} is in use (a container of it exists): kept")
                continue
        freed += item.size_bytes
    return freed


def _with_sizes(items: list[Garbage]) -> list[Garbage]:
    """Each folder's size as what removing all of them frees: a file hard-linked from elsewhere
    (uv's cache, a kept generation) frees nothing, and one linked twice is counted once."""
    trees = [Path(i.what) for i in items if i.kind in ("generation", FOLDER)]
    inodes: dict[tuple[int, int], list[int]] = {}  # (dev, ino) -> [blocks, links, links seen, first tree]
    for index, tree in enumerate(trees):
        for st in _files(tree):
            entry = inodes.setdefault((st.st_dev, st.st_ino), [st.st_blocks * 512, st.st_nlink, 0, index])
            entry[2] += 1
    sizes = [0] * len(trees)
    for blocks, links, seen, first in inodes.values():
        if seen >= links:
            sizes[first] += blocks
    out, index = [], 0
    for item in items:
        if item.kind in ("generation", FOLDER):
            item = Garbage(item.kind, item.what, sizes[index], item.generation, item.why)
            index += 1
        out.append(item)
    return out


def tree_size(path: Path) -> int:
    """Bytes the files under ``path`` take (hard links once, symlinks not followed)."""
    seen = {(st.st_dev, st.st_ino): st.st_blocks * 512 for st in _files(path)}
    return sum(seen.values())


def _files(tree: Path) -> Iterator[os.stat_result]:
    """``lstat`` of every file under ``tree`` (links not followed; vanished files skipped)."""
    for root, _, files in os.walk(tree):
        for name in files:
            try:
                yield os.lstat(os.path.join(root, name))
            except OSError:
                continue


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"  # pragma: no cover


def _leaves(gen: Generation) -> str:
    """What the generation's environment leaves outside its folder (``Target.leaves``)."""
    target = recorded_target(gen.meta.get("backend_kind"))
    return target.leaves if target is not None else ""


def _build_stages(store: Store) -> list[tuple[str, int]]:
    """The dangling build stages this store's image builds left (labelled with its id):
    another store's, or another tool's, are not this gc's to remove."""
    from envmgr.builders.dockerfile import BUILD_STAGE_LABEL, STORE_LABEL

    return docker_engine.dangling_images(["=".join(BUILD_STAGE_LABEL), f"{STORE_LABEL}={confine.store_id(store.home)}"])
