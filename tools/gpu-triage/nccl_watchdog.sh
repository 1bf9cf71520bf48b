#!/usr/bin/env bash
# A real NCCL watchdog timeout of the torch on the GPU machine, for triage's nccl_error wordings
# (docs/evidence/h200-nccl-watchdog/README.md):
#   bash tools/gpu-triage/nccl_watchdog.sh
# Writes to $OUT: watchdog_timeout.log (the real stderr of torch_dist_case.py watchdog_timeout),
# exits.txt, versions.txt.
set -u
OUT=${OUT:-/tmp/nccl-watchdog}
mkdir -p "$OUT"
PY=${PY:-python3}
"$PY" -c 'import torch; print("torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())))' > "$OUT/versions.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv >> "$OUT/versions.txt" 2>&1
timeout 120 "$PY" tools/gpu-triage/torch_dist_case.py watchdog_timeout > "$OUT/watchdog_timeout.log" 2>&1
echo "watchdog_timeout: exit $?" >> "$OUT/exits.txt"
