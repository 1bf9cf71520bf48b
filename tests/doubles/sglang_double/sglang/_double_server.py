"""TEST DOUBLE of ``python -m sglang.launch_server``: replays a scenario's log, serves real HTTP.

Process layout as SGLang's: the launcher (tokenizer manager + uvicorn in SGLang) starts the
scheduler as a ``multiprocessing`` spawn child in its own process group (no new session), waits
for it on a pipe, then brings up HTTP, sends the same warmup requests SGLang's
``_execute_server_warmup`` sends (GET /get_model_info, POST /generate "The capital city of
France is", 8 tokens) and logs "The server is fired up and ready to roll!".

A failing scheduler prints its traceback and sends SIGQUIT to the launcher, whose handler logs
"Received sigquit from a child process..." and kills the process tree, itself included, with
SIGKILL (engine.py sigquit_handler -> kill_process_tree): the launch ends with returncode -9.
SIGTERM/SIGINT end it cleanly with exit code 0, as uvicorn's shutdown does.

Deviation, on purpose: the HTTP port is bound at start (503 to everything, no access log) so
tests can poll it from the first second; real SGLang opens it only after the scheduler is up.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
import urllib.request

from sglang import _double_scenarios as sc
from sglang._double_http import DoubleState, make_server, stamp


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    parser.add_argument("--model-path", "--model", required=True)
    parser.add_argument("--served-model-name")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--mem-fraction-static", type=float)
    parser.add_argument("--tp-size", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    parser.add_argument("--ep-size", "--expert-parallel-size", dest="ep_size", type=int, default=1)
    parser.add_argument("--moe-a2a-backend", default="none")
    parser.add_argument("--moe-runner-backend", default="auto")
    parser.add_argument("--cuda-graph-max-bs", type=int)
    parser.add_argument("--speculative-algorithm")
    for flag in ("--trust-remote-code", "--disable-cuda-graph", "--disable-custom-all-reduce",
                 "--enable-torch-symm-mem"):
        parser.add_argument(flag, action="store_true")
    # Every other real flag (--speculative-*, --enable-dp-attention, ...) is accepted unread.
    args, _unknown = parser.parse_known_args(argv)
    return args


def launch_values(args: argparse.Namespace, fraction: float) -> dict[str, object]:
    """What the log lines' ${...} hold: python reprs, as ServerArgs' repr prints them."""
    a2a = args.moe_a2a_backend == "flashinfer"
    return {
        "model_path": repr(args.model_path),
        "served_model_name": repr(args.served_model_name or args.model_path),
        "host": repr(args.host), "host_plain": args.host, "port": args.port,
        "mem_fraction_static": fraction, "tp_size": args.tp_size,
        # ServerArgs sets ep_size = tp_size for the FlashInfer A2A backend before printing
        "ep_size": args.tp_size if a2a else args.ep_size,
        "moe_a2a_backend": repr(args.moe_a2a_backend),
        "moe_runner_backend": repr(args.moe_runner_backend),
        "cuda_graph_max_bs": args.cuda_graph_max_bs or 512,
        "disable_cuda_graph": args.disable_cuda_graph,
        "disable_custom_all_reduce": args.disable_custom_all_reduce,
        "enable_torch_symm_mem": args.enable_torch_symm_mem,
        "trust_remote_code": args.trust_remote_code,
        "speculative_algorithm": repr(args.speculative_algorithm) if args.speculative_algorithm else None,
        "pid": os.getpid(),
    }


# --- the scheduler child -----------------------------------------------------------------------

def run_scheduler_process(scenario_name: str, values: dict, tp_size: int, fraction: float,
                          max_bs: int, writer, parent_pid: int) -> None:
    """Stands for SGLang's run_scheduler_process on every TP rank at once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the launcher, which kills us
    held = _hold_gpu_memory()  # noqa: F841 - kept alive as long as this "rank" is
    scenario = sc.SCENARIOS[scenario_name]
    sections = sc.read_sections(scenario.log)
    part = lambda name: sc.select_ranks(sections.get(name, []), tp_size)  # noqa: E731
    lines = part("scheduler")
    sc.play(lines, values)
    if scenario.extra:
        sc.play(part(scenario.extra), values)
    if scenario.flow == "hang":
        _idle(parent_pid)
    if scenario.flow == "crash_exit":
        _fail(part("crash"), values, parent_pid)
    total, available = sc.memory_numbers(lines)
    pool = sc.kv_pool(total, available, fraction, max_bs)
    if pool is None:
        _fail(part("kv_oom"), values, parent_pid)
    values.update(pool)
    sc.play(part("memory_pool"), values)
    if scenario.flow == "crash_stay":
        # SCENARIO.md EP launch 2: the traceback is in the log, the server never answers.
        sc.play(part("crash"), values)
        _idle(parent_pid)
    writer.send({"status": "ready", "max_total_num_tokens": pool["kv_tokens"],
                 "max_req_input_len": sc.CONTEXT_LEN - 5})
    _idle(parent_pid)


def _hold_gpu_memory():
    """SGLANG_DOUBLE_GPU_GB=N: hold N GB of real GPU memory, as a rank holds its weights, so a
    GPU test can see that teardown gives it back (needs torch and a GPU)."""
    gigabytes = float(os.environ.get("SGLANG_DOUBLE_GPU_GB", "0") or 0)
    if gigabytes <= 0:
        return None
    import torch

    return torch.empty(int(gigabytes * 2**30), dtype=torch.uint8, device="cuda")


def _fail(lines: list[str], values: dict, parent_pid: int) -> None:
    # scheduler.py: logger.error(f"Scheduler hit an exception: {traceback}");
    # parent_process.send_signal(signal.SIGQUIT)
    sc.play(lines, values)
    os.kill(parent_pid, signal.SIGQUIT)
    _idle(parent_pid)


def _idle(parent_pid: int) -> None:
    """Stay alive (as a hung or crashed rank does) until the launcher is gone."""
    while os.getppid() == parent_pid:
        time.sleep(0.2)
    os._exit(0)


# --- the launcher ------------------------------------------------------------------------------

class Launcher:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.scenario = sc.scenario_from_env()
        self.sections = sc.read_sections(self.scenario.log)
        fraction = args.mem_fraction_static or self.scenario.default_fraction
        self.fraction = fraction
        self.values = launch_values(args, fraction)
        self.state = DoubleState(args, self.values)
        self.child: mp.process.BaseProcess | None = None

    def play(self, name: str, stream=None, paced: bool = True) -> None:
        lines = sc.select_ranks(self.sections.get(name, []), self.args.tp_size)
        if paced:
            sc.play(lines, self.values, stream)
        else:
            for line in lines:
                self.state.log(sc.render(line, self.values), stream)

    def run(self) -> None:
        server = self._bind()
        threading.Thread(target=server.serve_forever, daemon=True).start()
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGQUIT, self._on_sigquit)
        self.play("launch")
        info = self._start_scheduler()
        self.state.scheduler_info = info
        self.play("uvicorn")
        self.state.phase = "starting"
        if self.scenario.flow == "warmup_hang":
            self._model_info()
            while True:  # the warmup /generate never comes back; uvicorn keeps answering 503
                time.sleep(3600)
        try:
            self._warmup()
        except Exception:  # http_server.py: log it, then kill_process_tree(os.getpid())
            self.state.log(f"{stamp()} Initialization failed. warmup error: {traceback.format_exc()}")
            self._kill_child()
            os.kill(os.getpid(), signal.SIGKILL)
        self.state.phase = "ready"
        self.play("ready")
        while True:
            time.sleep(3600)

    def _bind(self):
        try:
            return make_server(self.state, self.args.host, self.args.port)
        except OSError as exc:
            # uvicorn's message for a taken port, then exit 1
            self.state.log(f"{stamp()} ERROR:    [Errno {exc.errno}] error while attempting to bind "
                           f"on address ({self.args.host!r}, {self.args.port}): "
                           f"{(exc.strerror or str(exc)).lower()}")
            sys.exit(1)

    def _start_scheduler(self) -> dict:
        ctx = mp.get_context("spawn")  # SGLang: mp.set_start_method("spawn", force=True)
        reader, writer = ctx.Pipe(duplex=False)
        self.child = ctx.Process(
            target=run_scheduler_process,
            args=(self.scenario.name, dict(self.values), self.args.tp_size, self.fraction,
                  self.args.cuda_graph_max_bs or 512, writer, os.getpid()))
        self.child.start()
        writer.close()
        try:
            return reader.recv()
        except EOFError:
            # engine.py _launch_subprocesses, when a scheduler dies without a word
            self.state.log(f"{stamp()} Rank 0 scheduler is dead. Please check if there are "
                           "relevant logs.")
            self.child.join(5)
            self.state.log(f"{stamp()} Exit code: {self.child.exitcode}")
            sys.exit(1)

    def _model_info(self) -> None:
        url = f"http://{self.args.host}:{self.args.port}"
        with urllib.request.urlopen(url + "/get_model_info", timeout=5) as res:
            json.load(res)

    def _warmup(self) -> None:
        url = f"http://{self.args.host}:{self.args.port}"
        self._model_info()
        body = json.dumps({"sampling_params": {"temperature": 0, "max_new_tokens": 8},
                           "text": "The capital city of France is"}).encode()
        req = urllib.request.Request(url + "/generate", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as res:
            json.load(res)

    def _kill_child(self) -> None:
        if self.child is not None and self.child.is_alive():
            self.child.kill()
            self.child.join(5)

    def _on_term(self, signum, frame) -> None:
        if self.state.phase != "loading":
            self.play("shutdown", paced=False)
        self._kill_child()
        os._exit(0)

    def _on_sigquit(self, signum, frame) -> None:
        self.play("sigquit", paced=False)
        self._kill_child()
        os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str] | None = None) -> None:
    Launcher(parse_args(argv)).run()
