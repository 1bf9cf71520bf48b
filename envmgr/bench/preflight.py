"""Checks of the environment a server is about to start in: what would make it fail in its
first seconds, said before the launch with the fix. Each is the pre-launch side of a triage
family (signatures.yaml): the port (``port_in_use``), /dev/shm (``shm_too_small``), free disk
for the compile and model caches (``disk_full``), the NVSwitch fabric
(``fabric_manager_not_running``). The model's heads against --tp-size is ``envmgr validate``'s
(rule ``tp-must-divide-heads``): it needs no host.

Facts are a command and a pure parser, as in ``envmgr.facts``: the environment's own Python
reports /dev/shm and the caches' file systems (a stdlib script, run with the server's env so
that FLASHINFER_WORKSPACE_BASE, TRITON_CACHE_DIR, HF_HOME count), ``nvidia-smi -q`` the
fabric state. What cannot be read is unknown, and unknown is never a finding.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from envmgr.errors import BackendError
from envmgr.findings import Finding

if TYPE_CHECKING:  # the GPU kit reads HOST_SCRIPT with a bare python3 (no pydantic there)
    from envmgr.targets.base import Runner

GIB = 1 << 30
SHM_MIN_BYTES = 1 * GIB  # Docker gives a container 64 MB; NCCL's shm transport wants far more
CACHE_MIN_FREE_BYTES = 5 * GIB  # a FlashInfer/Triton JIT build writes hundreds of MB, a model GBs
COMMAND_TIMEOUT_S = 30.0

# Where the server writes as it starts: the JIT and model caches (each tool's own variable,
# then its default under HOME), and the temporary directory. Printed as JSON: the free and
# total bytes of /dev/shm, and the free bytes of the file system of each cache (its nearest
# existing parent: a cache not created yet fills that one).
HOST_SCRIPT = r"""
import json, os
home = os.path.expanduser("~")
caches = {
    "flashinfer": os.path.join(os.environ.get("FLASHINFER_WORKSPACE_BASE", home), ".cache", "flashinfer"),
    "triton": os.environ.get("TRITON_CACHE_DIR") or os.path.join(home, ".triton", "cache"),
    "huggingface": os.environ.get("HF_HOME") or os.path.join(home, ".cache", "huggingface"),
    "tmp": os.environ.get("TMPDIR") or "/tmp",
}
def free(path):
    while path and not os.path.exists(path):
        path = os.path.dirname(path.rstrip("/")) or "/"
    st = os.statvfs(path)
    return [path, st.f_bavail * st.f_frsize]
out = {"caches": {}}
for name, path in caches.items():
    try:
        out["caches"][name] = free(path)
    except OSError:
        pass
try:
    st = os.statvfs("/dev/shm")
    out["shm"] = [st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize]
except OSError:
    out["shm"] = None
print(json.dumps(out))
"""


@dataclass(frozen=True)
class HostFacts:
    shm_total: int | None = None
    shm_free: int | None = None
    cache_free: tuple[tuple[str, str, int], ...] = ()  # (cache, the path measured, free bytes)
    fabric_states: tuple[str, ...] = ()  # nvidia-smi -q "Fabric: State" of each GPU


def host_script_argv(python: str) -> list[str]:
    return [python, "-I", "-c", HOST_SCRIPT]


def parse_host_report(text: str) -> HostFacts:
    """The host script's JSON; anything else reads as nothing known."""
    try:
        data = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return HostFacts()
    if not isinstance(data, dict):
        return HostFacts()
    shm = data.get("shm")
    total, free = (shm if isinstance(shm, list) and len(shm) == 2 and all(isinstance(v, int) for v in shm)
                   else (None, None))
    caches = []
    for name, entry in sorted((data.get("caches") or {}).items()):
        if (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and isinstance(entry[1], int)):
            caches.append((str(name), entry[0], entry[1]))
    return HostFacts(shm_total=total, shm_free=free, cache_free=tuple(caches))


FABRIC_STATE = re.compile(r"^\s*Fabric\s*\n\s*State\s*:\s*(?P<state>[^\n]+?)\s*$", re.MULTILINE)


def parse_fabric_states(nvidia_smi_q: str) -> tuple[str, ...]:
    """Each GPU's fabric state from ``nvidia-smi -q`` ("Completed", "In Progress", "N/A")."""
    return tuple(m.group("state") for m in FABRIC_STATE.finditer(nvidia_smi_q))


def port_taken(host: str, port: int) -> bool:
    """Something already answers on the port (it would be measured instead of our server)."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


# States in which CUDA initialisation fails with error 802 until the fabric manager is done
# (the fabric manager user guide: "In Progress" while it trains, "Not Started" without it).
FABRIC_NOT_READY = ("Not Started", "In Progress")


def host_findings(facts: HostFacts, gpus: int, port: int | None = None, port_busy: bool = False,
                  configs: Sequence[str] = ()) -> list[Finding]:
    """What the facts say about a launch of ``gpus`` GPUs, errors first."""
    out: list[Finding] = []
    where: dict[str, Any] = dict(configs=tuple(configs))
    if port_busy:
        out.append(Finding(
            "port-in-use", "error", f"port {port} is already in use: another server is running there",
            f"stop it (`ss -ltnp 'sport = :{port}'` shows who holds it), or give this config another --port",
            sources=("https://man7.org/linux/man-pages/man2/bind.2.html",), flag="--port", **where))
    waiting = [s for s in facts.fabric_states if s in FABRIC_NOT_READY]
    if waiting:
        out.append(Finding(
            "fabric-manager-not-ready", "error",
            f"the NVSwitch fabric is not ready ({', '.join(sorted(set(waiting)))} on {len(waiting)} GPU(s)): "
            "CUDA fails with error 802 (system not yet initialized) until the fabric manager has set it up",
            "start the fabric manager of the driver's version on the host (`systemctl enable --now "
            "nvidia-fabricmanager`) and wait for `nvidia-smi -q` to say Fabric State: Completed",
            sources=("https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html",), **where))
    if gpus > 1 and facts.shm_total is not None and facts.shm_total < SHM_MIN_BYTES:
        out.append(Finding(
            "shm-too-small", "warning",
            f"/dev/shm is {_size(facts.shm_total)} ({_size(facts.shm_free or 0)} free) for {gpus} GPUs: NCCL's "
            "shared-memory transport and torch's tensor sharing need more (`Error while creating shared "
            "memory segment`, `unable to write to file </torch_...>`)",
            "give the container a larger /dev/shm (`docker run --shm-size=16g` or `--ipc=host`; Kubernetes: "
            "an emptyDir with medium: Memory at /dev/shm)",
            sources=("https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#docker",),
            **where))
    for name, path, free in facts.cache_free:
        if free < CACHE_MIN_FREE_BYTES:
            out.append(Finding(
                "cache-disk-nearly-full", "warning",
                f"the {name} cache's file system ({path}) has {_size(free)} free: a JIT compile or a model "
                "download there fails with `No space left on device`",
                "free space there, or point the cache at a larger disk (FLASHINFER_WORKSPACE_BASE, "
                "TRITON_CACHE_DIR, HF_HOME, TMPDIR in the config's env)", **where))
    return out


def _size(n: int) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / (1 << 20):.0f} MiB"


def gather(runner: "Runner", python: str, env: Mapping[str, str]) -> HostFacts:
    """Run the two commands in the environment; a command that fails leaves its facts unknown."""
    facts = HostFacts()
    try:
        report = runner.run(host_script_argv(python), timeout=COMMAND_TIMEOUT_S, env=dict(env))
        if report.ok:
            facts = parse_host_report(report.stdout)
    except BackendError:
        pass
    try:
        smi = runner.run(["nvidia-smi", "-q"], timeout=COMMAND_TIMEOUT_S)
        if smi.ok:
            facts = replace(facts, fabric_states=parse_fabric_states(smi.stdout))
    except BackendError:
        pass
    return facts
