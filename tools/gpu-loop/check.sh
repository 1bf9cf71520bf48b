#!/usr/bin/env bash
# A short check of the loop's build side on the GPU machine, for code changed after a full loop:
# apply gen 1 (gated), status, verify, apply gen 2 (gated), rollback, status, verify, generations.
#   device run, carry [".loop"]:  bash tools/gpu-loop/check.sh
set -uo pipefail
source "$(dirname "$0")/setup.sh"
step "apply generation 1 (gated)" envmgr apply "$SPEC1" --yes
step "status" envmgr status
step "verify" envmgr verify
step "apply generation 2 (gated)" envmgr apply "$SPEC2" --yes
step "rollback" envmgr rollback
step "status" envmgr status
step "verify" envmgr verify
step "generations" envmgr generations
step "gc --dry-run" envmgr gc --dry-run --keep 0
say "# done in $(( $(date +%s) - T0 )) s"
