#!/usr/bin/env bash
# Build the offline SGLang bundle for the GPU machine, on a machine that reaches PyPI and Debian:
#   bash tools/gpu-sglang/build_bundle.sh [OUT_DIR]   (default .sgl/ at the project root, git-ignored;
#                                                      ~400 MB downloaded once, 46 MiB result)
# OUT_DIR then holds bundle.tar.xz, setup.sh and make_tiny_model.py: carry that folder (only it)
# to the GPU machine and run `bash .sgl/setup.sh` there (see tools/gpu-sglang/README.md).
# An existing bundle whose MANIFEST matches is kept: a second run costs nothing.
# The 56 wheels of wheels.txt are fetched by exact version; sglang-kernel and xgrammar are slimmed
# (see README.md), every wheel is stored uncompressed so that xz compresses it, and the result is
# checked against MANIFEST.sha256 (the bytes that ran on the H200).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=$(mkdir -p "${1:-$ROOT/.sgl}" && cd "${1:-$ROOT/.sgl}" && pwd)
cp "$HERE/setup.sh" "$HERE/make_tiny_model.py" "$OUT/"
if [ -f "$OUT/bundle.tar.xz" ] && [ -f "$OUT/bundle.manifest" ] && cmp -s "$OUT/bundle.manifest" "$HERE/MANIFEST.sha256"; then
  echo "bundle: $OUT/bundle.tar.xz is already built from this MANIFEST.sha256"; exit 0
fi
DL=$OUT/download; SLIM=$OUT/slim; STAGE=$OUT/stage
rm -rf "$STAGE"; mkdir -p "$DL" "$SLIM" "$STAGE/wheels" "$STAGE/syslib"
sed -E 's/^([^-]+)-([^-]+)-.*/\1==\2/' "$HERE/wheels.txt" > "$OUT/requirements.txt"
plats=(); for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_24 manylinux_2_17 manylinux2014 manylinux_2_5 manylinux1; do plats+=(--platform "${p}_x86_64"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plats[@]}" -d "$DL" -r "$OUT/requirements.txt"
# apache-tvm-ffi has two Linux builds; the one that ran on the H200 is the manylinux2014 one.
rm -f "$DL"/apache_tvm_ffi-0.1.9-*.whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d "$DL" apache-tvm-ffi==0.1.9
python3 "$HERE/slim_wheel.py" "$DL"/sglang_kernel-0.4.2-*.whl "$SLIM" 'sgl_kernel/flash_ops*.so' 'sgl_kernel/sm100/*' '*.a'
python3 "$HERE/slim_wheel.py" "$DL"/xgrammar-0.1.32-*.whl "$SLIM" '*.a'
ws=(); while read -r f; do
  pre=$(echo "$f" | sed -E 's/^([^-]+-[^-]+)-.*/\1-/')   # name-version-: pip may pick another platform tag
  s=$(ls "$SLIM/$pre"*.whl 2>/dev/null | head -1 || true); d=$(ls "$DL/$pre"*.whl 2>/dev/null | head -1 || true)
  ws+=("${s:-$d}")
done < "$HERE/wheels.txt"
python3 "$HERE/store_wheel.py" "$STAGE/wheels" "${ws[@]}"
cp -r "$HERE/tok" "$STAGE/tok"
( cd "$OUT" && apt-get download -q libnuma1 >/dev/null 2>&1 && dpkg -x libnuma1_*.deb numa ) \
  && cp "$OUT"/numa/usr/lib/x86_64-linux-gnu/libnuma.so.1.* "$STAGE/syslib/libnuma.so.1"
( cd "$STAGE" && find wheels syslib tok -type f | sort | xargs sha256sum > MANIFEST.sha256 )
if diff -q <(sort -k2 "$HERE/MANIFEST.sha256") <(sort -k2 "$STAGE/MANIFEST.sha256") >/dev/null; then
  echo "bundle contents match the H200-proven MANIFEST.sha256"
else
  echo "warning: contents differ from the H200-proven MANIFEST.sha256:"; diff <(sort -k2 "$HERE/MANIFEST.sha256") <(sort -k2 "$STAGE/MANIFEST.sha256") | head || true
fi
tar -C "$STAGE" -cf - MANIFEST.sha256 wheels syslib tok | xz -T1 -6 > "$OUT/bundle.tar.xz.part"
mv "$OUT/bundle.tar.xz.part" "$OUT/bundle.tar.xz"
cp "$STAGE/MANIFEST.sha256" "$OUT/bundle.manifest"
rm -rf "$DL" "$SLIM" "$STAGE" "$OUT/numa" "$OUT"/libnuma1_*.deb
ls -la "$OUT/bundle.tar.xz"
