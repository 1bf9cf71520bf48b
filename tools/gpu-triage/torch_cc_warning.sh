#!/usr/bin/env bash
# torch's own warning that its build has no kernel for this GPU, as the torch on the GPU machine
# prints it (docs/evidence/h200-torch-cc-warning/README.md):
#   bash tools/gpu-triage/torch_cc_warning.sh
# The H200 is in the build, so torch's check (_check_capability) is asked about a CC 7.0 GPU
# instead: _warn_unsupported_code is the function that check calls, given the build's real CCs.
# Writes to $OUT: torch_cc_warning.log (its real stderr), wordings.txt (the lines of
# torch/cuda/__init__.py that print the warnings triage reads), versions.txt.
set -u
OUT=${OUT:-/tmp/torch-cc-warning}
mkdir -p "$OUT"
PY=${PY:-python3}
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_arch_list())' > "$OUT/versions.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv >> "$OUT/versions.txt" 2>&1
INIT=$("$PY" -c 'import torch.cuda, sys; sys.stdout.write(torch.cuda.__file__)')
grep -n "which is of\|is not compatible with the current PyTorch\|no longer supports this GPU\|def _warn_unsupported_code\|def _check_capability\|def _check_cubins" "$INIT" > "$OUT/wordings.txt"
"$PY" - > "$OUT/torch_cc_warning.log" 2>&1 <<'PYEOF'
import torch
import torch.cuda as cuda

torch.cuda.init()
code_ccs = [cuda._extract_arch_version(arch) for arch in cuda.get_arch_list()]
cuda._warn_unsupported_code(0, 70, code_ccs)  # what _check_capability prints for a CC 7.0 GPU
PYEOF
echo "torch_cc_warning: exit $?" > "$OUT/exits.txt"
