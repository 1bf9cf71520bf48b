#!/usr/bin/env bash
# Sourced by loop.sh and probe_timing.sh on the GPU machine: the wheels where the specs look for
# them (/opt/loop/wheels), uv on PATH, envmgr's own dependencies, a fresh envmgr home, and the
# step() helper that logs each command with its exit code and wall time to $LOG.
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
OUT=${OUT:-/tmp/loop-out}
mkdir -p "$OUT"
LOG=$OUT/loop.log
LOOP=/opt/loop                       # the specs' find_links is /opt/loop/wheels
export ENVMGR_HOME=/opt/envmgr-home
export PYTHONUNBUFFERED=1 NO_COLOR=1
PY=/opt/torch/.venv/bin/python3      # the image's interpreter: envmgr runs on it, torch is inherited from it
SPEC1=specs/h200-sglang-offline.yaml
SPEC2=specs/h200-sglang-offline-alloc.yaml
: > "$LOG"
T0=$(date +%s)

say() { echo "$*" | tee -a "$LOG"; }
# step NAME CMD...: the command line, its output, exit code and wall time, in the log
step() {
  local name=$1; shift
  say ""; say "### $name"; say "\$ $*"
  local t=$(date +%s.%N)
  "$@" >>"$LOG" 2>&1; local rc=$?
  say "# exit $rc, $(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$t" "$(date +%s.%N)") s"
  return $rc
}
envmgr() { "$PY" -m envmgr "$@"; }

say "# envmgr on $(hostname), $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$LOG" 2>&1

# --- the machine: wheels where the specs look for them, uv, envmgr's own dependencies ---------
if [ ! -f "$LOOP/.unpacked" ] || ! cmp -s "$LOOP/.unpacked" <(sha256sum .loop/loop.tar.xz | cut -d' ' -f1); then
  rm -rf "$LOOP"; mkdir -p "$LOOP"
  "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2], filter="data")' \
    .loop/loop.tar.xz "$LOOP" || { say "unpacking .loop/loop.tar.xz failed"; exit 2; }
  sha256sum .loop/loop.tar.xz | cut -d' ' -f1 > "$LOOP/.unpacked"
fi
say "# unpacked: $(ls "$LOOP/wheels" | wc -l) wheels in $LOOP/wheels ($(( $(date +%s) - T0 )) s)"
install -m 755 "$LOOP/bin/uv" /usr/local/bin/uv   # envmgr finds a uv on PATH when the uv package is absent
ldconfig -p | grep -q 'libnuma\.so\.1 ' || { cp "$LOOP/syslib/libnuma.so.1" /usr/local/lib/ && ldconfig; }
# envmgr itself runs from the tree; pydantic & co. from the SGLang wheels, the rest from envmgr/
rm -rf /tmp/envmgr-site
"$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/envmgr-site \
  "$LOOP"/wheels/pydantic-*.whl "$LOOP"/wheels/pydantic_core-*.whl "$LOOP"/wheels/annotated_types-*.whl \
  "$LOOP"/wheels/typing_inspection-*.whl "$LOOP"/envmgr/*.whl >>"$LOG" 2>&1
export PYTHONPATH=/tmp/envmgr-site:$ROOT
[ -n "${KEEP_HOME:-}" ] || rm -rf "$ENVMGR_HOME"   # KEEP_HOME=1: go on with the generations there

