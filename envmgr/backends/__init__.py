"""Backends: where an environment lives, chosen by a URL.

    local://                     this host, as it is (facts and run; nothing to realize)
    venv://[PATH][?installer=pip]  a venv; without PATH one is made per generation
    docker://REPOSITORY[?base=IMAGE&wheelhouse=1]   an image built from the spec
    ansible://GROUP[?inventory=FILE&apt=online|offline&host_kind=auto|container|host&reboot=0|1]
                                 hosts provisioned by Ansible (inventory default: the spec's)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envmgr.backends.urls import SCHEMES, default_url, make_url, split_url

if TYPE_CHECKING:
    from envmgr.backends.base import Backend

__all__ = ["SCHEMES", "default_url", "make_url", "open_backend", "split_url"]

def open_backend(url: str) -> Backend:
    scheme, path, params = split_url(url)
    if scheme == "local":
        from envmgr.backends.local import LocalBackend

        return LocalBackend()
    if scheme == "venv":
        from envmgr.backends.venv import VenvBackend

        return VenvBackend(path, installer=params.get("installer", "uv"))
    if scheme == "docker":
        from envmgr.backends.docker import DockerBackend

        return DockerBackend(url)
    from envmgr.backends.ansible import AnsibleBackend

    return AnsibleBackend(url)
