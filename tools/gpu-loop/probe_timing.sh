#!/usr/bin/env bash
# Where the probe suite's time goes on the GPU machine: generation 1 of the loop applied, then
# the interpreter's own costs (import torch, CUDA init, import flashinfer), each default probe
# alone, and the whole suite three times (warm: the gate ran it once, FlashInfer's JIT cached).
#   device run, carry [".loop"]:  bash tools/gpu-loop/probe_timing.sh
set -uo pipefail
source "$(dirname "$0")/setup.sh"
step "apply generation 1 (the gate runs gpu, torch_cuda, flashinfer_jit cold)" envmgr apply "$SPEC1" --yes
step "status (no drift expected)" envmgr status
COSTS='import time; t0 = time.monotonic(); import torch; t1 = time.monotonic(); torch.zeros(1, device="cuda"); torch.cuda.synchronize(); t2 = time.monotonic(); import flashinfer; t3 = time.monotonic(); print("import torch %.2f s, CUDA init %.2f s, import flashinfer %.2f s" % (t1 - t0, t2 - t1, t3 - t2))'
for i in 1 2; do step "interpreter costs, run $i" envmgr run -- python -c "$COSTS"; done
step "python start alone" envmgr run -- python -c "pass"
for p in gpu toolchain_arch torch_cuda flashinfer_jit flashinfer_allreduce_fusion p2p symm_mem nccl_allreduce nccl_alltoall; do
  step "probe $p alone" envmgr probe --only "$p"
done
for i in 1 2 3; do step "probe suite, run $i" envmgr probe --spec "$SPEC1"; done
say "# done in $(( $(date +%s) - T0 )) s"
