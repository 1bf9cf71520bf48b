"""``envmgr gc``: what old generations hold, and removing it.

Kept always: the current generation, the previous good one (what ``rollback`` would choose)
and the ``keep`` newest. Of every other generation go its directory, a venv it keeps outside
it (``realize.venv.path``) and its image, unless a kept generation uses the same image (the
same spec content builds the same tag); then the build stages Docker keeps dangling after
each build (label ``dev.envmgr.stage=build``). A fleet generation's hosts are left as they
are: only ``apply`` changes a host.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from envmgr.state import Generation, Store
from envmgr.targets import docker_engine  # imports no docker SDK until asked

DEFAULT_KEEP = 3


@dataclass(frozen=True)
class Garbage:
    kind: str  # generation | venv | image | build-stage
    what: str  # a path or an image id
    size_bytes: int
    generation: int | None = None

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
    """What ``gc`` would remove, with sizes; nothing is removed here."""
    keep_numbers = kept(store, keep)
    generations = store.generations()
    kept_images = {g.location for g in generations if g.number in keep_numbers and _kind(g) == "docker"}
    found: list[Garbage] = []
    for gen in generations:
        if gen.number in keep_numbers:
            continue
        found.append(Garbage("generation", str(gen.path), tree_size(gen.path), gen.number))
        location = gen.location
        if _kind(gen) == "venv" and location and not Path(location).is_relative_to(gen.path) and Path(location).is_dir():
            found.append(Garbage("venv", location, tree_size(Path(location)), gen.number))
        if _kind(gen) == "docker" and location and location not in kept_images:
            size = docker_engine.image_size(location)
            if size is not None:
                found.append(Garbage("image", location, size, gen.number))
                kept_images.add(location)  # two old generations of one image: removed once
    found += [Garbage("build-stage", image_id, size) for image_id, size in _build_stages()]
    return found


def collect(store: Store, items: list[Garbage], progress: Callable[[str], None]) -> int:
    """Remove ``items`` (from ``garbage``); the bytes freed."""
    freed = 0
    by_number = {g.number: g for g in store.generations()}
    for item in items:
        progress(f"removing {item.kind} {item.what} ({human(item.size_bytes)})")
        if item.kind == "generation":
            store.remove(by_number[item.generation])
        elif item.kind == "venv":
            shutil.rmtree(item.what)
        else:  # an image or a build stage
            if not docker_engine.remove_image(item.what):
                progress(f"  {item.what} is in use (a container of it exists): kept")
                continue
        freed += item.size_bytes
    return freed


def tree_size(path: Path) -> int:
    """Bytes the files under ``path`` take (hard links once, symlinks not followed)."""
    total, seen = 0, set()
    for root, _, files in os.walk(path):
        for name in files:
            try:
                stat = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_blocks * 512
    return total


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"  # pragma: no cover


def _kind(gen: Generation) -> str | None:
    return gen.meta.get("backend_kind")


def _build_stages() -> list[tuple[str, int]]:
    from envmgr.builders.dockerfile import BUILD_STAGE_LABEL

    return docker_engine.dangling_images("=".join(BUILD_STAGE_LABEL))
