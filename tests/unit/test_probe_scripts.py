"""The single-GPU probe scripts: their pure logic, and skipping (not erring) without a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from envmgr.probes.runner import load_module, run_probe
from envmgr.targets.local import LocalTarget

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "facts"


def load(name: str):
    return load_module(name)


def test_gpu_parses_the_recorded_h200_query():
    gpu = load("gpu")
    (row,) = gpu.parse_smi((FIXTURES / "nvidia_smi_query_h200_x1.txt").read_text())
    assert row == {"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0", "memory_mib": 143771,
                   "driver": "580.159.04", "pci_bus_id": "00000000:00:06.0"}
    assert len(gpu.parse_smi((FIXTURES / "nvidia_smi_query_rtxpro6000_x8.txt").read_text())) == 8


@pytest.mark.parametrize("arch, isa", [("sm_120a", "8.7"), ("sm_120f", "8.8"), ("sm_90", "7.8"),
                                        ("sm_70", "6.0"), ("sm_100a", "8.6"), ("sm_110", "9.0")])
def test_toolchain_ptx_declares_the_lowest_isa_that_knows_the_target(arch, isa):
    ptx = load("toolchain_arch").ptx_for(arch)
    assert f".version {isa}\n.target {arch}\n" in ptx and ".entry envmgr_probe()" in ptx


def test_toolchain_reads_nvcc_and_ptxas_versions():
    tool = load("toolchain_arch")
    for name, expected in (("nvcc_version_13.0.88_pip.txt", ("13.0", "13.0.88")),
                           ("ptxas_version_12.8.93_pip_cu12.txt", ("12.8", "12.8.93"))):
        assert tool.release_of((FIXTURES / name).read_text()) == expected


@pytest.mark.parametrize("arch_list, cc, expected", [
    (["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], (9, 0), "native"),  # torch 2.11 cu130 (H200 run)
    (["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], (12, 1), None),
    (["sm_80", "sm_90", "compute_90"], (12, 0), "ptx"),
    (["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"], (12, 0), None),  # a cu126 build
])
def test_torch_arch_coverage(arch_list, cc, expected):
    assert load("torch_cuda").covered(arch_list, *cc) == expected


@pytest.mark.parametrize("probe", ["gpu", "torch_cuda", "flashinfer_jit", "flashinfer_allreduce_fusion"])
def test_without_gpu_or_libraries_the_probes_skip_with_a_reason(probe):
    result = run_probe(LocalTarget(), sys.executable, probe, {})
    assert result.status == "skip", result.summary
    assert result.summary  # the reason


class FakeNvml:
    """Two GPUs behind an NVML binding that, like nvidia-ml-py 13.615.71, exports
    NVML_P2P_CAPS_INDEX_READ as the tuple ``(0,)`` and passes the index on to ctypes."""

    NVML_P2P_CAPS_INDEX_READ = (0,)
    NVML_P2P_STATUS_OK = 0

    class NVMLError(Exception):
        pass

    def nvmlInit(self): pass
    def nvmlShutdown(self): pass
    def nvmlDeviceGetCount(self): return 2
    def nvmlDeviceGetHandleByIndex(self, i): return object()
    def nvmlSystemGetDriverVersion(self): return b"580.82.07"
    def nvmlSystemGetCudaDriverVersion_v2(self): return 13000
    def nvmlDeviceGetCudaComputeCapability(self, h): return 9, 0
    def nvmlDeviceGetName(self, h): return b"NVIDIA H200"

    def nvmlDeviceGetMemoryInfo(self, h):
        return type("Mem", (), {"total": 143771 * 2**20})()

    def nvmlDeviceGetPciInfo(self, h):
        return type("Pci", (), {"busId": b"00000000:19:00.0"})()

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        import ctypes

        ctypes.c_uint(index)  # what the real binding's ctypes call does with it
        return 0

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        raise TypeError("argument 3: TypeError: Don't know how to convert parameter 3")


def test_gpu_probe_survives_the_bindings_tuple_constant_on_two_gpus(monkeypatch):
    import sys

    gpu = load("gpu")
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    inventory = gpu.from_nvml()
    assert len(inventory["gpus"]) == 2
    assert inventory["p2p_read"] == [["X", "OK"], ["OK", "X"]]
    assert inventory["topology"][0][1].startswith("error: ")  # one pair's failure, not the probe's
