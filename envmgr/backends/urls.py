"""Backend URLs: built from parts and split back into them (no backend is imported here)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote, unquote, urlencode

from envmgr.errors import UsageError

if TYPE_CHECKING:
    from envmgr.spec.models import Spec

SCHEMES = ("local", "venv", "docker", "ansible")


def default_url(spec: Spec) -> str:
    """The backend a spec asks for in ``realize:``, built from its parts."""
    realize = spec.realize
    if realize.backend == "docker":
        return make_url("docker", realize.docker.tag or f"envmgr/{spec.metadata.name}")
    if realize.backend == "venv":
        return make_url("venv", realize.venv.path)
    if realize.backend == "ansible":  # the backend reads the inventory from the spec, relative to it
        return make_url("ansible", realize.ansible.group)
    return "local://"


def make_url(scheme: str, path: str = "", **params: str) -> str:
    """A backend URL from parts: the path is quoted (a '?' or '#' in it stays part of it),
    parameters are encoded; ``split_url`` gives the same parts back."""
    query = f"?{urlencode(params)}" if params else ""
    return f"{scheme}://{quote(path, safe='/:@')}{query}"


def split_url(url: str) -> tuple[str, str, dict[str, str]]:
    """``venv:///x?installer=pip`` -> ``("venv", "/x", {"installer": "pip"})``."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in SCHEMES:
        raise UsageError(f"not a backend URL: {url!r}",
                         hint="use local://, venv://[PATH], docker://REPOSITORY or ansible://GROUP?inventory=FILE")
    path, _, query = rest.partition("?")
    params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    return scheme, unquote(path), params
