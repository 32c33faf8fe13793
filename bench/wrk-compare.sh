#!/usr/bin/env bash
# Closed-loop, text-only throughput of vlmload against wrk on the same static target.
#
# The target is nginx answering every request with a fixed chat-completion JSON (one worker,
# pinned to the last core); each client is pinned to core 0 and keeps 64 connections busy for
# DURATION seconds with the same POST body. Prints both rates and their ratio, and writes them as
# JSON to bench/results/wrk-compare.json (or $OUT).
#
# Usage: bench/wrk-compare.sh [DURATION_SECONDS]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10}
conns=64

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
if ((${#need[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
tools/deps.sh --test
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

cores=$(nproc)
client_core=0
server_core=$((cores > 1 ? cores - 1 : 0))
work=$(mktemp -d)
trap '[ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"' EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
reply='{"id":"b","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}'
cat > "$work/nginx.conf" <<CONF
worker_processes 1;
worker_cpu_affinity auto;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_buffer_size 64k;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port;
    location / { default_type application/json; return 200 '$reply'; }
  }
}
CONF
taskset -c "$server_core" "$nginx_bin" -c "$work/nginx.conf" -p "$work"
sleep 0.5

body='{"model":"m","messages":[{"role":"user","content":"Describe this image in detail."}],"max_tokens":128,"temperature":0}'
cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
LUA

echo "target: nginx on 127.0.0.1:$port (core $server_core); clients on core $client_core; $conns connections, ${dur}s"
wrk_out=$(taskset -c "$client_core" wrk -t1 -c"$conns" -d"${dur}s" -s "$work/post.lua" "http://127.0.0.1:$port/v1/chat/completions")
wrk_rps=$(printf '%s\n' "$wrk_out" | awk '/Requests\/sec/ {print $2}')
echo "wrk:     $wrk_rps req/s"

taskset -c "$client_core" build/vlmload --url "http://127.0.0.1:$port" --model m --rate 0 \
  --concurrency "$conns" --duration "${dur}s" --quiet --output "$work/vl.json"
vl_rps=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.0f" % d["rate"]["ok_per_s"]); sys.exit(d["requests"]["failed"] > 0)' "$work/vl.json")
echo "vlmload: $vl_rps req/s"

out=${OUT:-bench/results/wrk-compare.json}
mkdir -p "$(dirname "$out")"
python3 - "$wrk_rps" "$vl_rps" "$out" "$dur" "$conns" <<'PY'
import json, sys
wrk, vl, out, dur, conns = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
ratio = vl / wrk
print("ratio vlmload/wrk: %.2f (target >= 0.80)" % ratio)
json.dump({"workload": "text-only POST, closed loop", "connections": int(conns),
           "duration_s": float(dur), "wrk_rps": wrk, "vlmload_rps": vl, "ratio": ratio},
          open(out, "w"), indent=2)
PY
