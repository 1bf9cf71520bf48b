"""envmgr/bench/cuda_errors.yaml is what CUDA's runtime library says: rebuilt here from NVIDIA's
nvidia-cuda-runtime 13.0.96 wheel (PyPI), through libcudart's own cudaGetErrorName and
cudaGetErrorString (they need no driver and no GPU), and compared with the shipped table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
WHEEL = "nvidia-cuda-runtime==13.0.96"


def test_the_shipped_table_is_what_libcudart_says(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--dest", str(tmp_path), WHEEL], check=True)
    [wheel] = tmp_path.glob("nvidia_cuda_runtime-13.0.96-*.whl")
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "cuda-errors" / "build.py"), str(wheel), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
