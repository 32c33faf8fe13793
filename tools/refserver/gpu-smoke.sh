#!/usr/bin/env bash
# A short check of the two-process server on a GPU: two servers side by side, the image processor
# on CUDA with the front's caching allocator (shared) and with a memory pool per call (per-call).
# Says PASS or FAIL for: the front opens CUDA at its first image (not at start, not at a text
# request), in its own torch figures and in NVML's list of processes; and the front's reserved
# memory after the images is smaller with a pool per call. Prints each step's per-process figures.
# Usage: tools/refserver/gpu-smoke.sh VLMLOAD OUTDIR [REQUESTS]   (needs torch, transformers, aiohttp,
# pillow, curl and nvidia-smi; writes OUTDIR/{shared,per-call}-{timeline.csv,summary.json,vlmload.txt,
# server.log}; REFSERVER_ARGS are added to the servers' options). VLMLOAD may be a command with its environment: "env LD_LIBRARY_PATH=carry/lib carry/vlmload".
set -u
V=${1:?usage: gpu-smoke.sh VLMLOAD OUTDIR [REQUESTS]}
OUT=${2:?usage: gpu-smoke.sh VLMLOAD OUTDIR [REQUESTS]}
N=${3:-100}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
fails=0
check() { if [ "$1" = 1 ]; then echo "PASS $2"; else echo "FAIL $2"; fails=$((fails + 1)); fi; }
# One metric's sample for a process role: metric NAME ROLE URL.
metric() { curl -s "$3/metrics" | awk -v k="$1{process=\"$2\"}" '$1 == k {print $2}'; }
show() {
  curl -s "$1/metrics" | grep -E '^(torch_cuda_memory_(reserved|allocated)|torch_cuda_max_memory_reserved|refserver_cuda_initialized|process_resident)' |
    awk '{ if ($1 ~ /initialized/) print "  " $0; else printf "  %s %.1f MB\n", $1, $2 / 1048576 }' 
}
model_pid() { curl -s "$1/refserver/stats" | python3 -c 'import json, sys; print(json.load(sys.stdin)["processes"]["model"]["pid"])'; }
on_gpu() { nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | awk -F', ' -v p="$1" '$1 == p {print $2}'; }
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
gpu=--monitor-gpu
nvidia-smi -L 2> /dev/null | grep -q GPU || gpu= # NVML per process where there is a GPU
t0=$(date +%s)
declare -A PID URL
for pool in shared per-call; do
  rm -f "$OUT/$pool.port"
  python3 "$HERE/refserver.py" --port 0 --port-file "$OUT/$pool.port" --processor torchvision-cuda \
    --processor-pool "$pool" ${REFSERVER_ARGS:-} > "$OUT/$pool-server.log" 2>&1 &
  PID[$pool]=$!
done
trap 'kill ${PID[shared]} ${PID[per-call]} 2>/dev/null' EXIT
for pool in shared per-call; do
  for _ in $(seq 1 240); do [ -s "$OUT/$pool.port" ] && break; sleep 0.5; done
  [ -s "$OUT/$pool.port" ] || { echo "FAIL $pool: the server did not start"; tail "$OUT/$pool-server.log"; exit 1; }
  URL[$pool]=http://127.0.0.1:$(cat "$OUT/$pool.port")
  echo "$pool: ready after $(($(date +%s) - t0)) s; front ${PID[$pool]}, model $(model_pid "${URL[$pool]}")"
done
python3 - > "$OUT/image.json" << 'EOF'
import base64, io, json
from PIL import Image
b = io.BytesIO()
Image.linear_gradient("L").resize((1280, 720)).convert("RGB").save(b, "JPEG")
url = "data:image/jpeg;base64," + base64.b64encode(b.getvalue()).decode()
print(json.dumps({"messages": [{"role": "user", "content": [
    {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "hi"}]}],
    "max_tokens": 4}))
EOF
for pool in shared per-call; do
  u=${URL[$pool]} f=${PID[$pool]}
  echo "== $pool: started"; show "$u"
  check "$([ "$(metric refserver_cuda_initialized front "$u")" = 0 ] && [ -z "$(on_gpu "$f")" ] && echo 1)" \
    "$pool: the front has no CUDA context at start (torch and NVML)"
  curl -s -o /dev/null "$u/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
  check "$([ "$(metric refserver_cuda_initialized front "$u")" = 0 ] && echo 1)" "$pool: nor after a text request"
  curl -s -o /dev/null "$u/v1/chat/completions" -d @"$OUT/image.json"
  echo "== $pool: after the first image (front on the GPU: $(on_gpu "$f"))"; show "$u"
  check "$([ "$(metric refserver_cuda_initialized front "$u")" = 1 ] && [ -n "$(on_gpu "$f")" ] && echo 1)" \
    "$pool: the first image opens the front's CUDA context"
done
for pool in shared per-call; do
  u=${URL[$pool]}
  $V --url "$u" --rate 15 --requests "$N" --resolution 224x224-1920x1080 --unique-images --max-tokens 8 \
    --monitor-tree "server=${PID[$pool]}" $gpu --sample-every 250ms \
    --monitor-prom "$u/metrics#torch_cuda_memory_reserved_bytes,torch_cuda_max_memory_reserved_bytes,torch_cuda_memory_allocated_bytes,refserver_cuda_initialized" \
    --timeline "$OUT/$pool-timeline.csv" --output "$OUT/$pool-summary.json" > "$OUT/$pool-vlmload.txt" 2>&1 &
done
wait %3 %4
declare -A RES
for pool in shared per-call; do
  u=${URL[$pool]} f=${PID[$pool]}
  echo "== $pool: after $N images (front on the GPU: $(on_gpu "$f"), model: $(on_gpu "$(model_pid "$u")"))"
  show "$u"
  grep -E '^  (requests|rate) ' "$OUT/$pool-vlmload.txt"
  RES[$pool]=$(metric torch_cuda_memory_reserved_bytes front "$u")
done
check "$(awk -v a="${RES[per-call]}" -v b="${RES[shared]}" 'BEGIN {print (a + 0 < b + 0) ? 1 : 0}')" \
  "the front reserves less with a pool per call (${RES[per-call]} B) than shared (${RES[shared]} B)"
for pool in shared per-call; do
  curl -s -o /dev/null "${URL[$pool]}/flush_cache"
  echo "== $pool: after a flush"; show "${URL[$pool]}"
done
echo "$(($(date +%s) - t0)) s; $fails failed"
exit $((fails > 0))
