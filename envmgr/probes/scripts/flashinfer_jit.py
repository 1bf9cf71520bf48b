"""FlashInfer JIT: compile and run silu_and_mul for this GPU, check it against torch.

Reports the compile time (the first call builds the module unless it is cached), the
cache directory, the nvcc the JIT uses (FLASHINFER_NVCC, else CUDA_HOME/CUDA_PATH, else
`which nvcc`, else /usr/local/cuda), and warns when nvcc's major differs from torch's
CUDA major (the built module then links another libcudart: flashinfer#5145).
"""

import os
import re
import subprocess
import time

PROBE = "flashinfer_jit"


def major(version):
    return version.split(".")[0] if version else None


def jit_nvcc():
    if os.environ.get("FLASHINFER_NVCC"):
        return os.environ["FLASHINFER_NVCC"]
    from flashinfer.jit.cpp_ext import get_cuda_path

    return os.path.join(get_cuda_path(), "bin", "nvcc")


def nvcc_release(nvcc):
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return None
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else None


def probe(args):
    try:
        import flashinfer
        import torch
    except ImportError as exc:
        return {"status": "skip", "summary": f"flashinfer or torch is not installed: {exc}", "details": {}}
    if not torch.cuda.is_available():
        return {"status": "skip", "summary": "no usable GPU", "details": {"flashinfer": flashinfer.__version__}}
    from flashinfer.jit import env as jit_env

    nvcc = jit_nvcc()
    release = nvcc_release(nvcc)
    details = {"flashinfer": flashinfer.__version__, "torch_cuda": torch.version.cuda, "nvcc": nvcc,
               "nvcc_release": release, "cache_dir": str(jit_env.FLASHINFER_JIT_DIR),
               "arch": "sm_%d%d" % torch.cuda.get_device_capability(0),
               "cuda_arch_list_env": os.environ.get("FLASHINFER_CUDA_ARCH_LIST")}
    warnings = []
    if release and major(release) != major(torch.version.cuda):
        warnings.append(f"nvcc {release} major differs from torch's CUDA {torch.version.cuda} (flashinfer#5145)")
    details["warnings"] = warnings
    hidden = int(args.get("hidden", 4096))
    x = torch.randn(64, 2 * hidden, device="cuda", dtype=torch.float16)
    started = time.monotonic()
    try:
        y = flashinfer.activation.silu_and_mul(x)
        torch.cuda.synchronize()
    except Exception as exc:  # the JIT's own failure text is the finding
        details["compile_s"] = round(time.monotonic() - started, 2)
        return {"status": "fail", "summary": f"JIT build or run failed: {type(exc).__name__}: {str(exc)[:300]}",
                "details": details}
    details["first_call_s"] = round(time.monotonic() - started, 3)
    started = time.monotonic()
    flashinfer.activation.silu_and_mul(x)
    torch.cuda.synchronize()
    details["second_call_s"] = round(time.monotonic() - started, 4)
    ref = torch.nn.functional.silu(x[..., :hidden].float()) * x[..., hidden:].float()
    err = (y.float() - ref).abs().max().item()
    details["max_abs_err"] = err
    if not err < 2e-2:
        return {"status": "fail", "summary": f"silu_and_mul differs from torch by {err:.3g}", "details": details}
    summary = (f"silu_and_mul JIT for {details['arch']} with nvcc {release}: first call "
               f"{details['first_call_s']:.1f}s, max error {err:.1e}")
    if warnings:
        summary += "; WARNING: " + "; ".join(warnings)
    return {"status": "pass", "summary": summary, "details": details}
