"""JSON Schema of the spec, for editors (yaml-language-server) and other tools."""

from __future__ import annotations

from typing import Any

from envmgr.spec.models import API_VERSION, Spec


def json_schema() -> dict[str, Any]:
    schema = Spec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://envmgr.dev/schema/{API_VERSION}.json"
    schema["title"] = f"envmgr environment spec ({API_VERSION})"
    return schema
