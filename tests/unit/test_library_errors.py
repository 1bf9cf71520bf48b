"""CUDA's and NVML's own errors, whatever program prints them (issue 25): a line reporting one is
a failure line; an error with a family names it, the others stay unclassified with the library's
explanation. The tables are what libcudart 13.0, nvml.h and pynvml say
(tests/integration/test_library_errors_tables.py rebuilds them)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envmgr.bench import library_errors, triage
from envmgr.bench.triage import load_signatures, parse_signatures, triage_text
from envmgr.errors import KnowledgeBaseError

CUDA, NVML = library_errors.shipped()
CUDA_REFERENCE = library_errors.REFERENCES["CUDA"]


def test_the_table_holds_every_runtime_error_once_with_its_driver_name():
    errors = yaml.safe_load((library_errors.HERE / "cuda_errors.yaml").read_text())["errors"]
    codes = [e["code"] for e in errors]
    assert len(codes) == len(set(codes)) > 100
    by_code = {e["code"]: e for e in errors}
    assert (by_code[3]["name"], by_code[3]["text"], by_code[3]["aliases"]) == (
        "cudaErrorInitializationError", "initialization error", ["CUDA_ERROR_NOT_INITIALIZED"])
    assert by_code[209]["aliases"] == ["CUDA_ERROR_NO_BINARY_FOR_GPU"]
    assert by_code[999]["text"] == "unknown error"
    assert all(e["name"].startswith("cudaError") for e in errors)


@pytest.mark.parametrize("line, code", [
    ("cuInit err: 999", 999),                                                      # Ollama's discovery
    ("CUDA driver init failed: CUDA_ERROR_UNKNOWN", 999),                           # the driver API's name
    ("cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU", 209),
    ("ggml_cuda_init: failed to initialize CUDA: initialization error", 3),        # ggml
    ("CUDA error 3 at ggml-cuda.cu:123: initialization error", 3),
    ("warning: no CUDA-capable device is detected", 100),
    ('error="cuda driver library init failure: 3"', 3),
    ("RuntimeError: CUDA error: device-side assert triggered", 710),               # torch's C10_CUDA_CHECK
    ("CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
     "calling NumCudaDevices() that might have already set an error? Error 999: unknown error", 999),
])
def test_a_cuda_error_is_recognised_in_any_framing(line, code):
    found = CUDA.find(line)
    assert found is not None and found.code == code


@pytest.mark.parametrize("line", [
    "OSError: [Errno 22] Invalid argument: '/usr/local/cuda'",          # errno's words, not CUDA's
    "FileNotFoundError: /usr/local/cuda/bin/nvcc: file not found",     # a path, not cudaErrorFileNotFound
    "CUDA graph capture failed 3 times",                               # a count, not a code
    "Decode batch. #running-req: 1, #token: 90, cuda graph: True, gen throughput (token/s): 50.0",
    "cudaErrorStreamCaptureUnsupported",                               # a bare name: a table's row
    "status code 404 from the mirror",                                 # no CUDA on the line
])
def test_words_that_are_not_a_cuda_error_are_not_one(line):
    assert library_errors.find(line) is None


# Blender's Cycles reports a failed driver call in cuew's words (envmgr/bench/cuew_errors.yaml), in the
# framings of intern/cycles/device/cuda/util.h: 4.x's cuda_device_assert ("%s in %s (%s:%d)"), 2.8's
# cuda_assert ("CUDA error: %s in %s, line %d"), and its context set-up ("Failed to create CUDA context (%s)")
@pytest.mark.parametrize("line, code", [
    ("CUDA error: Illegal address in cuMemcpyDtoH((char *)mem.host_pointer, (CUdeviceptr)mem.device_pointer, size), line 970", 700),
    ("Illegal address in cuCtxSynchronize() (intern/cycles/device/cuda/queue.cpp:58)", 700),
    ("Out of memory in cuMemAlloc(&device_pointer, size) (intern/cycles/device/cuda/device_impl.cpp:682)", 2),
    ("No binary for GPU in cuModuleLoadData(&cuModule, cubin_data.c_str()) (device_impl.cpp:430)", 209),
    ("CUDA error at cuCtxCreate: Launch exceeded timeout", 702),
    ("Failed to create CUDA context (Invalid context)", 201),
    ("CUDA error: Invalid value in cuCtxDestroy(cuContext), line 268", 1),   # a plain word, where the line says CUDA's
])
def test_a_cuda_error_in_cuews_words_is_recognised(line, code):
    found = CUDA.find(line)
    assert found is not None and found.code == code


# glog's CHECK_EQ against success (Caffe's, MXNet's CUDA_CHECK): the message decides where one follows, since
# CUDA 10.1 renumbered the runtime's errors ("(8 vs. 0)  invalid device function" is 98 today)
@pytest.mark.parametrize("line, code", [
    ("Check failed: error == cudaSuccess (2 vs. 0)  out of memory", 2),
    ("Check failed: error == cudaSuccess (8 vs. 0)  invalid device function", 98),
    ("Check failed: status == CUDA_SUCCESS (700 vs. 0)", 700),
    ("Check failed: error == cudaSuccess (8 vs. 0)  no message of CUDA's", None),
])
def test_a_failed_check_against_cuda_success_is_read_by_its_message_first(line, code):
    found = CUDA.find(line)
    assert (found.code if found else None) == code


@pytest.mark.parametrize("line", [
    "Loading CUDA kernels: Not supported",            # cuew's plain words with no CUDA error framing
    "CUDA_HOME: Not found",
    "cuda: Timeout waiting for the device plugin",
    "Illegal address in the request body",            # a wrapper's words, no driver call
])
def test_cuews_plain_words_are_not_a_cuda_error_by_themselves(line):
    assert library_errors.find(line) is None


def test_cuews_words_name_only_errors_the_runtime_table_holds_and_never_replace_its_own():
    runtime = yaml.safe_load((library_errors.HERE / "cuda_errors.yaml").read_text())["errors"]
    words = yaml.safe_load((library_errors.HERE / "cuew_errors.yaml").read_text())["words"]
    aliases = {a for e in runtime for a in e.get("aliases", ())}
    assert len(words) > 80 and set(words) <= aliases
    assert CUDA.find("CUDA error: an illegal memory access was encountered").code == 700


def test_a_cuda_error_of_no_family_is_a_failure_explained_by_cuda():
    [finding] = triage_text("loading model\ncuInit err: 999\n")
    assert (finding.id, finding.line, finding.values["cuda_error"]) == ("unclassified_failure", 2, "cudaErrorUnknown")
    assert "This indicates that an unknown internal error has occurred" in finding.message
    assert CUDA_REFERENCE in finding.fix and finding.sources == (CUDA_REFERENCE,)


def test_a_cuda_error_of_a_family_names_it():
    [finding] = triage_text("cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU\n")
    assert (finding.id, finding.values["named_by"], finding.values["cuda_error"]) == (
        "no_kernel_image", "cuda_error", "cudaErrorNoKernelImageForDevice")
    assert "named by the CUDA error it reports, CUDA error 209" in finding.message


def test_a_known_cuda_error_is_not_named_by_a_lookalike_report():
    """"initialization error" (3) is not "system not yet initialized" (802), however alike the lines."""
    [finding] = triage_text("ggml_cuda_init: failed to initialize CUDA: initialization error\n")
    assert finding.id == "unclassified_failure" and finding.values["cuda_error"] == "cudaErrorInitializationError"


def test_a_cuda_error_logged_at_a_quiet_level_is_a_probe_that_went_on():
    assert triage_text('time=2025-01-01T00:00:00Z level=INFO source=gpu.go:100 msg="unable to load cuda driver '
                       'library" error="cuda driver library init failure: 3"\n') == []


def test_the_live_feed_and_the_batch_path_agree_on_a_cuda_error():
    from envmgr.bench.triage import Triage

    log = "starting\nCUDA error 3 at ggml-cuda.cu:123: initialization error\n"
    live = Triage()
    for line in log.splitlines():
        live.feed(line)
    assert [(f.id, f.line) for f in live.close()] == [(f.id, f.line) for f in triage_text(log)]


def test_a_family_a_library_error_names_must_be_an_error_signature_of_a_known_library():
    shipped = Path(triage.__file__).with_name("signatures.yaml").read_text(encoding="utf-8")
    text = shipped.replace("      2: cuda_oom ", "      2: no_such_family ", 1)
    with pytest.raises(KnowledgeBaseError, match="unclassified.library_errors names no error signature: .'no_such_family'"):
        parse_signatures(text)
    with pytest.raises(KnowledgeBaseError, match="unknown libraries .'ROCM'"):
        parse_signatures(shipped.replace("    NVML:\n", "    ROCM:\n", 1))
    assert load_signatures().unclassified.library_errors["CUDA"][209] == "no_kernel_image"


@pytest.mark.parametrize("line, code", [
    ("Failed to initialize NVML: Unknown Error", 999),                # nvidia-smi in a container that lost its GPU
    ("Failed to initialize NVML: Driver Not Loaded", 9),
    ("pynvml.NVMLError_DriverNotLoaded: Driver Not Loaded", 9),       # pynvml's class
    ("nvml.NVMLError_LibraryNotFound: NVML Shared Library Not Found", 12),
    ("error getting device count: NVML_ERROR_INSUFFICIENT_PERMISSIONS", None),  # not NVML's name: none
])
def test_an_nvml_error_is_recognised_by_its_name_class_or_message(line, code):
    found = NVML.find(line)
    assert (found.code if found else None) == code


def test_an_nvml_error_of_no_family_is_not_named_by_an_nvml_lookalike():
    """"Failed to initialize NVML: Unknown Error" is not the version mismatch that reads alike."""
    [finding] = triage_text("$ nvidia-smi\nFailed to initialize NVML: Unknown Error\n")
    assert (finding.id, finding.values["nvml_error"]) == ("unclassified_failure", "NVML_ERROR_UNKNOWN")
    assert "An internal driver error occurred" in finding.message
    assert finding.sources == (library_errors.REFERENCES["NVML"],)


def test_an_nvml_error_of_a_family_names_it():
    [finding] = triage_text("pynvml.NVMLError_GpuIsLost: GPU is lost\n")
    assert finding.id == "gpu_hardware_fault"
