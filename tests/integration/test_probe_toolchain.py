"""toolchain_arch for real on CPU: nvcc 13.0 (pip) and ptxas 12.8 (pip) in one venv.

FACTS.md: CUDA 13.0 dropped sm_70 (`nvcc fatal : Unsupported gpu architecture 'sm_70'`);
12.8 builds sm_120a but not the family targets (sm_120f needs 12.9)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envmgr.lock import uv_binary
from envmgr.probes.runner import run_probe
from envmgr.targets.venv import VenvTarget

pytestmark = pytest.mark.integration
WHEELS = ["nvidia-cuda-nvcc==13.0.88", "nvidia-nvvm==13.0.88", "nvidia-cuda-crt==13.0.88",
          "nvidia-cuda-runtime==13.0.96", "nvidia-cuda-nvcc-cu12==12.8.93"]
ARCHS = ["sm_120a", "sm_70", "sm_90", "sm_120f"]


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("toolchain") / "venv"
    subprocess.run([uv_binary(), "venv", "--quiet", "--python", sys.executable, str(path)], check=True)
    subprocess.run([uv_binary(), "pip", "install", "--quiet", "--python", str(path / "bin" / "python"), *WHEELS],
                   check=True)
    return path


def site(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages" / "nvidia"


def probe(venv: Path, cuda_home: Path | None, archs: list[str]):
    with VenvTarget(str(venv)) as target:
        env = {"CUDA_HOME": str(cuda_home)} if cuda_home else {}
        # run_probe passes its own env; the venv target adds the venv's PATH
        target_env = target.environment
        target.environment = lambda: {**target_env(), **env}
        return run_probe(target, target.interpreter, "toolchain_arch", {"archs": archs})


def test_cuda13_nvcc_builds_sm120a_but_not_sm70(venv):
    result = probe(venv, site(venv) / "cu13", ARCHS)
    assert result.status == "pass", result.summary
    jit = result.details["tools"][0]
    assert (jit["origin"], jit["release"], jit["has_nvcc"]) == ("CUDA_HOME", "13.0", True)
    assert {a: r["ok"] for a, r in jit["archs"].items()} == {"sm_120a": True, "sm_70": False, "sm_90": True,
                                                             "sm_120f": True}
    assert "sm_70" in jit["archs"]["sm_70"]["error"]
    assert "sm_120" in jit["nvcc_gpu_code"] and "sm_70" not in jit["nvcc_gpu_code"]


def test_cuda128_ptxas_builds_sm70_and_sm120a_not_sm120f(venv):
    result = probe(venv, site(venv) / "cuda_nvcc", ["sm_70", "sm_120a", "sm_120f"])
    assert result.status == "pass"  # the target (first arch) sm_70 builds with 12.8
    jit = result.details["tools"][0]
    assert (jit["release"], jit["has_nvcc"]) == ("12.8", False)  # the cu12 wheel carries only ptxas
    assert {a: r["ok"] for a, r in jit["archs"].items()} == {"sm_70": True, "sm_120a": True, "sm_120f": False}


def test_target_sm70_fails_on_cuda13_naming_the_tool_that_can(venv):
    result = probe(venv, site(venv) / "cu13", ["sm_70"])
    assert result.status == "fail"
    assert "CUDA 13.0 ptxas (CUDA_HOME) cannot build it" in result.summary
    assert "CUDA 12.8 (pip) can" in result.summary
