#!/usr/bin/env bash
# Real output of the programs whose formats triage's fallback reads, made here (no GPU needed):
#   bash tools/triage-formats/make_fixtures.sh [OUT]   (default tests/fixtures/triage/formats)
# - rust_panic.log: a Rust program's panic (this machine's rustc; >= 1.73 puts the message on
#   the line after "panicked at <location>:");
# - cmake_error.log: CMake's message(FATAL_ERROR) (the cmake wheel from PyPI): "CMake Error at
#   CMakeLists.txt:N (message):" and the message indented below;
# - python_warning.log: Python's warnings.formatwarning ("<file>:<line>: UserWarning: ...");
# - ptxas_error.log: ptxas (the nvidia-cuda-nvcc 13.0 wheel from PyPI) refusing a Hopper-only
#   instruction for sm_120: "ptxas <file>, line N; error   : ..." and "ptxas fatal   : ...".
# Each is the program's stderr, unedited. Needs rustc and pip (for cmake and ptxas).
set -euo pipefail
OUT=$(realpath -m "${1:-tests/fixtures/triage/formats}")
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

cat > panic.rs <<'RS'
fn main() {
    let loaded: Result<u32, String> = Err("DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")".to_string());
    loaded.unwrap();
}
RS
rustc panic.rs
env -u RUST_BACKTRACE ./panic 2> "$OUT/rust_panic.log" || true
rustc --version > "$OUT/versions.txt"

python3 -m pip install -q --root-user-action=ignore --target cmake-wheel "cmake>=3.20,<5"
mkdir project
cat > project/CMakeLists.txt <<'CM'
cmake_minimum_required(VERSION 3.20)
project(archcheck LANGUAGES NONE)
set(CMAKE_CUDA_ARCHITECTURES 121)
if(CMAKE_CUDA_ARCHITECTURES STREQUAL "121")
  message(FATAL_ERROR "Compute capability 121 used, use 121a or 121f for Blackwell specific optimizations")
endif()
CM
PYTHONPATH=cmake-wheel cmake-wheel/bin/cmake -S project -B project/build > /dev/null 2> "$OUT/cmake_error.log" || true
PYTHONPATH=cmake-wheel cmake-wheel/bin/cmake --version | head -1 >> "$OUT/versions.txt"

python3 -c "import warnings; warnings.warn(\"Failed to initialize NumPy: No module named 'numpy'\")" 2> "$OUT/python_warning.log"
python3 --version >> "$OUT/versions.txt"

python3 -m pip download -q --no-deps -d nvcc-wheel "nvidia-cuda-nvcc==13.0.*"
python3 -m zipfile -e nvcc-wheel/*.whl nvcc
PTXAS=$(find nvcc -name ptxas -type f | head -1)
chmod +x "$PTXAS"
cat > hopper_only.ptx <<'PTX'
.version 8.8
.target sm_120
.address_size 64

.visible .entry k(.param .u64 p)
{
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [p];
  tensormap.replace.tile.global_address.global.b1024.b64 [%rd1], %rd1;
  ret;
}
PTX
"$PTXAS" -arch=sm_120 hopper_only.ptx -o hopper_only.cubin 2> "$OUT/ptxas_error.log" || true
"$PTXAS" --version | tail -1 >> "$OUT/versions.txt"
