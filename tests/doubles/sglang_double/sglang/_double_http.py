"""TEST DOUBLE: the HTTP side of ``sglang.launch_server`` (SGLang's FastAPI app under uvicorn).

Endpoints, status codes and JSON shapes follow python/sglang/srt/entrypoints/http_server.py
(sgl-project/sglang): /health and /health_generate answer 503 until the warmup request has
gone through, then 200 with an empty body; /get_model_info (deprecated, logged as such),
/model_info, /get_server_info, /server_info, /v1/models, /flush_cache and POST|PUT /generate,
streaming as ``data: {json}\\n\\n`` events and ``data: [DONE]`` like generate_request does.
Tokens come out at a fixed pace (SGLANG_DOUBLE_TTFT_S, SGLANG_DOUBLE_TOKEN_S), so a benchmark
against the double measures numbers known in advance. Access lines are uvicorn's format.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.5.9"  # the SGLang release the scenario's stack pins (FACTS.md)

# Words the double "generates": one token each, so completion_tokens == words emitted.
WORDS = [" Paris", ".", " The", " city", " is", " known", " for", " its", " art", ",",
         " food", " and", " the", " river", " Seine", "\n"]


def stamp() -> str:
    return time.strftime("[%Y-%m-%d %H:%M:%S]")


class DoubleState:
    """What the launcher and the HTTP threads share."""

    def __init__(self, args, values: dict[str, object]) -> None:
        self.phase = "loading"  # loading (port would be closed) -> starting (uvicorn up) -> ready
        self.args = args
        self.values = values
        self.lock = threading.Lock()
        self.running = 0
        self.scheduler_info: dict[str, object] = {}
        self.created = int(time.time())
        self.rank_tag = " TP0" if args.tp_size > 1 else ""
        self.ttft_s = float(os.environ.get("SGLANG_DOUBLE_TTFT_S", "0.02"))
        self.token_s = float(os.environ.get("SGLANG_DOUBLE_TOKEN_S", "0.002"))

    @property
    def served_model_name(self) -> str:
        return self.args.served_model_name or self.args.model_path

    def model_info(self) -> dict[str, object]:
        return {"model_path": self.args.model_path, "tokenizer_path": self.args.model_path,
                "is_generation": True, "preferred_sampling_params": None,
                "weight_version": "default"}

    def server_info(self) -> dict[str, object]:
        # The real one is dataclasses.asdict(server_args) + scheduler_info + internal_states.
        server_args = {k: v for k, v in vars(self.args).items()}
        server_args["mem_fraction_static"] = self.values.get("mem_fraction_static")
        # envmgr_test_double: the one key the real server never has, so that a result says
        # which served it (envmgr records it; the report marks such cells)
        return {**server_args, **self.scheduler_info,
                "internal_states": [{"last_gen_throughput": 0.0}], "version": VERSION,
                "envmgr_test_double": True}

    def v1_models(self) -> dict[str, object]:
        card = {"id": self.served_model_name, "object": "model", "created": self.created,
                "owned_by": "sglang", "root": self.args.model_path, "parent": None,
                "max_model_len": 262144}
        return {"object": "list", "data": [card]}

    def log(self, text: str, stream=None) -> None:
        stream = stream or sys.stderr
        stream.write(text + "\n")
        stream.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""
    state: DoubleState  # set on the subclass the launcher makes

    # -- plumbing ---------------------------------------------------------------------------
    def log_message(self, format, *args):  # noqa: A002 - uvicorn's own access line instead
        pass

    def do_GET(self):
        self._route("GET")

    def do_POST(self):
        self._route("POST")

    def do_PUT(self):
        self._route("PUT")

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _access(self, code: int) -> None:
        if self.state.phase == "loading":
            return  # no uvicorn yet: a real launch would not even have the port open
        host, port = self.client_address[:2]
        phrase = HTTPStatus(code).phrase
        self.state.log(f'{stamp()} INFO:     {host}:{port} - "{self.command} {self.path} '
                       f'{self.request_version}" {code} {phrase}', sys.stdout)

    def _send(self, code: int, body: bytes = b"", content_type: str = "application/json") -> None:
        self.send_response(code)
        if body or code != 200:
            self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self._access(code)

    def _json(self, code: int, data: object) -> None:
        self._send(code, json.dumps(data).encode())

    # -- routing ----------------------------------------------------------------------------
    def _route(self, method: str) -> None:
        body = self._body()
        path = self.path.split("?", 1)[0]
        state = self.state
        if state.phase == "loading":
            return self._send(503)
        if path in ("/health", "/health_generate") and method == "GET":
            return self._send(200 if state.phase == "ready" else 503)
        if path == "/get_model_info" and method == "GET":
            state.log(f"{stamp()} Endpoint '/get_model_info' is deprecated and will be removed in "
                      "a future version. Please use '/model_info' instead.")
            return self._json(200, state.model_info())
        if path == "/model_info" and method == "GET":
            return self._json(200, state.model_info())
        if path in ("/get_server_info", "/server_info") and method == "GET":
            return self._json(200, state.server_info())
        if path == "/v1/models" and method == "GET":
            return self._json(200, state.v1_models())
        if path == "/flush_cache" and method in ("GET", "POST"):
            return self._send(200, b"Cache flushed.\nPlease check backend logs for more details. "
                                   b"(When there are running or waiting requests, the operation "
                                   b"will not be performed.)\n", "text/plain; charset=utf-8")
        if path == "/generate" and method in ("POST", "PUT"):
            return self._generate(body)
        return self._json(404, {"detail": "Not Found"})

    # -- generation -------------------------------------------------------------------------
    def _generate(self, raw: bytes) -> None:
        try:
            req = json.loads(raw or b"{}")
            prompt_tokens = _prompt_tokens(req)
        except (ValueError, TypeError) as exc:
            return self._json(400, {"object": "error", "message": str(exc),
                                    "type": "Bad Request", "param": None, "code": 400})
        sampling = req.get("sampling_params") or {}
        max_new = int(sampling.get("max_new_tokens", 128))  # SGLang's default
        gen = Generation(self.state, prompt_tokens, max_new)
        try:
            if req.get("stream"):
                self._stream(gen)
            else:
                gen.wait_all()
                self._json(200, gen.output(max_new))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away; SGLang would abort the request
        finally:
            gen.done()

    def _stream(self, gen: "Generation") -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self._access(200)
        for count in gen.steps():
            self._chunk(b"data: " + json.dumps(gen.output(count)).encode() + b"\n\n")
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _prompt_tokens(req: dict) -> int:
    """input_ids count exactly; text is counted in words (the double has no tokenizer)."""
    if req.get("input_ids") is not None:
        ids = req["input_ids"]
        if ids and isinstance(ids[0], list):
            raise ValueError("the test double serves one prompt per request, not a batch")
        return len(ids)
    text = req.get("text")
    if isinstance(text, list):
        raise ValueError("the test double serves one prompt per request, not a batch")
    if not isinstance(text, str):
        raise ValueError("Either text, input_ids or input_embeds should be provided.")
    return max(1, len(text.split()))


class Generation:
    """One request's tokens on a fixed clock: token k is due at ttft + (k-1) * token_s."""

    def __init__(self, state: DoubleState, prompt_tokens: int, max_new: int) -> None:
        self.state, self.prompt_tokens, self.max_new = state, prompt_tokens, max(0, max_new)
        self.rid = uuid.uuid4().hex
        self.start = time.perf_counter()
        with state.lock:
            state.running += 1
            running = state.running
        elapsed = max(state.ttft_s, 1e-6)
        state.log(f"{stamp()[:-1]}{state.rank_tag}] Prefill batch, #new-seq: 1, #new-token: "
                  f"{prompt_tokens}, #cached-token: 0, token usage: 0.00, #running-req: "
                  f"{running - 1}, #queue-req: 0, cuda graph: False, input throughput "
                  f"(token/s): {prompt_tokens / elapsed:.2f}")

    def _due(self, k: int) -> float:
        return self.start + self.state.ttft_s + (k - 1) * self.state.token_s

    def _sleep_until(self, when: float) -> None:
        delay = when - time.perf_counter()
        if delay > 0:
            time.sleep(delay)

    def steps(self):
        if self.max_new == 0:
            self._sleep_until(self._due(1))
            yield 0
        for k in range(1, self.max_new + 1):
            self._sleep_until(self._due(k))
            yield k

    def wait_all(self) -> None:
        self._sleep_until(self._due(max(self.max_new, 1)))

    def output(self, count: int) -> dict[str, object]:
        finished = count >= self.max_new
        meta = {"id": self.rid,
                "finish_reason": {"type": "length", "length": self.max_new} if finished else None,
                "prompt_tokens": self.prompt_tokens, "weight_version": "default",
                "total_retractions": 0, "completion_tokens": count, "cached_tokens": 0}
        if finished:
            meta["e2e_latency"] = time.perf_counter() - self.start
        text = "".join(WORDS[i % len(WORDS)] for i in range(count))
        return {"text": text, "meta_info": meta}

    def done(self) -> None:
        with self.state.lock:
            self.state.running -= 1


class DoubleHTTPServer(ThreadingHTTPServer):
    request_queue_size = 1024  # a benchmark opens many connections at once
    daemon_threads = True


def make_server(state: DoubleState, host: str, port: int) -> DoubleHTTPServer:
    handler = type("DoubleHandler", (Handler,), {"state": state})
    return DoubleHTTPServer((host, port), handler)
