"""The Docker daemon's images, for the suite's leak check and the builds' clean-up."""

from __future__ import annotations


def image_ids(api) -> set[str]:
    """Every image of the daemon, intermediate ones included."""
    return set(api.images(all=True, quiet=True))
