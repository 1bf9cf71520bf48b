"""torch's CUDA build: version, CUDA tag, whether its arch list covers each GPU, a kernel runs."""

PROBE = "torch_cuda"


def covered(arch_list, major, minor):
    """Native code for sm_XY, or PTX (compute_XY at or below the GPU) the driver can JIT."""
    cc = major * 10 + minor
    if f"sm_{cc}" in arch_list or f"sm_{cc}a" in arch_list:
        return "native"
    ptx = [int(a[8:].rstrip("af")) for a in arch_list if a.startswith("compute_")]
    if any(p <= cc for p in ptx):  # the driver JIT-compiles older PTX for a newer GPU
        return "ptx"
    return None


def probe(args):
    try:
        import torch
    except ImportError as exc:
        return {"status": "skip", "summary": f"torch is not installed: {exc}", "details": {}}
    details = {"torch": torch.__version__, "cuda": torch.version.cuda,
               "arch_list": torch.cuda.get_arch_list() if torch.version.cuda else []}
    if not torch.version.cuda:
        return {"status": "fail", "summary": f"torch {torch.__version__} is a CPU build", "details": details}
    if not torch.cuda.is_available():
        return {"status": "skip", "summary": "no usable GPU (torch.cuda.is_available() is False)",
                "details": details}
    details["nccl"] = ".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else None
    devices, problems = [], []
    for i in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(i)
        how = covered(details["arch_list"], major, minor)
        devices.append({"index": i, "name": torch.cuda.get_device_name(i), "capability": f"{major}.{minor}",
                        "covered": how})
        if how is None:
            problems.append(f"GPU {i} sm_{major}{minor} is not in torch's arch list")
    details["devices"] = devices
    if problems:
        return {"status": "fail", "summary": "; ".join(problems), "details": details}
    a = torch.randn(512, 512, device="cuda", dtype=torch.float32, generator=None)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    b = a @ a
    end.record()
    torch.cuda.synchronize()
    expected = (a.double().cpu() @ a.double().cpu())
    err = (b.double().cpu() - expected).abs().max().item() / expected.abs().max().item()
    details.update(matmul_ms=round(start.elapsed_time(end), 3), matmul_rel_err=err)
    if not err < 1e-2:  # TF32 may be on; anything near 1e-2 is a broken kernel, not rounding
        return {"status": "fail", "summary": f"a 512x512 matmul is wrong (relative error {err:.2e})",
                "details": details}
    return {"status": "pass", "details": details,
            "summary": f"torch {torch.__version__} (CUDA {torch.version.cuda}) runs on "
                       f"{', '.join(sorted({d['name'] + ' sm_' + d['capability'].replace('.', '') for d in devices}))}"}
