"""TEST DOUBLE of ``python -m sglang.bench_serving`` (SGLang's online serving benchmark).

Stdlib only: urllib + threads instead of aiohttp + asyncio, no tokenizer, no numpy. What it
keeps from the real client (python/sglang/bench_serving.py, sgl-project/sglang):
- the flags (unknown ones are accepted), the order of work and the printed messages: fetch the
  model from /v1/models ("Failed to fetch model from ..." and exit 1 when the server is
  unreachable), build the dataset, warm up, sleep 1 s, run, print the result table, append ONE
  JSON line to --output-file;
- ``--dataset-name random``/``sharegpt`` without a usable --dataset-path try to download
  ShareGPT first: offline that is "Downloading from ..." and a requests ConnectionError;
- the sglang /generate request (streamed), TTFT/ITL/TPOT/E2E and every metric as
  calculate_metrics computes them (np.percentile's linear interpolation, population std);
- the table layout and the JSON keys of the late-2025 bench_serving (the release line whose
  output sgl-cookbook shows for SGLang 0.5.8; ``total_throughput`` has been in the JSON since
  sgl-project/sglang#9790).
What differs: random-ids prompts are sent as ``input_ids`` (no tokenizer to decode them), the
"retokenized" counts equal the server's completion_tokens, no tqdm bar, and only the
``sglang``/``sglang-native`` backends. SGLANG_DOUBLE_WARMUP_SLEEP replaces the fixed 1 s pause.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
import traceback
import urllib.error
import urllib.request
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime

SHAREGPT_URL = ("https://huggingface.co/datasets/anon8231489123/ShareGPT_Vicuna_unfiltered/"
                "resolve/main/ShareGPT_V3_unfiltered_cleaned_split.json")
VOCAB_SIZE = 163840  # Kimi-K2's vocabulary; random-ids draws token ids below it
DEFAULT_PORTS = {"sglang": 30000, "sglang-native": 30000, "sglang-oai": 30000,
                 "lmdeploy": 23333, "vllm": 8000, "trt": 8000, "gserver": 9988, "truss": 8080}
SUPPORTED_BACKENDS = ("sglang", "sglang-native")


@dataclass
class DatasetRow:
    prompt: str | list[int]
    prompt_len: int
    output_len: int


@dataclass
class RequestFuncOutput:
    generated_text: str = ""
    success: bool = False
    latency: float = 0.0
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    prompt_len: int = 0
    error: str = ""
    output_len: int = 0
    start_time: float = 0.0


# --- arguments ---------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="Benchmark the online serving throughput.")
    p.add_argument("--backend", default="sglang")
    p.add_argument("--base-url", default=None)
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int)
    p.add_argument("--dataset-name", default="sharegpt")
    p.add_argument("--dataset-path", default="")
    p.add_argument("--model")
    p.add_argument("--served-model-name")
    p.add_argument("--tokenizer")
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--sharegpt-output-len", type=int, default=None)
    p.add_argument("--sharegpt-context-len", type=int, default=None)
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=1024)
    p.add_argument("--random-range-ratio", type=float, default=0.0)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--output-file")
    p.add_argument("--output-details", action="store_true")
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--disable-stream", action="store_true")
    p.add_argument("--return-logprob", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--disable-ignore-eos", action="store_true")
    p.add_argument("--extra-request-body")
    p.add_argument("--flush-cache", action="store_true")
    p.add_argument("--warmup-requests", type=int, default=1)
    p.add_argument("--tokenize-prompt", action="store_true")
    p.add_argument("--tag", default=None)
    return p


def main(argv: list[str] | None = None) -> None:
    args, _unknown = build_parser().parse_known_args(argv)
    print(f"benchmark_args={args}")
    run_benchmark(args)


# --- the run -----------------------------------------------------------------------------------

def run_benchmark(args: argparse.Namespace) -> dict:
    random.seed(args.seed)
    extra = json.loads(args.extra_request_body) if args.extra_request_body else {}
    if args.port is None:
        args.port = DEFAULT_PORTS.get(args.backend, 30000)
    base_url = args.base_url or f"http://{args.host}:{args.port}"
    if args.backend not in SUPPORTED_BACKENDS:
        print(f"sglang test double: backend {args.backend!r} is not replayed; "
              f"use one of {', '.join(SUPPORTED_BACKENDS)}")
        sys.exit(2)
    if args.model is None:
        args.model = fetch_model(base_url + "/v1/models")
    if args.model is None:
        print("No model specified or found. Please provide a model using `--model`.")
        sys.exit(1)
    print(f"{args}\n")
    input_requests = get_dataset(args)
    return benchmark(args, base_url + "/generate", base_url, input_requests, extra)


def fetch_model(model_url: str) -> str | None:
    try:
        with urllib.request.urlopen(urllib.request.Request(model_url, headers=auth_headers()),
                                    timeout=60) as res:
            model_list = json.load(res).get("data", [])
    except urllib.error.HTTPError as exc:  # requests would hand back the body: not JSON
        fail = _json_error(exc.read())
    except (urllib.error.URLError, OSError) as exc:
        fail = _requests_connection_error(model_url, exc)
    else:
        return model_list[0]["id"] if model_list else None
    print(f"Failed to fetch model from {model_url}. Error: {fail}")
    print("Please specify the correct host and port using `--host` and `--port`.")
    sys.exit(1)


def _json_error(body: bytes) -> str:
    try:
        json.loads(body)
    except ValueError as exc:
        return str(exc)
    return "unexpected response"


def _requests_connection_error(url: str, exc: Exception) -> str:
    """The text requests prints for a refused connection (urllib3 NewConnectionError)."""
    reason = getattr(exc, "reason", exc)
    errno = getattr(reason, "errno", None) or 111
    strerror = getattr(reason, "strerror", None) or "Connection refused"
    host_port, _, path = url.split("//", 1)[1].partition("/")
    host, _, port = host_port.rpartition(":")
    return (f"HTTPConnectionPool(host='{host}', port={port}): Max retries exceeded with url: /{path} "
            f"(Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at "
            f"0x7f3a2c1e5d90>: Failed to establish a new connection: [Errno {errno}] {strerror}'))")


def auth_headers() -> dict[str, str]:
    key = os.environ.get("OPENAI_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


# --- datasets ----------------------------------------------------------------------------------

def get_dataset(args: argparse.Namespace) -> list[DatasetRow]:
    if args.dataset_name == "random-ids":
        return sample_random_ids(args)
    if args.dataset_name == "random":
        path = args.dataset_path if is_file_valid_json(args.dataset_path) else download_sharegpt()
        return sample_random_from_sharegpt(args, load_sharegpt(path))
    if args.dataset_name == "sharegpt":
        path = args.dataset_path
        if not is_file_valid_json(path) and path == "":
            path = download_sharegpt()
        return sample_sharegpt(args, load_sharegpt(path))
    print(f"sglang test double: dataset {args.dataset_name!r} is not replayed; "
          "use random-ids, random or sharegpt")
    sys.exit(2)


def _lens(args: argparse.Namespace) -> tuple[list[int], list[int]]:
    # np.random.randint(max(int(in*ratio), 1), in + 1) and (int(out*ratio), out + 1): the upper
    # bound is inclusive here because random.randint's is.
    n, ratio = args.num_prompts, args.random_range_ratio
    ins = [random.randint(max(int(args.random_input_len * ratio), 1), args.random_input_len)
           for _ in range(n)]
    outs = [random.randint(int(args.random_output_len * ratio), args.random_output_len)
            for _ in range(n)]
    return ins, outs


def sample_random_ids(args: argparse.Namespace) -> list[DatasetRow]:
    ins, outs = _lens(args)
    rows = []
    for i, (n_in, n_out) in enumerate(zip(ins, outs, strict=True)):
        offset = random.randrange(VOCAB_SIZE)
        ids = [(offset + i + j) % VOCAB_SIZE for j in range(n_in)]
        rows.append(DatasetRow(prompt=ids, prompt_len=n_in, output_len=n_out))
    print(f"#Input tokens: {sum(ins)}")
    print(f"#Output tokens: {sum(outs)}")
    return rows


def is_file_valid_json(path: str) -> bool:
    if not os.path.isfile(path):
        return False
    try:
        with open(path) as f:
            json.load(f)
        return True
    except ValueError as e:
        print(f"{path} exists but json loading fails ({e=}), thus treat as invalid file")
        return False


def download_sharegpt() -> str:
    """The real client downloads ShareGPT here; the double never goes online, so it fails the
    way the real one fails on an offline host (or uses the file a former download cached)."""
    filename = os.path.join("/tmp", SHAREGPT_URL.split("/")[-1])
    if is_file_valid_json(filename):
        return filename
    print(f"Downloading from {SHAREGPT_URL} to {filename}")
    url_path = SHAREGPT_URL.split("huggingface.co", 1)[1]
    sys.stderr.write(
        "Traceback (most recent call last):\n"
        '  File "/opt/venv/lib/python3.12/site-packages/sglang/bench_serving.py", line 1046, in download_and_cache_file\n'
        "    response = requests.get(url, stream=True)\n"
        '  File "/opt/venv/lib/python3.12/site-packages/requests/adapters.py", line 700, in send\n'
        "    raise ConnectionError(e, request=request)\n"
        "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): "
        f"Max retries exceeded with url: {url_path} (Caused by NameResolutionError(\"<urllib3.connection."
        "HTTPSConnection object at 0x7f3a2c1e5d90>: Failed to resolve 'huggingface.co' ([Errno -3] "
        "Temporary failure in name resolution)\"))\n")
    sys.exit(1)


def load_sharegpt(path: str) -> list[tuple[str, str]]:
    with open(path) as f:
        data = json.load(f)
    turns = [d.get("conversations", d.get("conversation", [])) for d in data]
    pairs = [(t[0]["value"], t[1]["value"]) for t in turns if len(t) >= 2]
    random.shuffle(pairs)
    return pairs


def sample_sharegpt(args: argparse.Namespace, pairs: list[tuple[str, str]]) -> list[DatasetRow]:
    # Token counts are word counts: the double has no tokenizer.
    rows = []
    for prompt, completion in pairs:
        if len(rows) == args.num_prompts:
            break
        p_len = len(prompt.split())
        o_len = args.sharegpt_output_len or len(completion.split())
        if p_len < 2 or o_len < 2:
            continue
        rows.append(DatasetRow(prompt=prompt, prompt_len=p_len, output_len=o_len))
    print(f"#Input tokens: {sum(r.prompt_len for r in rows)}")
    print(f"#Output tokens: {sum(r.output_len for r in rows)}")
    return rows


def sample_random_from_sharegpt(args, pairs: list[tuple[str, str]]) -> list[DatasetRow]:
    ins, outs = _lens(args)
    rows = []
    for (prompt, _), n_in, n_out in zip(pairs, ins, outs, strict=True):
        words = prompt.split() or ["hi"]
        words = (words * (n_in // len(words) + 1))[:n_in]
        rows.append(DatasetRow(prompt=" ".join(words), prompt_len=n_in, output_len=n_out))
    print(f"#Input tokens: {sum(ins)}")
    print(f"#Output tokens: {sum(outs)}")
    return rows


# --- one request -------------------------------------------------------------------------------

def remove_prefix(text: str, prefix: str) -> str:
    return text[len(prefix):] if text.startswith(prefix) else text


def request_sglang_generate(row: DatasetRow, output_len: int, api_url: str,
                            args: argparse.Namespace, extra: dict) -> RequestFuncOutput:
    """async_request_sglang_generate, with urllib: TTFT at the first text, ITL per new token."""
    payload = {
        ("text" if isinstance(row.prompt, str) else "input_ids"): row.prompt,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": output_len,
                            "ignore_eos": not args.disable_ignore_eos},
        "stream": not args.disable_stream, "lora_path": None,
        "return_logprob": args.return_logprob, "logprob_start_len": -1, **extra,
    }
    out = RequestFuncOutput(prompt_len=row.prompt_len)
    generated, n_out, last_n, ttft = "", output_len, 0, 0.0
    st = time.perf_counter()
    out.start_time, most_recent, latency = st, st, 0.0
    request = urllib.request.Request(api_url, data=json.dumps(payload).encode(),
                                     headers={"Content-Type": "application/json", **auth_headers()})
    try:
        with urllib.request.urlopen(request, timeout=6 * 60 * 60) as response:
            for raw in response:
                chunk = raw.strip()
                if not chunk:
                    continue
                text = remove_prefix(chunk.decode("utf-8"), "data: ")
                latency = time.perf_counter() - st
                if text == "[DONE]":
                    continue
                data = json.loads(text)
                if data.get("text"):
                    now = time.perf_counter()
                    generated, n_out = data["text"], data["meta_info"]["completion_tokens"]
                    if ttft == 0.0:
                        ttft = out.ttft = now - st
                    else:
                        new = n_out - last_n
                        if new == 0:
                            continue
                        out.itl.extend([(now - most_recent) / new] * new)
                    most_recent, last_n = now, n_out
        out.generated_text, out.success, out.latency, out.output_len = generated, True, latency, n_out
    except urllib.error.HTTPError as exc:
        out.error = exc.reason or ""
    except Exception:
        out.error = traceback.format_exc()
        print(f"{out.error=}")
    return out


# --- the benchmark -----------------------------------------------------------------------------

def benchmark(args, api_url: str, base_url: str, rows: list[DatasetRow], extra: dict) -> dict:
    warmup(args, api_url, base_url, rows[0], extra)
    time.sleep(float(os.environ.get("SGLANG_DOUBLE_WARMUP_SLEEP", "1.0")))  # real: 1.0

    start = time.perf_counter()
    outputs = run_all(args, api_url, rows, extra)
    accept_length = (server_info(base_url) or {}).get("internal_states", [{}])[0].get(
        "avg_spec_accept_length")
    duration = time.perf_counter() - start

    metrics = calculate_metrics(rows, outputs, duration)
    metrics["accept_length"] = accept_length
    print_metrics(args, metrics, duration)
    result = result_dict(args, metrics, duration, server_info(base_url))
    details = {"input_lens": [o.prompt_len for o in outputs], "output_lens": metrics["output_lens"],
               "ttfts": [o.ttft for o in outputs], "itls": [o.itl for o in outputs],
               "generated_texts": [o.generated_text for o in outputs],
               "errors": [o.error for o in outputs]}
    with open(output_file_name(args), "a") as file:
        file.write(json.dumps(result | details if args.output_details else result) + "\n")
    return result | details


def warmup(args, api_url: str, base_url: str, first: DatasetRow, extra: dict) -> None:
    n = args.warmup_requests
    print(f"Starting warmup with {n} sequences...")
    with ThreadPoolExecutor(max_workers=max(n, 1)) as pool:
        outs = list(pool.map(lambda _: request_sglang_generate(
            first, min(first.output_len, 32), api_url, args, extra), range(n)))
    if n > 0 and not any(o.success for o in outs):
        raise ValueError("Warmup failed - Please make sure benchmark arguments "
                         f"are correctly specified. Error: {outs[0].error}")
    print(f"Warmup completed with {n} sequences. Starting main benchmark run...")
    if args.flush_cache:
        urllib.request.urlopen(urllib.request.Request(base_url + "/flush_cache", data=b"",
                                                      headers=auth_headers()), timeout=60).close()


def run_all(args, api_url: str, rows: list[DatasetRow], extra: dict) -> list[RequestFuncOutput]:
    """All requests, at most --max-concurrency in flight, arrivals Poisson at --request-rate."""
    workers = args.max_concurrency or len(rows)
    futures = []
    with ThreadPoolExecutor(max_workers=max(workers, 1)) as pool:
        for i, row in enumerate(rows):
            futures.append(pool.submit(request_sglang_generate, row, row.output_len, api_url,
                                       args, extra))
            if args.request_rate != float("inf") and i < len(rows) - 1:
                time.sleep(random.expovariate(args.request_rate))
        return [f.result() for f in futures]


def server_info(base_url: str) -> dict | None:
    try:
        with urllib.request.urlopen(urllib.request.Request(base_url + "/get_server_info",
                                                           headers=auth_headers()), timeout=60) as res:
            return json.load(res)
    except (urllib.error.URLError, OSError, ValueError):
        return None


# --- metrics (calculate_metrics) ---------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    """np.percentile's default (linear) interpolation; np raises on an empty list too."""
    if not values:
        raise IndexError("index -1 is out of bounds for axis 0 with size 0")
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100
    lo = math.floor(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def std(values: list[float]) -> float:  # np.std: population
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def _stats(prefix: str, values: list[float], pcts: tuple[int, ...]) -> dict[str, float]:
    vals = values or [0.0]  # the real code's `ttfts or 0`
    out = {f"mean_{prefix}_ms": mean(vals) * 1000, f"median_{prefix}_ms": percentile(vals, 50) * 1000,
           f"std_{prefix}_ms": std(vals) * 1000}
    out.update({f"p{p}_{prefix}_ms": percentile(vals, p) * 1000 for p in pcts})
    return out


def calculate_metrics(rows: list[DatasetRow], outputs: list[RequestFuncOutput], dur_s: float) -> dict:
    ok = [(row, o) for row, o in zip(rows, outputs, strict=True) if o.success]
    output_lens = [o.output_len if o.success else 0 for o in outputs]
    total_input = sum(row.prompt_len for row, _ in ok)
    ttfts = [o.ttft for _, o in ok]
    tpots = [(o.latency - o.ttft) / (o.output_len - 1) for _, o in ok if o.output_len > 1]
    itls = [v for _, o in ok for v in o.itl]
    e2e = [o.latency for _, o in ok]
    if not ok:
        warnings.warn("All requests failed. This is likely due to a misconfiguration "
                      "on the benchmark arguments.", stacklevel=2)
    total_output = sum(output_lens)
    m: dict = {
        "completed": len(ok), "total_input": total_input, "total_output": total_output,
        # no tokenizer: the retokenized count is the server's completion_tokens
        "total_output_retokenized": total_output,
        "request_throughput": len(ok) / dur_s, "input_throughput": total_input / dur_s,
        "output_throughput": total_output / dur_s,
        "total_throughput": (total_input + total_output) / dur_s,
        "output_lens": output_lens,
    }
    m.update(_stats("ttft", ttfts, (99,)))
    m.update(_stats("tpot", tpots, (99,)))
    m.update(_stats("itl", itls, (95, 99)))
    m["max_itl_ms"] = max(itls or [0.0]) * 1000
    m.update({"mean_e2e_latency_ms": mean(e2e) * 1000 if e2e else float("nan"),
              "median_e2e_latency_ms": percentile(e2e, 50) * 1000,
              "std_e2e_latency_ms": std(e2e) * 1000,
              "p90_e2e_latency_ms": percentile(e2e, 90) * 1000,
              "p99_e2e_latency_ms": percentile(e2e, 99) * 1000,
              "concurrency": sum(e2e) / dur_s})
    m["max_output_tokens_per_s"], m["max_concurrent_requests"] = peaks([o for _, o in ok])
    return m


def peaks(outputs: list[RequestFuncOutput]) -> tuple[float, int]:
    """Tokens and requests per 1-second bucket from the first start; the busiest bucket."""
    if not outputs:
        return 0.0, 0
    t0 = min(o.start_time for o in outputs)
    span = int(math.ceil(max(o.start_time + o.latency for o in outputs) - t0)) + 1
    tokens, requests = [0] * span, [0] * span
    for o in outputs:
        when = o.start_time + o.ttft
        for gap in [0.0] + o.itl:  # token k arrives ttft + sum(itl[:k]) after the start
            when += gap
            if 0 <= int(when - t0) < span:
                tokens[int(when - t0)] += 1
        for second in range(int(o.start_time - t0), min(int(o.start_time + o.latency - t0) + 1, span)):
            requests[second] += 1
    return float(max(tokens)), max(requests)


# --- output ------------------------------------------------------------------------------------

def print_metrics(args, m: dict, duration: float) -> None:
    row = lambda name, value: print("{:<40} {:<10}".format(name, value))  # noqa: E731
    num = lambda name, value: print("{:<40} {:<10.2f}".format(name, value))  # noqa: E731
    rule = lambda title: print("{s:{c}^{n}}".format(s=title, n=50, c="-"))  # noqa: E731
    print("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    row("Backend:", args.backend)
    row("Traffic request rate:", args.request_rate)
    row("Max request concurrency:", args.max_concurrency if args.max_concurrency else "not set")
    row("Successful requests:", m["completed"])
    num("Benchmark duration (s):", duration)
    row("Total input tokens:", m["total_input"])
    row("Total input text tokens:", m["total_input"])
    row("Total generated tokens:", m["total_output"])
    row("Total generated tokens (retokenized):", m["total_output_retokenized"])
    num("Request throughput (req/s):", m["request_throughput"])
    num("Input token throughput (tok/s):", m["input_throughput"])
    num("Output token throughput (tok/s):", m["output_throughput"])
    num("Peak output token throughput (tok/s):", m["max_output_tokens_per_s"])
    row("Peak concurrent requests:", m["max_concurrent_requests"])
    num("Total token throughput (tok/s):", m["total_throughput"])
    num("Concurrency:", m["concurrency"])
    if m.get("accept_length"):
        num("Accept length:", m["accept_length"])
    rule("End-to-End Latency")
    for label, key in (("Mean", "mean"), ("Median", "median"), ("P90", "p90"), ("P99", "p99")):
        num(f"{label} E2E Latency (ms):", m[f"{key}_e2e_latency_ms"])
    rule("Time to First Token")
    for label, key in (("Mean", "mean"), ("Median", "median"), ("P99", "p99")):
        num(f"{label} TTFT (ms):", m[f"{key}_ttft_ms"])
    rule("Time per Output Token (excl. 1st token)")
    for label, key in (("Mean", "mean"), ("Median", "median"), ("P99", "p99")):
        num(f"{label} TPOT (ms):", m[f"{key}_tpot_ms"])
    rule("Inter-Token Latency")
    for label, key in (("Mean", "mean"), ("Median", "median"), ("P95", "p95"), ("P99", "p99"),
                       ("Max", "max")):
        num(f"{label} ITL (ms):", m[f"{key}_itl_ms"])
    print("=" * 50)


# The result line's keys, in the real order (bench_serving.py's `result` dict, late 2025).
RESULT_METRICS = (
    "mean_e2e_latency_ms", "median_e2e_latency_ms", "std_e2e_latency_ms", "p90_e2e_latency_ms",
    "p99_e2e_latency_ms", "mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
    "median_itl_ms", "std_itl_ms", "p95_itl_ms", "p99_itl_ms", "concurrency", "accept_length",
    "max_output_tokens_per_s", "max_concurrent_requests",
)


def result_dict(args, m: dict, duration: float, info: dict | None) -> dict:
    result = {
        "tag": args.tag, "backend": args.backend, "dataset_name": args.dataset_name,
        "request_rate": args.request_rate, "max_concurrency": args.max_concurrency,
        "sharegpt_output_len": args.sharegpt_output_len,
        "random_input_len": args.random_input_len, "random_output_len": args.random_output_len,
        "random_range_ratio": args.random_range_ratio,
        "server_info": info,
        "duration": duration, "completed": m["completed"],
        "total_input_tokens": m["total_input"], "total_input_text_tokens": m["total_input"],
        "total_input_vision_tokens": 0, "total_output_tokens": m["total_output"],
        "total_output_tokens_retokenized": m["total_output_retokenized"],
        "request_throughput": m["request_throughput"], "input_throughput": m["input_throughput"],
        "output_throughput": m["output_throughput"], "total_throughput": m["total_throughput"],
    }
    result.update({k: m[k] for k in RESULT_METRICS})
    return result


def output_file_name(args) -> str:
    if args.output_file:
        return args.output_file
    now = datetime.now().strftime("%m%d")
    if args.dataset_name.startswith("random"):
        return (f"{args.backend}_{now}_{args.num_prompts}_{args.random_input_len}_"
                f"{args.random_output_len}.jsonl")
    return f"{args.backend}_{now}_{args.num_prompts}_{args.dataset_name}.jsonl"


if __name__ == "__main__":
    main()
