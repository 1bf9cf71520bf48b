#!/usr/bin/env bash
# The mission's loop on the GPU machine, from the CLI as an operator runs it (issue 27):
#   apply (offline wheels, torch inherited) -> probe gate -> bench -> apply of a one-component
#   change -> probe gate -> bench of both -> report -> rollback -> verify; then the probe
#   suite's cold and warm times.
#
#   bash tools/gpu-loop/pack.sh                  # here, once: .loop/loop.tar.xz (57 MiB)
#   device run, carry [".loop"]:  bash tools/gpu-loop/loop.sh first     # generation 1 and its bench
#   device run, carry [".loop"]:  bash tools/gpu-loop/loop.sh second    # the rest, on the same warm machine
#   (or `loop.sh all`: about 12 minutes, more than one call of the device tool may take)
#
# Every command and its output goes to $OUT/loop.log (with exit codes and wall times); the
# results, locks and records come back as $OUT/records.tar.gz, the report as
# $OUT/report.{html,json} and $OUT/throughput.png. A step that fails is logged and the loop
# goes on where the later steps still mean something. Idempotent on a warm machine: the
# unpacked wheels are reused, and a second run starts from a fresh envmgr home.
set -uo pipefail
STAGE=${1:-all}
[ "$STAGE" = second ] && export KEEP_HOME=1
source "$(dirname "$0")/setup.sh"

if [ "$STAGE" != second ]; then
# --- generation 1: SGLang 0.5.11 from the wheel directory, the image's torch inherited ---------
step "validate generation 1's spec" envmgr validate "$SPEC1"
step "plan generation 1" envmgr plan "$SPEC1"
step "apply generation 1 (gated: gpu, torch_cuda, flashinfer_jit)" envmgr apply "$SPEC1" --yes
step "generations" envmgr generations
# the tiny random-weight model, written by the generation's own interpreter (its transformers)
step "tiny model, inside generation 1" envmgr run -- python tools/gpu-sglang/make_tiny_model.py \
  /opt/models/tiny-llama --arch llama --tokenizer-dir tools/gpu-sglang/tok
step "bench generation 1" envmgr bench "$SPEC1" --env current
fi
[ "$STAGE" = first ] && { say "# first stage done in $(( $(date +%s) - T0 )) s"; exit 0; }

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
