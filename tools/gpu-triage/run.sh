#!/usr/bin/env bash
# Real SGLang 0.5.11 logs of the triage families one GPU can show, and the facts the bench's
# pre-flight reads, on the GPU machine (docs/evidence/h200-triage-round1/README.md):
#   bash tools/gpu-triage/run.sh        (carry .sgl/bundle.tar.xz, .sgl/setup.sh, .sgl/make_tiny_model.py)
# Writes to $OUT: nvidia-smi -q, df, the pre-flight host report, and one server log per case
# (CASES="port_in_use ..." picks some; a server that does not end is stopped after LIMIT=60 s):
#   port_in_use          --port held by another process
#   context_length_flag  --context-length far above the model's 4096
#   context_request      a ready server (--context-length 256) sent a 600-token prompt
#   ninja_missing        a FlashInfer JIT build with a PATH that has neither ninja nor nvcc: the server,
#                        then flashinfer alone (ninja_missing_flashinfer.log)
#   nvcc_missing         the same with ninja on PATH (found by the venv's python) and still no nvcc
#   nccl_duplicate_gpu   two NCCL ranks on one GPU (torch_dist_case.py, the image's torch)
#   tcpstore_port_in_use torch.distributed's TCPStore on a taken port
set -u
OUT=${OUT:-/tmp/gpu-triage}
mkdir -p "$OUT"
bash .sgl/setup.sh > /tmp/gpu-triage-setup.log 2>&1 || { tail -20 /tmp/gpu-triage-setup.log; exit 1; }
PY=/opt/sgl/bin/python
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1
df -k /dev/shm / /tmp > "$OUT/df.txt" 2>&1
SCRIPT=$(python3 -c 'import sys; sys.path.insert(0, "."); from envmgr.bench.preflight import HOST_SCRIPT; print(HOST_SCRIPT)')
"$PY" -I -c "$SCRIPT" > "$OUT/host_report.json" 2>&1
MODEL=/opt/models/tiny-llama
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
[ -f "$MODEL/model.safetensors" ] || "$PY" .sgl/make_tiny_model.py "$MODEL" --arch llama --tokenizer-dir /opt/models/tok > /tmp/gpu-triage-model.log 2>&1
CASES=${CASES:-port_in_use context_length_flag context_request}
FLAGS=(--host 127.0.0.1 --attention-backend triton --sampling-backend pytorch --disable-cuda-graph
       --disable-piecewise-cuda-graph --mem-fraction-static 0.3 --log-level info)
launch() {  # NAME FLAG...: run the server to its end (or $LIMIT s), keep its log and exit code
  local name=$1; shift
  timeout "${LIMIT:-60}" "$PY" -m sglang.launch_server --model-path "$MODEL" "${FLAGS[@]}" "$@" > "$OUT/$name.log" 2>&1
  echo "$name: exit $?" >> "$OUT/exits.txt"
}
if [[ " $CASES " == *" port_in_use "* ]]; then
echo "== port_in_use"
python3 -c "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 30123)); s.listen(); time.sleep(170)" &
HOLDER=$!
sleep 1
launch port_in_use --port 30123
kill $HOLDER 2>/dev/null
fi
if [[ " $CASES " == *" context_length_flag "* ]]; then
echo "== context_length_flag"
launch context_length_flag --port 30124 --context-length 1000000
fi
if [[ " $CASES " == *" context_request "* ]]; then
echo "== context_request"
"$PY" -m sglang.launch_server --model-path "$MODEL" "${FLAGS[@]}" --port 30125 --context-length 256 \
  > "$OUT/context_request.log" 2>&1 &
SERVER=$!
for _ in $(seq 1 120); do
  curl -sf http://127.0.0.1:30125/health > /dev/null 2>&1 && break
  sleep 1
done
PROMPT=$(python3 -c 'print("hello " * 600)')
curl -s -X POST http://127.0.0.1:30125/generate -H 'Content-Type: application/json' \
  -d "{\"text\": \"$PROMPT\", \"sampling_params\": {\"max_new_tokens\": 8}}" > "$OUT/context_request_response.json" 2>&1
echo "context_request: http $(cat "$OUT/context_request_response.json" | head -c 300)" >> "$OUT/exits.txt"
sleep 2
kill -TERM $SERVER 2>/dev/null; sleep 5; kill -KILL $SERVER 2>/dev/null
pkill -f "sglang" 2>/dev/null
fi
fi_jit_case() {  # NAME PATH: the server and flashinfer alone, with this PATH and no CUDA toolkit
  local name=$1 path=$2
  echo "$name: PATH=$path; ninja: $(PATH=$path command -v ninja || echo none); nvcc: $(PATH=$path command -v nvcc || echo none)" >> "$OUT/exits.txt"
  PATH=$path CUDA_HOME=/usr/local/cuda-missing FLASHINFER_WORKSPACE_BASE=/tmp/fi-$name \
    timeout "${LIMIT:-60}" "$PY" -m sglang.launch_server --model-path "$MODEL" --host 127.0.0.1 --port 30126 \
    --attention-backend flashinfer --sampling-backend pytorch --disable-cuda-graph --disable-piecewise-cuda-graph \
    --mem-fraction-static 0.3 --log-level info > "$OUT/$name.log" 2>&1
  echo "$name: exit $?" >> "$OUT/exits.txt"
  PATH=$path CUDA_HOME=/usr/local/cuda-missing FLASHINFER_WORKSPACE_BASE=/tmp/fi-$name-alone \
    timeout "${LIMIT:-60}" "$PY" -c 'import torch, flashinfer; x = torch.randn(4, 256, device="cuda", dtype=torch.float16); print(flashinfer.norm.rmsnorm(x, torch.ones(256, device="cuda", dtype=torch.float16)))' \
    > "$OUT/${name}_flashinfer.log" 2>&1
  echo "${name}_flashinfer: exit $?" >> "$OUT/exits.txt"
}
NOCUDA_PATH=/opt/sgl/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
if [[ " $CASES " == *" ninja_missing "* ]]; then
echo "== ninja_missing"
fi_jit_case ninja_missing "$NOCUDA_PATH"
fi
if [[ " $CASES " == *" nvcc_missing "* ]]; then
echo "== nvcc_missing"
NINJA_DIR=$(dirname "$(command -v ninja || "$PY" -c 'import ninja, os; print(os.path.join(ninja.BIN_DIR, "ninja"))')")
fi_jit_case nvcc_missing "$NINJA_DIR:$NOCUDA_PATH"
fi
for case in nccl_duplicate_gpu tcpstore_port_in_use; do
if [[ " $CASES " == *" $case "* ]]; then
echo "== $case"
timeout "${LIMIT:-60}" python3 tools/gpu-triage/torch_dist_case.py "${case#*_}" > "$OUT/$case.log" 2>&1
echo "$case: exit $?" >> "$OUT/exits.txt"
fi
done
cat "$OUT/exits.txt"
for f in $CASES; do echo "== $f (last lines)"; tail -6 "$OUT/$f.log" | cut -c1-300; done
