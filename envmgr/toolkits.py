"""CUDA toolkits as pip wheels: which wheels make a toolkit, and where it lives once installed."""

from __future__ import annotations

from pathlib import PurePath

from envmgr.spec.models import Spec


def toolkit_release(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def toolkit_requirements(version: str) -> dict[str, str]:
    """The nvidia-* wheels of a CUDA X.Y toolkit, all held to the X.Y series.

    CUDA 13 wheels dropped the -cuXX suffix and share one prefix (nvidia/cu13) with a full
    nvcc; the 12.x nvcc wheel carries only ptxas (their file listings on PyPI)."""
    major, minor = toolkit_release(version)
    series = f"=={major}.{minor}.*"
    if major >= 13:
        names = ["nvidia-cuda-nvcc", "nvidia-cuda-runtime", "nvidia-nvvm", "nvidia-cuda-crt"]
    else:
        names = [f"nvidia-cuda-nvcc-cu{major}", f"nvidia-cuda-runtime-cu{major}"]
    return {name: series for name in names}


def toolkit_home_subdir(version: str) -> str:
    """Where CUDA_HOME lies inside a ``pip install --target`` of the toolkit's wheels."""
    major, _ = toolkit_release(version)
    return f"nvidia/cu{major}" if major >= 13 else "nvidia/cuda_nvcc"


def pip_cuda_prefix(spec: Spec, venv: PurePath) -> PurePath | None:
    """The CUDA_HOME of the spec's selected toolkit when it comes from pip, else None.

    CUDA 13 wheels share one prefix (``nvidia/cu13``, with a full nvcc); the 12.x nvcc
    wheel is ``nvidia/cuda_nvcc`` and carries only ptxas.
    """
    if spec.cuda is None or spec.cuda.selected.source != "pip":
        return None
    site = venv / "lib" / f"python{spec.python.version}" / "site-packages"
    return site / toolkit_home_subdir(spec.cuda.selected.version)
