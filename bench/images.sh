#!/usr/bin/env bash
# Image-traffic benchmarks, each printed as a figure and written to bench/results/images.json:
#   1. memory: 2000 requests in flight against a mock that answers after 5 s, each carrying a
#      ~1 MB image; vlmload's peak RSS against the image pool's size (target: pool + 64 MiB);
#   2. unique images: stamped, re-encoded 1024x1024 JPEGs per second on every core (target 500);
#   3. bytes/s of image bodies: vlmload streaming distinct ~1.3 MB images against wrk sending one
#      fixed body of the same size, both closed loop with 64 connections on one core, to nginx on
#      the other (target >= 1.0x).
# Usage: bench/images.sh [SECONDS]   (default 10; the duration of workloads 2 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10}

need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
[ -x /usr/bin/time ] || need+=(time)
if ((${#need[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
tools/deps.sh --test
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
work=$(mktemp -d)
mock=""
cleanup() {
  [ -n "$mock" ] && kill "$mock" 2>/dev/null
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
jq_py() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# 1. Memory with 2000 large requests in flight.
build/vlmmock --port 0 --port-file "$work/mock.port" --latency 5s --max-connections 4096 \
  >/dev/null 2>&1 &
mock=$!
for _ in $(seq 100); do [ -s "$work/mock.port" ] && break; sleep 0.05; done
/usr/bin/time -v -o "$work/time.txt" build/vlmload --url "http://127.0.0.1:$(cat "$work/mock.port")" \
  --model m --rate 0 --concurrency 2000 --requests 4000 --resolution 1024x1024 \
  --image-format jpeg --image-content noise --pool-size 16 --quiet --output "$work/mem.json"
kill "$mock"; wait "$mock" 2>/dev/null || true; mock=""
rss_kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /,"",$2); print $2}' "$work/time.txt")
pool_bytes=$(jq_py "$work/mem.json" 'd["images"]["pool_bytes"]')
img_mean=$(jq_py "$work/mem.json" 'round(d["images"]["bytes"] / d["images"]["sent"])')
ok=$(jq_py "$work/mem.json" 'd["requests"]["ok"]')
echo "1. memory: 4000 requests, 2000 in flight, ${img_mean} B per image: peak RSS $((rss_kb / 1024)) MiB," \
     "pool $((pool_bytes / 1048576)) MiB, overhead $(((rss_kb * 1024 - pool_bytes) / 1048576)) MiB" \
     "(target <= 64 MiB), ok $ok"

# 2. Unique 1024x1024 JPEGs per second.
uniq_line=$(build/vlmload-bench-image "$dur" 1024x1024 jpeg photo 8 | tail -n 1)
uniq_rate=$(printf '%s\n' "$uniq_line" | sed -E 's/.*: ([0-9.]+)\/s over.*/\1/')
echo "2. unique images: $uniq_line"

# 3. Bytes per second of 1.3 MB bodies, vlmload (distinct images) against wrk (one fixed body).
port=$(free_port)
cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_max_body_size 64m;
  client_body_buffer_size 2m;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port;
    location / { default_type application/json; return 200 '{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}'; }
  }
}
CONF
cores=$(nproc)
taskset -c $((cores > 1 ? cores - 1 : 0)) "$nginx_bin" -c "$work/nginx.conf" -p "$work"
sleep 0.5
# Distinct noise JPEGs of about 1.3 MB: the largest images a body is likely to carry.
taskset -c 0 build/vlmload --url "http://127.0.0.1:$port" --model m --rate 0 --concurrency 64 \
  --duration "${dur}s" --resolution 1200x1200 --image-format jpeg --image-content noise \
  --pool-size 16 --quiet --output "$work/vl.json"
vl_bps=$(jq_py "$work/vl.json" 'd["bytes_sent"] / d["duration_s"]')
body_bytes=$(jq_py "$work/vl.json" 'round(d["bytes_sent"] / d["requests"]["sent"])')
python3 -c "import sys; sys.stdout.write('x' * int(sys.argv[1]))" "$body_bytes" > "$work/body.txt"
cat > "$work/post.lua" <<LUA
wrk.method = "POST"
local f = io.open("$work/body.txt", "rb")
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "application/json"
LUA
wrk_out=$(taskset -c 0 wrk -t1 -c64 -d"${dur}s" -s "$work/post.lua" "http://127.0.0.1:$port/v1/chat/completions")
wrk_rps=$(printf '%s\n' "$wrk_out" | awk '/Requests\/sec/ {print $2}')
python3 - "$vl_bps" "$wrk_rps" "$body_bytes" "$rss_kb" "$pool_bytes" "${uniq_rate:-0}" <<'PY'
import json, os, sys
vl_bps, wrk_rps, body, rss_kb, pool, uniq = map(float, sys.argv[1:])
wrk_bps = wrk_rps * body
print("3. image bodies of %.2f MB: vlmload %.0f MB/s, wrk %.0f MB/s, ratio %.2f (target >= 1.0)"
      % (body / 1e6, vl_bps / 1e6, wrk_bps / 1e6, vl_bps / wrk_bps))
os.makedirs("bench/results", exist_ok=True)
json.dump({"memory": {"peak_rss_bytes": rss_kb * 1024, "pool_bytes": pool,
                      "overhead_bytes": rss_kb * 1024 - pool, "target_overhead_bytes": 64 << 20},
           "unique_images_per_s": uniq,
           "image_bodies": {"body_bytes": body, "vlmload_bytes_per_s": vl_bps,
                            "wrk_bytes_per_s": wrk_bps, "ratio": vl_bps / wrk_bps}},
          open("bench/results/images.json", "w"), indent=2)
PY
