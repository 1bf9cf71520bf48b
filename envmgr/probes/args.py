"""What a probe run gets from the spec: each probe's arguments and the processes' environment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envmgr.spec.models import Spec


def probe_args(spec: Spec | None, arch: str | None = None) -> dict[str, dict[str, Any]]:
    """Per-probe arguments from the spec: the target arch and the GPU count."""
    arch = arch or (spec.hardware.gpu.arch if spec else None)
    count = spec.hardware.gpu.count if spec else None
    from envmgr.bench.comm import comm_args

    args: dict[str, dict[str, Any]] = {"toolchain_arch": {"archs": [arch] if arch else []},
                                       "comm_bench": comm_args(spec)}
    if count:
        for probe in ("nccl_allreduce", "nccl_alltoall"):
            args[probe] = {"world_size": count}
        args["symm_mem"] = {"world_sizes": [count]}  # the size the spec's server runs at
    return args


def probe_env(spec: Spec | None) -> dict[str, str]:
    """The spec's env for the probe processes (site policy such as NVLink multicast off included),
    less its secrets: no probe needs a token, and a fleet's probe batch is a file on disk."""
    if spec is None:
        return {}
    from envmgr.secrets import secret_names

    secret = secret_names(spec)
    return {name: str(value) for name, value in spec.env.items() if name not in secret}
