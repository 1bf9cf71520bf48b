#!/usr/bin/env bash
# Real CUDA and NVML errors on the GPU machine, for triage's library reading
# (docs/evidence/h200-library-errors/README.md):
#   bash tools/gpu-triage/library_errors.sh      (carry .whl holding nvidia-ml-py 13.615.71's wheel)
# Writes to $OUT: the error table of the libcudart torch loads (cudart_table.tsv: code, name,
# message, from cudaGetErrorName/cudaGetErrorString on this host), and one log per case, each the
# real stderr of a real failure:
#   invalid_ordinal   torch on a GPU index the host does not have
#   device_assert     a kernel's device-side assert (an out-of-range index)
#   no_device         CUDA_VISIBLE_DEVICES naming no GPU, then a tensor on cuda
#   nvml_bad_index    pynvml asked for a GPU index the host does not have
set -u
OUT=${OUT:-/tmp/library-errors}
mkdir -p "$OUT"
PY=${PY:-python3}
"$PY" - > "$OUT/cudart_table.tsv" 2> "$OUT/cudart_table.err" <<'PYEOF'
import ctypes, glob, os, torch
libs = sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "cu*", "lib", "libcudart.so.*")))
lib = ctypes.CDLL(libs[0])
lib.cudaGetErrorName.restype = ctypes.c_char_p
lib.cudaGetErrorString.restype = ctypes.c_char_p
print("# from", os.path.realpath(libs[0]))
for code in range(1, 1000):
    name = lib.cudaGetErrorName(code).decode()
    if "nrecognized" not in name:
        print(f"{code}\t{name}\t{lib.cudaGetErrorString(code).decode()}")
PYEOF
case_() { local name=$1; shift; "$@" > "$OUT/$name.log" 2>&1; echo "$name: exit $?" >> "$OUT/exits.txt"; }
case_ invalid_ordinal "$PY" -c 'import torch; torch.cuda.set_device(7); torch.zeros(1, device="cuda")'
case_ device_assert "$PY" -c 'import torch; x = torch.zeros(4, device="cuda"); i = torch.tensor([9], device="cuda"); print(x[i]); torch.cuda.synchronize()'
case_ no_device env CUDA_VISIBLE_DEVICES=-1 "$PY" -c 'import torch; torch.zeros(1, device="cuda")'
"$PY" -m pip install -q --no-deps --target /tmp/pynvml .whl/nvidia_ml_py-*.whl > /dev/null 2>&1
case_ nvml_bad_index env PYTHONPATH=/tmp/pynvml "$PY" -c 'import pynvml; pynvml.nvmlInit(); print(pynvml.nvmlDeviceGetCount()); pynvml.nvmlDeviceGetHandleByIndex(7)'
nvidia-smi --query-gpu=name,driver_version --format=csv > "$OUT/nvidia-smi.csv" 2>&1
