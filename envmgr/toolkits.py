"""Where a CUDA toolkit installed from pip wheels lives inside a Python environment."""

from __future__ import annotations

from pathlib import PurePath

from envmgr.spec.models import Spec


def pip_cuda_prefix(spec: Spec, venv: PurePath) -> PurePath | None:
    """The CUDA_HOME of the spec's selected toolkit when it comes from pip, else None.

    CUDA 13 wheels share one prefix (``nvidia/cu13``, with a full nvcc); the 12.x nvcc
    wheel is ``nvidia/cuda_nvcc`` and carries only ptxas.
    """
    if spec.cuda is None or spec.cuda.selected.source != "pip":
        return None
    major = int(spec.cuda.selected.version.split(".")[0])
    nvidia = venv / "lib" / f"python{spec.python.version}" / "site-packages" / "nvidia"
    return nvidia / f"cu{major}" if major >= 13 else nvidia / "cuda_nvcc"
