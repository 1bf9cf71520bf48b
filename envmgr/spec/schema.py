"""JSON Schema of the spec, for editors (yaml-language-server) and other tools.

``envmgr schema`` prints ``schema.json``, written from the models by
``python -m envmgr.spec.schema --write`` (a test fails when it differs from the models), so
the command needs neither pydantic nor the models at run time.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

SHIPPED = "schema.json"


def json_schema() -> dict[str, Any]:
    """The schema generated from the pydantic models."""
    from envmgr.spec.models import API_VERSION, Spec

    schema = Spec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://envmgr.dev/schema/{API_VERSION}.json"
    schema["title"] = f"envmgr environment spec ({API_VERSION})"
    return schema


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2) + "\n"


def shipped_schema_text() -> str:
    """What ``envmgr schema`` prints: the pre-generated file."""
    return resources.files("envmgr.spec").joinpath(SHIPPED).read_text(encoding="utf-8")


if __name__ == "__main__":  # python -m envmgr.spec.schema --write
    text = render(json_schema())
    if sys.argv[1:] == ["--write"]:
        Path(__file__).with_name(SHIPPED).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
