"""Shared by the multi-rank probes (prepended by the runner, see contract.py): worker
processes forked per rank, rendezvous through a FileStore, timeouts that kill the ranks,
and each worker's environment."""

from __future__ import annotations

import os
import time
import traceback

# The switches of NVLink multicast (NVLS). A probe sets none of them: a site that needs
# multicast off (the lent GPU machines do) says so in its spec's env, which every worker
# inherits; what the workers saw is recorded beside the results.
MULTICAST_VARS = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


def worker_env(args: dict, extra: dict | None = None) -> dict:
    """Env changes for a worker: args["env"], then ``extra``; None unsets."""
    env = {k: None if v is None else str(v) for k, v in (args.get("env") or {}).items()}
    env.update({k: None if v is None else str(v) for k, v in (extra or {}).items()})
    return env


def multicast_seen(env: dict) -> dict:
    """The multicast switches as a worker given ``env`` sees them (None: unset, the library decides)."""
    return {k: env[k] if k in env else os.environ.get(k) for k in MULTICAST_VARS}


def apply_env(env: dict) -> None:
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def count_visible(cuda_visible_devices: str | None, physical: int) -> int:
    """GPUs CUDA will show: CUDA_VISIBLE_DEVICES entries up to the first invalid one, as CUDA reads it."""
    if cuda_visible_devices is None:
        return physical
    seen: list[str] = []
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        valid_index = entry.isdigit() and int(entry) < physical
        if not (valid_index or entry.startswith(("GPU-", "MIG-"))) or entry in seen:
            break
        seen.append(entry)
    return min(len(seen), physical)


def physical_gpu_count() -> tuple[int, str]:
    """(GPUs the driver lists, how it was found), without initialising CUDA in this process."""
    import subprocess

    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount()), "nvml"
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # no nvidia-ml-py, or no driver: ask nvidia-smi
        nvml_failed = f"nvml: {type(exc).__name__}: {exc}; "
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 0, f"{nvml_failed}nvidia-smi not usable: {exc}"
    if out.returncode != 0:
        return 0, f"{nvml_failed}nvidia-smi -L exited {out.returncode}: {(out.stdout + out.stderr).strip()[:200]}"
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()), "nvidia-smi -L"


def visible_gpu_count() -> tuple[int, str]:
    physical, source = physical_gpu_count()
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        source += f", CUDA_VISIBLE_DEVICES={cvd!r}"
    return count_visible(cvd, physical), source


def torch_or_skip_reason(backend: str):
    """(torch module, None) or (None, why this probe cannot run here)."""
    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:  # ImportError, or a broken install (missing shared library)
        return None, f"torch is not importable in this environment: {type(exc).__name__}: {exc}"
    if not dist.is_available():
        return None, f"torch {torch.__version__} is built without torch.distributed"
    if backend == "nccl" and torch.version.cuda is None:
        return None, f"torch {torch.__version__} is a CPU build (torch.version.cuda is None)"
    return torch, None


def init_process_group(rank: int, world_size: int, store_path: str, backend: str):
    """Joins the group through a FileStore (no port to pick); returns the worker's device."""
    import torch
    import torch.distributed as dist

    store = dist.FileStore(store_path, world_size)
    if backend != "nccl":
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
        return torch.device("cpu")
    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    try:  # device_id creates the communicator now, so the timed loops do not include it
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, device_id=device)
    except TypeError:  # torch without device_id
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
    take_gpu_turn(store, rank)
    return device


_TURN = []  # rank 0's open lock file: the turn ends when that worker exits


def take_gpu_turn(store, rank: int) -> None:
    """Wait for this probe's turn on the GPUs, after start-up and NCCL init, before measuring.

    The runner sets ENVMGR_GPU_LOCK (a file on the host) when timing-sensitive probes start
    together: their imports and inits overlap, their measurements take turns. Rank 0 holds
    the lock until it exits (after the probe's last barrier); the other ranks wait on the
    store, on the CPU, so that no kernel of theirs spins on a GPU another probe is timing.
    """
    path = os.environ.get("ENVMGR_GPU_LOCK")
    if not path:
        return
    if rank == 0:
        import fcntl

        handle = open(path, "a")
        fcntl.flock(handle, fcntl.LOCK_EX)
        _TURN.append(handle)
        store.set("envmgr_gpu_turn", "1")
    else:
        store.wait(["envmgr_gpu_turn"])


_PARTIAL_SINK = []  # in a worker: its pipe, so report_partial can send before the end


def report_partial(result: dict) -> None:
    """Send what a worker has so far: if a later stage hangs, these numbers still come back."""
    for conn in _PARTIAL_SINK:
        conn.send({"partial": result})


def _worker_main(target, rank: int, world_size: int, store_path: str, payload: dict, conn) -> None:
    _PARTIAL_SINK.append(conn)
    try:
        apply_env(payload.get("env") or {})
        hang_rank = payload.get("_hang_rank")  # test hook: this rank never answers
        if hang_rank == rank:
            time.sleep(3600)
        result = target(rank, world_size, store_path, payload)
    except BaseException as exc:
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
    try:
        conn.send(result)
        conn.close()
    finally:
        try:  # teardown after the answer: a hang here costs only the grace period
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except BaseException:
            pass
        os._exit(0)  # skip the atexit handlers inherited from the parent


def run_workers(target, world_size: int, payload: dict, timeout_s: float, grace_s: float = 5.0) -> dict:
    """Runs ``target(rank, world_size, store_path, payload) -> dict`` in forked workers.

    Returns {"ranks": {rank: result}, "timed_out": [ranks], "wall_s"}. A rank that hangs past
    timeout_s, or past grace_s after another rank failed, is killed and gets an "error" result.
    """
    import multiprocessing
    import shutil
    import tempfile
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("fork")
    started = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="envmgr-probe-")
    procs, pending, results, partials = {}, {}, {}, {}
    try:
        for rank in range(world_size):
            reader, writer = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker_main, args=(target, rank, world_size,
                                                          os.path.join(tmp, "store"), payload, writer))
            proc.daemon = True
            proc.start()
            writer.close()  # the child's copy is the only writer: EOF means it died
            procs[rank], pending[reader] = proc, rank
        deadline = started + timeout_s
        while pending and time.monotonic() < deadline:
            for reader in wait(list(pending), timeout=max(0.0, deadline - time.monotonic())):
                rank = pending[reader]
                try:
                    message = reader.recv()
                except (EOFError, OSError):
                    procs[rank].join(1.0)
                    message = {"error": f"worker died without a result (exit code {procs[rank].exitcode})"}
                if "partial" in message:
                    partials[rank] = message["partial"]
                    continue
                del pending[reader]
                results[rank] = message
                if "error" in results[rank]:  # the others would wait in a collective forever
                    deadline = min(deadline, time.monotonic() + grace_s)
        failed = [r for r in sorted(results) if "error" in results[r]]
        silent = sorted(pending.values())
        for rank in silent:
            why = (f"after rank {failed[0]} failed" if failed
                   else f"within {timeout_s:g} s (hang; silent ranks {silent})")
            results[rank] = {"error": f"no result {why}; worker killed"}
        for rank, partial in partials.items():
            if "error" in results[rank]:
                results[rank]["partial"] = partial
        return {"ranks": results, "timed_out": silent, "wall_s": round(time.monotonic() - started, 3)}
    finally:
        stop_workers(procs, set(pending.values()), min(grace_s, 2.0))
        shutil.rmtree(tmp, ignore_errors=True)


def stop_workers(procs: dict, silent: set, exit_wait_s: float) -> None:
    """Kill the silent ranks now; the others answered and get exit_wait_s in all to exit on their own."""
    for rank in silent:
        procs[rank].kill()
    deadline = time.monotonic() + exit_wait_s
    for proc in procs.values():
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs.values():
        if proc.is_alive():
            proc.kill()
        proc.join(5.0)


def first_error(run: dict) -> str | None:
    for rank in sorted(run["ranks"]):
        if "error" in run["ranks"][rank]:
            return f"rank {rank}: {run['ranks'][rank]['error']}"
    return None


def time_us(torch, device, fn, iters: int) -> float:
    """Mean time of one fn() over iters back-to-back calls (CUDA events on a GPU)."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / iters
    begun = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - begun) * 1e6 / iters
