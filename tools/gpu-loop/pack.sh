#!/usr/bin/env bash
# Pack what the GPU loop (loop.sh) carries into .loop/ (git-ignored), as ONE xz stream: the GPU
# machine takes at most 64 MiB per call, and the SGLang wheels (.sgl/bundle.tar.xz, 48 MiB) plus
# uv (17 MiB as a wheel) only fit compressed together (57 MiB with the tree's 5.5 MiB).
#
#   bash tools/gpu-loop/pack.sh          # ~4 min of xz once; a second run with the same inputs is a no-op
#
# .loop/loop.tar.xz holds:
#   wheels/     the 56 wheels of tools/gpu-sglang (SGLang 0.5.11's closure the GPU image lacks):
#               the offline wheel source (python.sources.find_links) of the loop's specs
#   envmgr/     envmgr's own dependencies the GPU image lacks (pytest-testinfra, ahocorasick-rs);
#               pydantic comes from wheels/
#   syslib/     libnuma.so.1 (sglang-kernel's common_ops needs it)
#   bin/uv      the uv of requirements/test.txt: envmgr resolves and installs with it
# The tokenizer comes from the tree (tools/gpu-sglang/tok), not from here.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=$ROOT/.loop
UV_VERSION=$(sed -nE 's/^uv==([^ ]+).*/\1/p' "$ROOT/requirements/test.txt")
EXTRA=(pytest-testinfra==10.2.2 ahocorasick-rs==1.0.3)
mkdir -p "$OUT"
bash "$ROOT/tools/gpu-sglang/build_bundle.sh" "$ROOT/.sgl" >/dev/null
STAMP=$( (sha256sum "$ROOT/.sgl/bundle.tar.xz" | cut -d' ' -f1; echo "uv==$UV_VERSION ${EXTRA[*]}") | sha256sum | cut -d' ' -f1)
if [ -f "$OUT/loop.tar.xz" ] && [ "$(cat "$OUT/loop.stamp" 2>/dev/null)" = "$STAMP" ]; then
  echo "pack: $OUT/loop.tar.xz is up to date"; exit 0
fi
STAGE=$(mktemp -d /tmp/loop-stage.XXXX); trap 'rm -rf "$STAGE"' EXIT
python3 - "$ROOT/.sgl/bundle.tar.xz" "$STAGE" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    t.extractall(sys.argv[2], members=[m for m in t.getmembers() if not m.name.startswith("tok")], filter="data")
PY
(cd "$STAGE" && sha256sum --quiet -c <(grep -v ' tok/' MANIFEST.sha256))
plats=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plats[@]}" \
  -d "$STAGE/envmgr" "${EXTRA[@]}"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${plats[@]}" \
  -d "$STAGE/uvwheel" "uv==$UV_VERSION"
mkdir -p "$STAGE/bin"
python3 - "$STAGE/uvwheel" "$STAGE/bin/uv" <<'PY'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("uv-*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".data/scripts/uv"))
    pathlib.Path(sys.argv[2]).write_bytes(z.read(name))
PY
chmod 755 "$STAGE/bin/uv"; rm -rf "$STAGE/uvwheel"
tar -C "$STAGE" -cf - wheels envmgr syslib bin | xz -T1 -9e > "$OUT/loop.tar.xz.part"
mv "$OUT/loop.tar.xz.part" "$OUT/loop.tar.xz"
echo "$STAMP" > "$OUT/loop.stamp"
ls -la "$OUT/loop.tar.xz"
