"""What a target has now, as plain data. Collected by ``envmgr.facts.collect``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GpuFact(_Data):
    index: int
    name: str
    compute_capability: str = Field(description="'12.0', '9.0'")
    memory_mib: int | None = None
    pci_bus_id: str | None = None

    @property
    def arch(self) -> str:
        """``'12.0'`` -> ``'sm_120'``."""
        major, minor = self.compute_capability.split(".", 1)
        return f"sm_{major}{minor}"


class ToolkitFact(_Data):
    path: str = Field(description="/usr/local/cuda-13.0 or a pip wheel's prefix")
    version: str | None = Field(None, description="'13.0.2' from version.json, or the nvcc release")
    source: Literal["system", "pip"] = "system"


class CompilerFact(_Data):
    """One nvcc or ptxas binary and the release it reports."""

    path: str
    kind: Literal["nvcc", "ptxas"]
    version: str = Field(description="Full version, e.g. '13.0.88'")
    release: str = Field(description="Major.minor, e.g. '13.0'")
    origin: str = Field(
        description="How it was found: FLASHINFER_NVCC, CUDA_HOME, CUDA_PATH, PATH, "
        "/usr/local/cuda, toolkit, pip:<package>"
    )


class PythonFact(_Data):
    executable: str
    version: str = Field(description="'3.12.3'")
    packages: dict[str, str] = Field(default_factory=dict, description="canonical name -> version")


# How FlashInfer's JIT finds nvcc (flashinfer/jit/cpp_ext.py), the order every part of envmgr
# that asks "which nvcc" uses: the facts' search script prints its finds with these origins.
JIT_NVCC_ORDER = ("FLASHINFER_NVCC", "CUDA_HOME", "CUDA_PATH", "PATH", "/usr/local/cuda")


class Facts(_Data):
    """A snapshot of a target. A fact that could not be collected is None/empty,
    with the reason in ``missing``."""

    driver_version: str | None = None
    cuda_driver_version: str | None = Field(None, description="CUDA version the driver supports")
    nvml_error: str | None = Field(None, description="e.g. 'Driver/library version mismatch'")
    kernel_module: str | None = Field(None, description="'open' or 'proprietary' (/proc/driver/nvidia/version)")
    gpus: list[GpuFact] = Field(default_factory=list)
    toolkits: list[ToolkitFact] = Field(default_factory=list)
    cuda_link: str | None = Field(None, description="Target of /usr/local/cuda")
    compilers: list[CompilerFact] = Field(default_factory=list)
    python: PythonFact | None = None
    env: dict[str, str] = Field(default_factory=dict)
    missing: dict[str, str] = Field(default_factory=dict, description="fact -> why it is absent")

    def jit_nvcc(self) -> CompilerFact | None:
        """The nvcc FlashInfer's JIT would use: FLASHINFER_NVCC, CUDA_HOME, CUDA_PATH,
        PATH, then /usr/local/cuda (flashinfer jit/cpp_ext.py lookup order)."""
        nvccs = [c for c in self.compilers if c.kind == "nvcc"]
        for origin in JIT_NVCC_ORDER:
            for c in nvccs:
                if c.origin == origin:
                    return c
        return None
