"""Target and builder URLs: built from parts, split back into them, and parsed once into
typed parts for each scheme (no target or builder is imported here).

    local://                     this host, as it is
    venv://[PATH][?installer=pip]  a venv; without PATH the builder makes one per generation
    docker://REPOSITORY[:TAG][?base=IMAGE&wheelhouse=1]   an image (built from the spec, or run in)
    ansible://GROUP[?inventory=FILE&apt=online|offline&host_kind=auto|container|host&reboot=0|1&probe=changed|always]
                                 hosts provisioned by Ansible (inventory default: the spec's)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, quote, unquote, urlencode

from envmgr import backends
from envmgr.errors import UsageError
from envmgr.spec import models

INSTALLERS = ("uv", "pip")
REPOSITORY_RE = re.compile(models.REPOSITORY_RE)
IMAGE_REF_RE = re.compile(models.IMAGE_REF_RE)
GROUP_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
HOST_KINDS = ("auto", "container", "host")
PROBE_WHEN = ("changed", "always")


def make_url(scheme: str, path: str = "", **params: str) -> str:
    """A target or builder URL from parts: the path is percent-encoded (``url_path``), parameters
    are encoded; ``split_url`` gives the same parts back, for any path."""
    query = f"?{urlencode(params)}" if params else ""
    return f"{scheme}://{url_path(path)}{query}"


def url_path(path: str) -> str:
    """``path`` as a URL holds it: every byte but letters, digits, ``/:@_.-~`` percent-encoded,
    so a ``?``, ``#``, ``%``, space or newline stays part of the path. ``surrogateescape``: a
    file name that is not UTF-8 keeps its exact bytes."""
    return quote(path, safe="/:@", errors="surrogateescape")


def split_url(url: str) -> tuple[str, str, dict[str, str]]:
    """``venv:///x?installer=pip`` -> ``("venv", "/x", {"installer": "pip"})``."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in backends.schemes():
        raise UsageError(f"not an environment URL: {url!r}", hint=f"use {backends.forms()}")
    path, _, query = rest.partition("?")
    params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
    return scheme, unquote(path, errors="surrogateescape"), params


def venv_installer(url: str) -> str:
    """``venv://...?installer=pip`` -> ``"pip"`` (default uv)."""
    _, _, params = split_url(url)
    installer = params.get("installer", "uv")
    if installer not in INSTALLERS:
        raise UsageError(f"{url}: unknown installer {installer!r}", hint=f"use one of {', '.join(INSTALLERS)}")
    return installer


# --- docker:// ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DockerURL:
    """What a ``docker://`` URL names. Empty/None fields fall back to the spec."""

    repository: str
    tag: str | None = None  # an existing image to run in (docker://repo:tag)
    base: str | None = None
    wheelhouse: bool | None = None

    @property
    def image(self) -> str | None:
        return f"{self.repository}:{self.tag}" if self.repository and self.tag else None


def parse_docker_url(url: str) -> DockerURL:
    """``docker://envmgr/demo?base=envmgr/base:bookworm&wheelhouse=1`` -> DockerURL."""
    scheme, ref, params = split_url(url)
    if scheme != "docker":
        raise UsageError(f"not a docker:// URL: {url!r}")
    unknown = sorted(set(params) - {"base", "wheelhouse"})
    if unknown:
        raise UsageError(f"{url}: unknown parameter(s) {unknown}", hint="docker:// takes base= and wheelhouse=")
    repository, tag = _split_tag(ref)
    if repository and not REPOSITORY_RE.fullmatch(repository):
        raise UsageError(f"{url}: {repository!r} is not a docker repository name",
                         hint="lower-case path components like envmgr/cuda13 (optionally host[:port]/ first)")
    if tag is not None and not _valid_tag(tag):
        raise UsageError(f"{url}: {tag!r} is not a docker tag")
    base = params.get("base") or None
    if base is not None and not IMAGE_REF_RE.fullmatch(base):
        raise UsageError(f"{url}: base={base!r} is not an image reference (like debian:bookworm)")
    return DockerURL(repository, tag, base, _flag(params, "wheelhouse", url))


def _split_tag(ref: str) -> tuple[str, str | None]:
    # A ':' after the last '/' starts a tag; one before it belongs to host:port.
    head, slash, last = ref.rpartition("/")
    name, colon, tag = last.partition(":")
    return head + slash + name, (tag if colon else None)


def _valid_tag(tag: str) -> bool:
    return IMAGE_REF_RE.fullmatch(f"x:{tag}") is not None


def _flag(params: Mapping[str, str], name: str, url: str) -> bool | None:
    value = params.get(name)
    if value is None:
        return None
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{url}: {name}={value!r} is not a boolean", hint=f"use {name}=1 or {name}=0")



# --- ansible:// -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AnsibleURL:
    """What an ``ansible://`` URL names. Empty fields fall back to the spec's ``realize.ansible``."""

    group: str = ""
    inventory: str = ""
    apt_online: bool = True  # apt=offline: NVIDIA's repository and the mirror cannot be reached
    host_kind: str = "auto"  # auto: detect containers from the target's virtualization facts
    reboot: bool = True  # reboot a host whose loaded kernel module is not the installed driver
    probe: str = "changed"  # changed: probe an environment once (its record is reused); always: every run


def parse_ansible_url(url: str) -> AnsibleURL:
    """``ansible://gpu?inventory=hosts.yml&apt=offline`` -> AnsibleURL."""
    scheme, group, params = split_url(url)
    if scheme != "ansible":
        raise UsageError(f"not an ansible:// URL: {url!r}")
    unknown = sorted(set(params) - {"inventory", "apt", "host_kind", "reboot", "probe"})
    if unknown:
        raise UsageError(f"{url}: unknown parameter(s) {unknown}",
                         hint="ansible:// takes inventory=, apt=online|offline, host_kind=auto|container|host, "
                              "reboot=0|1, probe=changed|always")
    if group and not GROUP_RE.fullmatch(group):
        raise UsageError(f"{url}: {group!r} is not an inventory group name",
                         hint="letters, digits, '_', '-', '.'; like gpu_hosts or all")
    apt = params.get("apt", "online")
    if apt not in ("online", "offline"):
        raise UsageError(f"{url}: apt={apt!r}", hint="use apt=online or apt=offline")
    host_kind = params.get("host_kind", "auto")
    if host_kind not in HOST_KINDS:
        raise UsageError(f"{url}: host_kind={host_kind!r}", hint=f"use one of {', '.join(HOST_KINDS)}")
    reboot = params.get("reboot", "1")
    if reboot not in ("0", "1"):
        raise UsageError(f"{url}: reboot={reboot!r}", hint="use reboot=1 or reboot=0")
    probe = params.get("probe", "changed")
    if probe not in PROBE_WHEN:
        raise UsageError(f"{url}: probe={probe!r}",
                         hint="use probe=changed (probe a new environment once) or probe=always (on every run)")
    return AnsibleURL(group, params.get("inventory", ""), apt == "online", host_kind, reboot == "1", probe)
