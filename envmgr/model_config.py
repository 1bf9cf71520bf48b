"""A model's ``config.json``, where it is readable on this host, with the language model's
``text_config`` (multimodal models) over its top level. Unknown is never bad: None."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

MAX_BYTES = 1 << 20  # a config.json is a few KB; a huge file there is not one


@functools.lru_cache(maxsize=32)  # `advise` evaluates one spec against every known release
def model_config(model_path: str) -> dict[str, Any] | None:
    try:
        with open(Path(model_path) / "config.json", "rb") as handle:
            config = json.loads(handle.read(MAX_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def int_field(config: dict[str, Any] | None, *keys: str) -> int | None:
    """The first of ``keys`` the config has as a positive integer."""
    for key in keys:
        value = (config or {}).get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
