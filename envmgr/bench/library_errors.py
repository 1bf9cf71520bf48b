"""Recognise a CUDA or NVML error in a log line, whatever program prints it, by the library's own
names and words.

Every program on a GPU host reports CUDA's and NVML's failures in its own framing (torch's
``CUDA error: ...``, ggml's ``CUDA error 3 at ggml-cuda.cu:123: ...``, Ollama's ``cuInit err:
999``, a C++ ``CUDA_ERROR_NO_BINARY_FOR_GPU``, nvidia-smi's ``Failed to initialize NVML: Unknown
Error``, pynvml's ``NVMLError_DriverNotLoaded``), but the error itself is one of the library's:
``cuda_errors.yaml`` and ``nvml_errors.yaml`` hold them all, as the libraries name and word them
(tools/library-errors/build.py reads libcudart's cudaGetErrorName/cudaGetErrorString, the headers
of NVIDIA's wheels, and pynvml's table).

A line reports an error of a library when it names one (``cudaErrorNoDevice``,
``CUDA_ERROR_UNKNOWN``, ``NVML_ERROR_GPU_IS_LOST``), or when it speaks of the library (the word,
or a driver call such as ``cuInit``) and carries an error's message as a message (``:
initialization error``) or its code after an error word (``err: 999``, ``failure: 3``).
Messages are matched in the library's own case: errno's "Invalid argument" is not CUDA's
"invalid argument". A wrapper's own words for the errors count too: cuew's (cuew_errors.yaml), in
which Blender's Cycles reports a failed driver call (``Illegal address in cuMemcpyDtoH(...)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from envmgr.datafiles import load_shipped, parse_yaml

HERE = Path(__file__).parent
# a code after an error word, as the last of its clause ("err: 999", "failure: 3", nvdiffrast's
# "Cuda error: 700[cudaLaunchKernel(...)]" with the call after it, LAMMPS's "Cuda driver error 804 in
# call at file ..."), not a count ("failed 3 times") nor the kernel's page-fault code ("segfault at ...
# error 4 in libcuda.so");
# not after "code" (the prefilter would find it in every "Decode batch" line)
_CODE = re.compile(r"(?i)\b(?:err(?:or)?|fail(?:ed|ure)?|returned|result)\b\W{0,3}(\d{1,3})(?=$|[:),.;\]\"'\[]|\s*\(|\s+in call\b)")
# glog's CHECK_EQ of a call's result against success, the code before "vs." (Caffe's, MXNet's and OpenPose's
# CUDA_CHECK: CHECK_EQ(error, cudaSuccess) << " " << cudaGetErrorString(error) prints
# "Check failed: error == cudaSuccess (2 vs. 0)  out of memory"); the message decides where one follows:
# CUDA 10.1 renumbered the runtime's errors, and these checks are in logs of both numberings
_CHECK_EQ = r"== (?:{success}) \((\d{{1,3}}) vs\. 0\)\s*(.*?)\s*$"
# a message as a message: after a colon, an error word, a bracket or a quote, and where it ends
_BEFORE = r"(?:[:=(\[\"']\s*|\b(?:error|failure|failed)\s+)"
_AFTER = r"(?=$|[.)\]\"',;]|\s+[^a-z\s])"
# a failed driver call as Cycles prints it: the message, then "in" the call ("Invalid value in cuCtxDestroy(cuContext)")
_BEFORE_CALL = r"(?:^|[:=(\[]\s*|\b(?:error|failure|failed)\s+)"
_IN_CALL = r"(?= in cu[A-Z]\w*\s*\()"


@dataclass(frozen=True)
class LibraryError:
    library: str  # "CUDA", "NVML"
    code: int
    name: str
    text: str = ""  # its message ("" where the table has none)
    aliases: tuple[str, ...] = ()  # its other names: the driver API's, pynvml's class
    about: str = ""

    @property
    def key(self) -> str:
        """Its name in a finding's values and ``named_by``: "cuda_error", "nvml_error"."""
        return f"{self.library.lower()}_error"

    def describe(self) -> str:
        words = f": {self.text}" if self.text else ""
        about = f": {self.about.rstrip('.')}" if self.about else ""
        return f"{self.library} error {self.code} ({self.name}{words}){about}"


@dataclass(frozen=True)
class Library:
    """How a library's errors look in a line, and where its table is."""

    name: str
    table: str  # the file beside this module
    reference: str  # the public list of its errors
    names: str  # a regex of its errors' names
    speaks_of: str  # a regex: the line is about this library
    common_words: frozenset[str] = frozenset()  # messages that are every tool's words too
    wrapper_words: str = ""  # the file of a wrapper's words for the errors, by name ("" for none)
    success: str = ""  # a regex of its success value's names, which a failed check compares with


LIBRARIES = (
    Library("CUDA", "cuda_errors.yaml", "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html",
            r"\b(?:cudaError(?!Success\b)[A-Z]\w*|CUDA_ERROR_(?!SUCCESS\b)[A-Z_]+)\b",
            # the word, or a driver API call (cuInit, cuDeviceGet, cuCtxCreate_v2): a line may name one and no "CUDA"
            r"(?i:cuda)|\bcu(?:Init|Device|Ctx|Mem|Module|Launch|Stream|Event|Graph|Link|Library)\w*",
            # a path under /usr/local/cuda that is "file not found" is no cudaErrorFileNotFound
            frozenset({"file not found", "operation not permitted", "operation not supported", "invalid argument",
                       # cuew's plain words ("Not found", "Timeout"): a CUDA error only where the line says so
                       "Invalid value", "Out of memory", "Invalid device", "Map failed", "Unmap failed", "Not mapped",
                       "Already mapped", "Already acquired", "Invalid source", "File not found", "Operating system",
                       "Invalid handle", "Illegal state", "Not found", "Assert", "Launch failed", "Not permitted",
                       "Not supported", "Timeout", "External device", "Unknown error", "Illegal instruction",
                       "Device unavailable", "Captured event", "Stub library"}),
            "cuew_errors.yaml", "cudaSuccess|CUDA_SUCCESS"),
    Library("NVML", "nvml_errors.yaml", "https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html",
            r"\b(?:NVML_ERROR_(?!SUCCESS\b)[A-Z_]+|NVMLError_[A-Z]\w*)\b", r"(?i:nvml)",
            frozenset({"Timeout", "Not Found", "Not Supported", "Invalid Argument", "Deprecated", "No Data"})),
)
REFERENCES = {library.name: library.reference for library in LIBRARIES}


class ErrorTable:
    """One library's errors, and how to find one in a line."""

    def __init__(self, library: Library, errors: list[LibraryError], wrapper_words: dict[str, str] | None = None) -> None:
        self.library = library
        self._by_name = {n: e for e in errors for n in (e.name, *e.aliases)}
        self._by_code = {e.code: e for e in errors}
        # the library's words first: a wrapper's never replace them
        self._by_text = {w: self._by_name[n] for n, w in (wrapper_words or {}).items() if n in self._by_name}
        self._by_text |= {e.text: e for e in errors if e.text}
        texts = sorted(set(self._by_text) - library.common_words, key=len, reverse=True)
        self._names = re.compile(library.names)
        self._speaks_of = re.compile(library.speaks_of)
        self._message = re.compile(_BEFORE + "(" + "|".join(re.escape(t) for t in texts) + ")" + _AFTER)
        # every tool's words are the library's where the line says it is the library's error
        # ("CUDA error (flash_fwd_launch_template.h:188): invalid argument", NCCL's "Cuda failure 'invalid argument'")
        common = sorted(library.common_words & set(self._by_text), key=len, reverse=True)
        self._own_error = re.compile(rf"(?i:\b{re.escape(library.name)}\s+(?:error|failure)\b)")
        self._common = re.compile(_BEFORE + "(" + "|".join(re.escape(t) for t in common) + ")" + _AFTER) if common else None
        self._check = re.compile(_CHECK_EQ.format(success=library.success)) if library.success else None
        every = sorted(self._by_text, key=len, reverse=True)
        self._in_call = re.compile(_BEFORE_CALL + "(" + "|".join(re.escape(t) for t in every) + ")" + _IN_CALL)

    def find(self, text: str) -> LibraryError | None:
        """The error of this library ``text`` reports, if it reports one."""
        for match in self._names.finditer(text):
            if match.group(0) in self._by_name and text.strip() != match.group(0):  # a bare name is a listing
                return self._by_name[match.group(0)]
        if not self._speaks_of.search(text):
            return None
        message = self._message.search(text)
        if message is None and self._common is not None and self._own_error.search(text):
            message = self._common.search(text)
        if message is None:
            message = self._in_call.search(text)
        if message:
            return self._by_text[message.group(1)]
        check = self._check.search(text) if self._check else None
        if check:
            said = check.group(2)
            return self._by_text.get(said) if said else self._by_code.get(int(check.group(1)))
        for match in _CODE.finditer(text):
            if int(match.group(1)) in self._by_code:
                return self._by_code[int(match.group(1))]
        return None

    def patterns(self) -> list[re.Pattern[str]]:
        """What a line reporting one of these errors contains, one of them at least (for the
        literal prefilter: not "CUDA" alone, which SGLang prints on every batch line, "cuda graph: True")."""
        return [self._names, self._message, _CODE, self._in_call, *([self._check] if self._check else []),
                *([self._common] if self._common else [])]


def entries(text: str) -> list[dict]:
    """A table's errors, as plain data."""
    return (parse_yaml(text) or {}).get("errors", [])


def words(text: str) -> dict[str, str]:
    """A wrapper's words for the errors, by the error's name, as plain data."""
    return dict((parse_yaml(text) or {}).get("words", {}))


def table(library: Library, errors: list[dict], wrapper_words: dict[str, str] | None = None) -> ErrorTable:
    return ErrorTable(library, [LibraryError(library.name, e["code"], e["name"], e.get("text", ""),
                                             tuple(e.get("aliases", ())), e.get("about", ""))
                                for e in errors], wrapper_words)


@cache
def shipped() -> tuple[ErrorTable, ...]:
    # read through the data cache: every triage builds its prefilter from these tables
    return tuple(table(library, load_shipped("envmgr.bench", library.table, entries),
                       load_shipped("envmgr.bench", library.wrapper_words, words) if library.wrapper_words else None)
                 for library in LIBRARIES)


def find(text: str) -> LibraryError | None:
    """The CUDA or NVML error ``text`` reports, if it reports one."""
    return next((error for table in shipped() if (error := table.find(text)) is not None), None)


def patterns() -> list[re.Pattern[str]]:
    return [p for table in shipped() for p in table.patterns()]
