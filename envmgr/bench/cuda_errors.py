"""Recognise a CUDA error in a log line, whatever program prints it, by CUDA's own names and words.

Every program on a GPU host reports CUDA's failures in its own framing (torch's ``CUDA error:
...``, ggml's ``CUDA error 3 at ggml-cuda.cu:123: ...``, Ollama's ``cuInit err: 999``, a C++
``CUDA_ERROR_NO_BINARY_FOR_GPU``), but the error itself is one of CUDA's: ``cuda_errors.yaml``
holds them all, as the runtime library names and words them (tools/cuda-errors/build.py reads
libcudart's cudaGetErrorName/cudaGetErrorString and the headers of NVIDIA's runtime wheel).

A line reports a CUDA error when it names one (``cudaErrorNoDevice``, ``CUDA_ERROR_UNKNOWN``), or
when it speaks of CUDA (the word, or a driver call such as ``cuInit``) and carries an error's
message as a message (``: initialization error``) or its code after an error word (``err: 999``,
``failure: 3``). Messages are matched in CUDA's own case: errno's "Invalid argument" is not
CUDA's "invalid argument".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

TABLE = Path(__file__).with_name("cuda_errors.yaml")
REFERENCE = "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html"
_NAME = re.compile(r"\b(?:cudaError(?!Success\b)[A-Z]\w*|CUDA_ERROR_(?!SUCCESS\b)[A-Z_]+)\b")
# the driver API's calls (cuInit, cuDeviceGet, cuCtxCreate_v2, ...): a line may name one and no "CUDA"
_DRIVER_CALL = r"\bcu(?:Init|Device|Ctx|Mem|Module|Launch|Stream|Event|Graph|Link|Library)\w*"
_SPEAKS_OF_CUDA = re.compile(r"(?i:cuda)|" + _DRIVER_CALL)
# a code after an error word, as the last of its clause ("err: 999", "failure: 3"), not a count
# ("failed 3 times"); not after "code" (the prefilter would find it in every "Decode batch" line)
_CODE = re.compile(r"(?i)\b(?:err(?:or)?|fail(?:ed|ure)?|returned|result)\b\W{0,3}(\d{1,3})(?=$|[:),.;\]\"']|\s*\()")
# CUDA's messages that are also every tool's words about a file or a call: a path under
# /usr/local/cuda that is "file not found" is no cudaErrorFileNotFound
_COMMON_WORDS = frozenset({"file not found", "operation not permitted", "operation not supported", "invalid argument"})
# a message as a message: after a colon, an error word, a bracket or a quote, and where it ends
_BEFORE = r"(?:[:=(\[\"']\s*|\b(?:error|failure|failed)\s+)"
_AFTER = r"(?=$|[.)\]\"',;]|\s+[^a-z\s])"


@dataclass(frozen=True)
class CudaError:
    code: int
    name: str
    text: str
    driver: str = ""
    about: str = ""

    def describe(self) -> str:
        about = f": {self.about.rstrip('.')}" if self.about else ""
        return f"CUDA error {self.code} ({self.name}: {self.text}){about}"


class CudaErrors:
    def __init__(self, errors: list[CudaError]) -> None:
        self._by_name = {n: e for e in errors for n in (e.name, e.driver) if n}
        self._by_code = {e.code: e for e in errors}
        texts = sorted({e.text for e in errors} - _COMMON_WORDS, key=len, reverse=True)  # the longest that fits
        self._by_text = {e.text: e for e in errors}
        self._message = re.compile(_BEFORE + "(" + "|".join(re.escape(t) for t in texts) + ")" + _AFTER)

    def find(self, text: str) -> CudaError | None:
        """The CUDA error ``text`` reports, if it reports one."""
        for match in _NAME.finditer(text):
            if match.group(0) in self._by_name and text.strip() != match.group(0):  # a bare name is a listing
                return self._by_name[match.group(0)]
        if not _SPEAKS_OF_CUDA.search(text):
            return None
        message = self._message.search(text)
        if message:
            return self._by_text[message.group(1)]
        for match in _CODE.finditer(text):
            if int(match.group(1)) in self._by_code:
                return self._by_code[int(match.group(1))]
        return None

    def patterns(self) -> list[re.Pattern[str]]:
        """What a line reporting a CUDA error contains, one of them at least (for the literal
        prefilter: not "CUDA" alone, which SGLang prints on every batch line, "cuda graph: True")."""
        return [_NAME, self._message, _CODE]


def load(path: Path = TABLE) -> CudaErrors:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return CudaErrors([CudaError(e["code"], e["name"], e["text"], e.get("driver", ""), e.get("about", ""))
                       for e in data.get("errors", [])])


@cache
def shipped() -> CudaErrors:
    return load()
