"""FlashInfer all-reduce fusion (trtllm_comm): does its arch gate admit this GPU?

The gate is what failed on SM120 in the scenario ("No supported CUDA architectures
found for major versions [9, 10]."); asking it needs no multi-GPU run and no compile.
args["compile"] = true also builds the module (minutes).
"""

PROBE = "flashinfer_allreduce_fusion"


def probe(args):
    try:
        import flashinfer
        import torch
    except ImportError as exc:
        return {"status": "skip", "summary": f"flashinfer or torch is not installed: {exc}", "details": {}}
    if not torch.cuda.is_available():
        return {"status": "skip", "summary": "no usable GPU (the gate reads the GPU's capability)",
                "details": {"flashinfer": flashinfer.__version__}}
    try:
        from flashinfer.jit.comm import gen_trtllm_comm_module
    except ImportError as exc:
        return {"status": "fail", "summary": f"flashinfer {flashinfer.__version__} has no trtllm_comm module: {exc}",
                "details": {"flashinfer": flashinfer.__version__}}
    arch = "sm_%d%d" % torch.cuda.get_device_capability(0)
    details = {"flashinfer": flashinfer.__version__, "arch": arch}
    try:
        spec = gen_trtllm_comm_module()
    except RuntimeError as exc:
        return {"status": "fail", "summary": f"{arch} refused by the fusion module's arch gate: {exc}",
                "details": {**details, "error": str(exc)}}
    details["nvcc_flags"] = [f for f in getattr(spec, "extra_cuda_cflags", None) or [] if "arch=" in f]
    if args.get("compile"):
        spec.build_and_load()
        details["compiled"] = True
    return {"status": "pass", "summary": f"{arch} admitted by the all-reduce fusion arch gate "
                                         f"(flashinfer {flashinfer.__version__})", "details": details}
