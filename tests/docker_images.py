"""The Docker daemon's images, for the suite's leak check and the builds' clean-up.

Removal runs once no build runs: at the end of a one-process session, or, under pytest-xdist, on
the controller after every worker is done. A worker that removed what its builds made while
another built would take that build's steps from under it: the builds share the cache (the same
base and first steps), and a step just committed is an untagged leaf with the build stage's
label, like the ones a finished build leaves ("failed to get digest sha256:...: no such file").
"""

from __future__ import annotations

from collections.abc import Iterable

from envmgr.builders.dockerfile import BUILD_STAGE_LABEL

# The build stage of envmgr's images: left dangling by every build (a failed one leaves its
# steps so far), found by its label.
BUILD_STAGE_FILTER = {"dangling": True, "label": "=".join(BUILD_STAGE_LABEL)}
# the key under which an xdist worker hands the controller what its builds made
BUILT_IMAGES = "envmgr_built_images"


def image_ids(api) -> set[str]:
    """Every image of the daemon, intermediate ones included."""
    return set(api.images(all=True, quiet=True))


def remove_image_tree(api, image: str, keep: Iterable[str]) -> list[str]:
    """Remove ``image`` (an id or a tag; all its tags), then its parents one by one, leaf first:
    the classic builder leaves an image per build step. Stops at an image in ``keep`` (there
    before), a parent with a tag, one that another image still builds on, or one that a
    container uses (Docker refuses the last two). Docker's own pruning is off (``noprune``): it would also take untagged
    parents that were there before. Returns the ids removed."""
    from docker.errors import APIError, NotFound

    keep = set(keep)
    removed: list[str] = []
    try:
        current = api.inspect_image(image)["Id"]
    except NotFound:
        return removed
    while current and current not in keep:
        info = api.inspect_image(current)
        if removed and info.get("RepoTags"):  # a parent with a name is somebody's image
            break
        parent = info.get("Parent") or None
        try:
            # force only for the image named (several tags of one image); never for a parent
            api.remove_image(current, force=not removed, noprune=True)
        except NotFound:
            pass
        except APIError:  # dependent child images, or a container: what is left stays
            break
        removed.append(current)
        current = parent
    return removed


def remove_built(api, before: set[str], refs: Iterable[str], repositories: Iterable[str]) -> list[str]:
    """Remove what the tests' builds made: the images tagged ``refs`` or in ``repositories``, the
    parents their builds made, and the build stages that appeared since ``before``."""
    from docker.errors import NotFound

    removed: list[str] = []
    named = list(refs)
    for repository in repositories:
        named += [tag for image in api.images(name=repository) for tag in image["RepoTags"] or ()
                  if tag.rpartition(":")[0] == repository]
    for ref in named:
        try:
            info = api.inspect_image(ref)
        except NotFound:
            continue
        if info["Id"] in before:  # a build that was all cache: only the name is new
            if len(info.get("RepoTags") or ()) > 1:
                api.remove_image(ref, noprune=True)  # untags; the image stays
            continue
        removed += remove_image_tree(api, info["Id"], before)
    for leaf in set(api.images(quiet=True, filters=BUILD_STAGE_FILTER)) - before:
        removed += remove_image_tree(api, leaf, before)
    return removed
