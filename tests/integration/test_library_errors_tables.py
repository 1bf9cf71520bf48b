"""envmgr/bench/cuda_errors.yaml and nvml_errors.yaml are what the libraries say: rebuilt here from
NVIDIA's wheels on PyPI (libcudart's own cudaGetErrorName and cudaGetErrorString, which need no
driver and no GPU; nvml.h; pynvml's table) and compared with the shipped tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
WHEELS = {"nvidia_cuda_runtime-13.0.96-*.whl": "nvidia-cuda-runtime==13.0.96",
          "nvidia_nvml_dev_cu12-12.9.79-*.whl": "nvidia-nvml-dev-cu12==12.9.79",
          "nvidia_ml_py-13.615.71-*.whl": "nvidia-ml-py==13.615.71"}


def test_the_shipped_tables_are_what_the_libraries_say(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--dest", str(tmp_path), *WHEELS.values()], check=True)
    wheels = [str(next(tmp_path.glob(pattern))) for pattern in WHEELS]
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "library-errors" / "build.py"), *wheels, "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
