#!/usr/bin/env bash
# The mission's loop on the GPU machine, from the CLI as an operator runs it (issue 27):
#   apply (offline wheels, torch inherited) -> probe gate -> bench -> apply of a one-component
#   change -> probe gate -> bench of both -> report -> rollback -> verify; then the probe
#   suite's cold and warm times.
#
#   bash tools/gpu-loop/pack.sh                  # here, once: .loop/loop.tar.xz (57 MiB)
#   device run, carry [".loop"]:  bash tools/gpu-loop/loop.sh
#
# Every command and its output goes to $OUT/loop.log (with exit codes and wall times); the
# results, locks and records come back as $OUT/records.tar.gz, the report as
# $OUT/report.{html,json} and $OUT/throughput.png. A step that fails is logged and the loop
# goes on where the later steps still mean something. Idempotent on a warm machine: the
# unpacked wheels are reused, and a second run starts from a fresh envmgr home.
set -uo pipefail
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

say "# envmgr loop on $(hostname), $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
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
rm -rf "$ENVMGR_HOME"

# --- generation 1: SGLang 0.5.11 from the wheel directory, the image's torch inherited ---------
step "validate generation 1's spec" envmgr validate "$SPEC1"
step "plan generation 1" envmgr plan "$SPEC1"
step "apply generation 1 (gated: gpu, torch_cuda, flashinfer_jit)" envmgr apply "$SPEC1" --yes
step "generations" envmgr generations
# the tiny random-weight model, written by the generation's own interpreter (its transformers)
step "tiny model, inside generation 1" envmgr run -- python tools/gpu-sglang/make_tiny_model.py \
  /opt/models/tiny-llama --arch llama --tokenizer-dir tools/gpu-sglang/tok
step "bench generation 1" envmgr bench "$SPEC1" --env current

# --- generation 2: one component changed (the CUDA allocator's configuration) -----------------
step "plan generation 2" envmgr plan "$SPEC2"
step "apply generation 2 (gated)" envmgr apply "$SPEC2" --yes
step "generations" envmgr generations
step "bench both generations (generation 1's cells are recorded: resumed)" envmgr bench "$SPEC2" --env 1 --env 2
step "report" envmgr report --env 1 --env 2 --out "$OUT/report"

# --- back to generation 1, and check it --------------------------------------------------------
step "rollback to generation 1" envmgr rollback --to 1
step "status" envmgr status
step "verify the current generation" envmgr verify

# --- the probe suite's time at one GPU (the gate ran it cold; these are warm) ------------------
for i in 1 2 3; do
  step "probe suite, run $i" envmgr probe --spec "$SPEC1"
done
step "probe suite, JSON" envmgr probe --spec "$SPEC1" --json

# --- what comes back (at most 8 files) ---------------------------------------------------------
cp "$OUT/report/report.html" "$OUT/report/report.json" "$OUT/report/throughput.png" "$OUT/" 2>/dev/null
tar -C "$ENVMGR_HOME" -czf "$OUT/records.tar.gz" --exclude='venv' --exclude='*.pyc' . 2>>"$LOG"
rm -rf "$OUT/report"
say ""; say "# loop done in $(( $(date +%s) - T0 )) s"
