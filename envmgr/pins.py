"""``validate --check-index``: ask the spec's wheel sources whether each pin can be met.

A pin that no release satisfies (``nvidia-cuda-nvcc==13.0.999``) otherwise passes validate and
fails apply at its first step. Each package is looked up where apply would install it from: the
``python.sources.find_links`` directories (file names), then, unless ``offline``, the indexes
uv asks (``lock.index_urls``: ``index_url`` or PyPI, ``extra_index_urls``, ``torch_index_url``), through their Simple API
(PEP 691 JSON, else the HTML page of PEP 503; the spec refuses credentials in an index URL, so
none is asked for or printed). A package some source has no satisfying release of
is an error finding naming the nearest releases; an index that cannot be reached is a warning
(offline-aware: ``--check-index`` on a host without a network says so, never "missing").
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from envmgr.findings import Finding
from envmgr.lock import index_urls
from envmgr.spec.models import Spec

TIMEOUT_S = 15.0
SOURCES_ = ("https://peps.python.org/pep-0691/", "https://peps.python.org/pep-0503/")
Fetch = Callable[[str], bytes]  # a URL -> its body; raises OSError when it cannot be had


def versions_in(filenames: Iterable[str], name: str) -> set[Version]:
    """The releases of ``name`` among distribution file names (wheels and sdists)."""
    wanted, found = canonicalize_name(name), set()
    for filename in filenames:
        try:
            if filename.endswith(".whl"):
                project, version, *_ = parse_wheel_filename(filename)
            else:
                project, version = parse_sdist_filename(filename)
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue
        if project == wanted:
            found.add(version)
    return found


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href") if tag == "a" else None
        if href:
            self.names.append(Path(urlsplit(href).path).name)


def index_filenames(body: bytes) -> list[str]:
    """The file names an index page lists (PEP 691 JSON or PEP 503 HTML)."""
    try:
        data = json.loads(body)
    except ValueError:
        links = _Links()
        links.feed(body.decode("utf-8", "replace"))
        return links.names
    files = data.get("files") if isinstance(data, dict) else None
    return [f["filename"] for f in files or () if isinstance(f, dict) and isinstance(f.get("filename"), str)]


def http_fetch(url: str) -> bytes:
    request = urllib.request.Request(url, headers={
        "Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.1", "User-Agent": "envmgr"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 - an https index
        return response.read()


def _nearest(available: set[Version], specifier: str, count: int = 5) -> list[Version]:
    """The releases nearest the one the pin names: most leading release numbers in common,
    then newest (``==13.0.999`` -> 13.0.96, 13.0.88, ... before 13.5.37)."""
    named = re.search(r"\d+(?:\.\d+)*", specifier)
    want = tuple(int(n) for n in named.group().split(".")) if named else ()

    def common(version: Version) -> int:
        shared = 0
        for a, b in zip(version.release, want, strict=False):
            if a != b:
                break
            shared += 1
        return shared

    return sorted(available, key=lambda v: (common(v), v), reverse=True)[:count]


def check_pins(spec: Spec, fetch: Fetch = http_fetch,
               locate: Callable[[tuple[str, ...]], str | None] = lambda path: None) -> list[Finding]:
    """A finding for each package no source has a release for (every source asked), and each
    index not reached (its packages are then not judged)."""
    findings: list[Finding] = []
    unreachable: dict[str, str] = {}
    local = [p.name for d in spec.python.sources.find_links for p in Path(d).glob("*") if p.is_file()]
    indexes = index_urls(spec)  # every package is asked of every index, as uv asks them
    for name, specifier in spec.python.installed_packages.items():
        try:
            wanted = SpecifierSet(specifier)
        except InvalidSpecifier:
            continue  # the spec model refuses it; nothing to ask
        available = versions_in(local, name)
        asked = ["find-links"] if spec.python.sources.find_links else []
        for index in indexes:
            if index in unreachable:
                continue
            try:
                available |= versions_in(index_filenames(fetch(f"{index.rstrip('/')}/{quote(canonicalize_name(name))}/")), name)
                asked.append(index)
            except urllib.error.HTTPError as exc:
                if exc.code != 404:  # 404: the index has no such project (said below)
                    unreachable[index] = f"HTTP {exc.code}"
                else:
                    asked.append(index)
            except OSError as exc:
                unreachable[index] = str(getattr(exc, "reason", exc))
        if (not asked or any(i in unreachable for i in indexes)
                or any(wanted.contains(v, prereleases=True) for v in available)):
            continue
        near = _nearest(available, specifier)
        findings.append(Finding(
            id="pin-not-on-index", severity="error", field=f"python.packages.{name}", where=locate(("python", "packages", name)),
            message=f"no release of {name} satisfies {specifier or '(any)'} on {', '.join(asked)}"
                    + (f" (nearest there: {', '.join(map(str, near))})" if near else f" ({name} is not there at all)"),
            fix=f"pin a release that exists (`pip index versions {name}` lists them), or add the source that has it",
            sources=SOURCES_))
    for index, why in unreachable.items():
        findings.append(Finding(
            id="index-unreachable", severity="warning", field="python.sources",
            message=f"could not ask {index} which releases it has: {why}; its pins were not checked",
            fix="run --check-index where the index is reachable, or set python.sources.offline with find_links",
            sources=SOURCES_))
    return findings
