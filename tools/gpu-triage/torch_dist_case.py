"""One real torch.distributed failure for triage, on one GPU (tools/gpu-triage/run.sh runs it):

    python torch_dist_case.py duplicate_gpu   # two NCCL ranks on one GPU: NCCL refuses
    python torch_dist_case.py port_in_use     # the TCPStore's port is taken
    python torch_dist_case.py watchdog_timeout  # an all_reduce stuck behind a busy stream: the NCCL watchdog

Each prints what torch and NCCL print; nothing is caught.
"""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _init_nccl(rank: int, world: int, port: int, **kwargs) -> None:
    """This process as NCCL rank ``rank`` on GPU 0."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", 0), **kwargs)


def _rank(rank: int, world: int, port: int) -> None:
    _init_nccl(rank, world, port)  # both ranks on GPU 0: NCCL does not allow it
    tensor = torch.ones(1, device="cuda")
    dist.all_reduce(tensor)
    torch.cuda.synchronize()
    print(f"rank {rank}: all_reduce gave {tensor.item()}", flush=True)
    dist.destroy_process_group()


def _watchdog_timeout() -> None:
    """One NCCL rank whose all_reduce waits behind a kernel that spins for ~30 s, with a 5 s
    timeout: torch's watchdog times the collective out and tears the process down."""
    from datetime import timedelta
    _init_nccl(0, 1, _free_port(), timeout=timedelta(seconds=5))
    tensor = torch.ones(1, device="cuda")
    dist.all_reduce(tensor)  # the communicator is up
    torch.cuda.synchronize()
    torch.cuda._sleep(60_000_000_000)  # ~30 s of GPU clock cycles on the current stream
    dist.all_reduce(tensor)  # NCCL's stream waits for it
    torch.cuda.synchronize()
    print("all_reduce finished (no timeout)", flush=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(case: str) -> None:
    if case == "duplicate_gpu":
        mp.spawn(_rank, args=(2, _free_port()), nprocs=2)
    elif case == "port_in_use":
        holder = socket.socket()
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=0, world_size=1)
    elif case == "watchdog_timeout":
        _watchdog_timeout()
    else:
        raise SystemExit(f"unknown case {case!r}")


if __name__ == "__main__":
    main(sys.argv[1])
