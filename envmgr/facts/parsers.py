"""Pure parsers: the text a fact command printed -> plain data. No I/O here.

Convention: a parser returns ``None`` (or an empty value) when the text simply does not
carry the fact, and raises ``FactsError`` when the text is not what the command prints.
Nothing else escapes: the collector turns a ``FactsError`` into ``Facts.missing``.
Each parser is tested on recorded outputs in ``tests/fixtures/facts/``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from envmgr.errors import FactsError
from envmgr.facts.model import GpuFact, PythonFact, ToolkitFact
from envmgr.secrets import REDACTED, looks_secret
from envmgr.spec.models import canonical_name

# --- nvidia-smi ---------------------------------------------------------------------------

# The columns of the query the collector runs, in order (see collect.NVIDIA_SMI_QUERY).
NVIDIA_SMI_QUERY_FIELDS = ("index", "name", "compute_cap", "memory.total", "driver_version", "pci.bus_id")

_COMPUTE_CAP_RE = re.compile(r"^\d+\.\d+$", re.ASCII)
_DRIVER_VERSION_RE = re.compile(r"^\d+(\.\d+)+$", re.ASCII)
_NUMBER_RE = re.compile(r"^\d+$", re.ASCII)


def parse_nvidia_smi_query(text: str) -> tuple[str | None, list[GpuFact]]:
    """``nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version,pci.bus_id
    --format=csv,noheader,nounits`` -> (driver version, GPUs). Empty text -> (None, [])."""
    gpus: list[GpuFact] = []
    drivers: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        driver, gpu = _parse_gpu_line(line, number)
        drivers.add(driver)
        gpus.append(gpu)
    if len(drivers) > 1:
        raise FactsError(f"nvidia-smi reports several driver versions: {sorted(drivers)}")
    return (drivers.pop() if drivers else None), gpus


def _parse_gpu_line(line: str, number: int) -> tuple[str, GpuFact]:
    fields = [field.strip() for field in line.split(",")]
    if len(fields) < len(NVIDIA_SMI_QUERY_FIELDS):
        raise FactsError(
            f"nvidia-smi query line {number}: expected {len(NVIDIA_SMI_QUERY_FIELDS)} fields "
            f"({','.join(NVIDIA_SMI_QUERY_FIELDS)}), got {line!r}"
        )
    # No quoting in nvidia-smi's csv: a comma in the name would split it, so take the
    # fixed fields from both ends and give the name what is left.
    index, *name_parts, compute_cap, memory, driver, bus_id = fields
    name = ", ".join(name_parts)
    if not _NUMBER_RE.match(index):
        raise FactsError(f"nvidia-smi query line {number}: GPU index {index!r} is not a number")
    if not _COMPUTE_CAP_RE.match(compute_cap):
        raise FactsError(
            f"nvidia-smi query line {number}: compute capability {compute_cap!r} is not MAJOR.MINOR "
            "(drivers older than 510 cannot report compute_cap)"
        )
    if not _DRIVER_VERSION_RE.match(driver):
        raise FactsError(f"nvidia-smi query line {number}: driver version {driver!r} is not a version")
    gpu = GpuFact(
        index=int(index),
        name=name,
        compute_capability=compute_cap,
        memory_mib=int(memory) if _NUMBER_RE.match(memory) else None,  # '[N/A]' on unified-memory parts
        pci_bus_id=bus_id or None,
    )
    return driver, gpu


# What nvidia-smi prints when it cannot talk to the driver, -> the nvml_error we record.
_NVML_FAILURES = (
    # After a driver upgrade without a module reload: the reason is e.g. 'Driver/library version mismatch'.
    re.compile(r"Failed to initialize NVML: (?P<reason>[^\r\n]+)"),
    re.compile(r"NVIDIA-SMI has failed because it (?P<reason>couldn't communicate with the NVIDIA driver)"),
)


def parse_nvidia_smi_error(text: str) -> str | None:
    """nvidia-smi's output when it failed -> the NVML error, or None when not recognised."""
    for pattern in _NVML_FAILURES:
        match = pattern.search(text)
        if match:
            return match.group("reason").strip().rstrip(".")
    return None


# 'CUDA Version: 13.0' in the banner; drivers >= 610 print 'CUDA UMD Version: 13.3'.
_BANNER_CUDA_RE = re.compile(r"CUDA (?:UMD )?Version:\s*(\d+\.\d+)", re.ASCII)


def parse_cuda_version_from_smi(text: str) -> str | None:
    """The plain ``nvidia-smi`` banner -> the CUDA version the driver supports ('13.0')."""
    match = _BANNER_CUDA_RE.search(text)
    return match.group(1) if match else None


# /proc/driver/nvidia/version: 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05 ...'
# (open modules) or 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06 ...' (proprietary).
_NVRM_RE = re.compile(r"^NVRM version:.*?\b(?P<open>Open )?Kernel Module\b", re.MULTILINE | re.ASCII)


def parse_kernel_module(text: str) -> str | None:
    """The loaded NVIDIA kernel module's flavour: 'open', 'proprietary', or None if unreadable."""
    match = _NVRM_RE.search(text)
    if match is None:
        return None
    return "open" if match.group("open") else "proprietary"


# --- nvcc / ptxas -------------------------------------------------------------------------

# 'Cuda compilation tools, release 13.0, V13.0.88': nvcc and ptxas print the same line.
_NVCC_RELEASE_RE = re.compile(
    r"Cuda compilation tools, release (\d+\.\d+), V(\d+\.\d+(?:\.\d+)*)", re.ASCII
)


def parse_nvcc_version(text: str) -> tuple[str, str]:
    """``nvcc --version`` or ``ptxas --version`` -> (version '13.0.88', release '13.0')."""
    match = _NVCC_RELEASE_RE.search(text)
    if not match:
        head = text.strip().splitlines()[:1]
        raise FactsError(
            "no 'Cuda compilation tools, release X.Y, VX.Y.Z' line in --version output"
            + (f" (starts with {head[0][:80]!r})" if head else " (empty output)")
        )
    release, version = match.groups()
    return version, release


# --- toolkit listing ----------------------------------------------------------------------


def parse_toolkit_listing(text: str) -> tuple[list[ToolkitFact], str | None]:
    """The toolkit-listing script's output (see ``collect.TOOLKIT_LISTING_SCRIPT``) ->
    (toolkits, target of /usr/local/cuda). Lines, tab-separated:

        link<TAB>/usr/local/cuda-13.0           where /usr/local/cuda points (resolved)
        toolkit<TAB>/usr/local/cuda-13.0<TAB>13.0.2   a toolkit directory and its version ('' if unknown)

    A directory reached through several names (cuda, cuda-13, cuda-13.0) is listed once.
    """
    toolkits: dict[str, ToolkitFact] = {}
    link: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        tag, _, rest = line.partition("\t")
        if tag == "link" and rest:
            link = rest
        elif tag == "toolkit" and rest:
            path, _, version = rest.partition("\t")
            toolkits.setdefault(path, ToolkitFact(path=path, version=version or None, source="system"))
        else:
            raise FactsError(f"toolkit listing line {number}: unexpected {line[:120]!r}")
    return list(toolkits.values()), link


# --- python -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PipCudaTool:
    """An nvcc or ptxas shipped by a pip wheel, found through the wheel's RECORD."""

    kind: str  # 'nvcc' | 'ptxas'
    path: str
    package: str  # canonical name, 'nvidia-cuda-nvcc'


def parse_python_info(text: str) -> PythonFact:
    """The python-info script's JSON -> PythonFact (package names canonical, PEP 503)."""
    data = _python_info_json(text)
    executable, version, packages = data.get("executable"), data.get("version"), data.get("packages")
    if not isinstance(executable, str) or not isinstance(version, str) or not isinstance(packages, dict):
        raise FactsError("python info: needs 'executable' and 'version' strings and a 'packages' object")
    canonical: dict[str, str] = {}
    for name, package_version in packages.items():
        if not isinstance(package_version, str):
            raise FactsError(f"python info: version of {name!r} is not a string: {package_version!r}")
        canonical.setdefault(canonical_name(name), package_version)  # first on sys.path wins
    return PythonFact(executable=executable, version=version, packages=canonical)


def parse_pip_cuda_tools(text: str) -> list[PipCudaTool]:
    """The python-info script's JSON -> the nvcc/ptxas binaries pip wheels installed."""
    data = _python_info_json(text)
    tools = data.get("cuda_tools", [])
    if not isinstance(tools, list):
        raise FactsError("python info: 'cuda_tools' is not a list")
    found = []
    for tool in tools:
        if not isinstance(tool, dict) or tool.get("kind") not in ("nvcc", "ptxas"):
            raise FactsError(f"python info: unexpected cuda_tools entry {tool!r}")
        path, package = tool.get("path"), tool.get("package")
        if not isinstance(path, str) or not isinstance(package, str):
            raise FactsError(f"python info: cuda_tools entry needs 'path' and 'package': {tool!r}")
        found.append(PipCudaTool(kind=tool["kind"], path=path, package=canonical_name(package)))
    return found


def _python_info_json(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise FactsError(f"python info is not JSON: {exc}") from exc
    except RecursionError as exc:
        raise FactsError("python info is not JSON: nested too deeply") from exc
    if not isinstance(data, dict):
        raise FactsError(f"python info is not a JSON object: {text[:80]!r}")
    return data


# --- environment --------------------------------------------------------------------------

# The variables that change what CUDA, NCCL, FlashInfer, torch and SGLang do.
RELEVANT_ENV_NAMES = ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES")
RELEVANT_ENV_PREFIXES = ("CUDA_", "NCCL_", "FLASHINFER_", "TORCH_", "SGLANG_", "NVSHMEM_")
# Facts are stored in generations and reports: never keep what looks like a credential
# (envmgr.secrets: the one rule of what does).


def parse_env(text: str) -> dict[str, str]:
    """``env -0`` output (NUL-terminated NAME=VALUE entries) -> the variables that matter."""
    if not text:
        return {}
    if not text.endswith("\0"):
        raise FactsError("env output is not NUL-separated (does this env support -0?)")
    relevant: dict[str, str] = {}
    for entry in text[:-1].split("\0"):
        name, sep, value = entry.partition("=")
        if not sep or not name:
            continue  # not NAME=VALUE: nothing we could use
        if name in RELEVANT_ENV_NAMES or name.startswith(RELEVANT_ENV_PREFIXES):
            relevant[name] = REDACTED if looks_secret(name) else value
    return relevant
