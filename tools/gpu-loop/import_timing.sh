#!/usr/bin/env bash
# Why a probe process costs what it does: `import torch` in the image's own interpreter and in
# generation 1's venv (which inherits that torch through inherit.pth), with -X importtime.
#   device run, carry [".loop"]:  bash tools/gpu-loop/import_timing.sh
set -uo pipefail
source "$(dirname "$0")/setup.sh"
step "apply generation 1" envmgr apply "$SPEC1" --yes
VENV=$ENVMGR_HOME/generations/1/venv/bin/python
T='import time; t = time.monotonic(); import torch; print("import torch: %.2f s" % (time.monotonic() - t))'
for i in 1 2 3; do
  step "image python, run $i" env -u PYTHONPATH "$PY" -c "$T"
  step "venv python, run $i" env -u PYTHONPATH "$VENV" -c "$T"
done
step "venv python, -I, run 1" env -u PYTHONPATH "$VENV" -I -c "$T"
for which in PY VENV; do
  env -u PYTHONPATH "${!which}" -X importtime -c "import torch" 2> "$OUT/importtime-$which.txt"
  say "# $which: slowest cumulative imports"
  sort -t'|' -k2 -n "$OUT/importtime-$which.txt" | tail -12 >> "$LOG"
  say "# $which: slowest self times"
  sort -t'|' -k1.13 -n "$OUT/importtime-$which.txt" | tail -12 >> "$LOG"
done
step "the venv's sys.path" env -u PYTHONPATH "$VENV" -c 'import sys; print("\n".join(sys.path))'
step ".pth files in the base site" ls /opt/torch/.venv/lib/python3.12/site-packages/ --ignore='*' -d
ls /opt/torch/.venv/lib/python3.12/site-packages/*.pth >> "$LOG" 2>&1
step "pycache of torch" sh -c 'ls /opt/torch/.venv/lib/python3.12/site-packages/torch/__pycache__ | head -3; python3 -c "import sys; print(sys.flags.dont_write_bytecode, sys.pycache_prefix)"'
say "# done in $(( $(date +%s) - T0 )) s"
