#!/usr/bin/env bash
# Installs what is missing, builds vlmload and its mock VLM server, starts the mock on a free
# loopback port and runs the main job against it for 20 seconds: images from corpus/ at 50
# requests/s (Poisson), streamed replies, and a drained cache flush every 50 requests. Prints the
# summary; the JSON summary, timeline and request log go to build/demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
mkdir -p build
echo "building vlmload and vlmmock (log: build/build.log)"
if ! { cmake -S . -B build -DCMAKE_BUILD_TYPE=Release &&
       cmake --build build -j"$(nproc 2>/dev/null || echo 2)"; } >build/build.log 2>&1; then
  tail -n 30 build/build.log >&2
  echo "demo: the build failed" >&2
  exit 1
fi

out=build/demo
mkdir -p "$out"
rm -f "$out/port"
build/vlmmock --port 0 --port-file "$out/port" --ttft 30ms --itl 8ms --tokens 64 \
  --record "$out/mock-record.jsonl" >/dev/null &
mock=$!
trap 'kill $mock 2>/dev/null; wait $mock 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$out/port" ] && break; sleep 0.05; done
[ -s "$out/port" ] || { echo "demo: the mock server did not start" >&2; exit 1; }

build/vlmload --url "http://127.0.0.1:$(cat "$out/port")" --rate 50 --images corpus/ \
  --flush-every 50 --duration 20s --stream --max-tokens 64 --output "$out/summary.json" \
  --timeline "$out/timeline.csv" --sample-every 200ms --log-requests "$out/requests.jsonl"
echo
echo "JSON summary: $out/summary.json  timeline: $out/timeline.csv  log: $out/requests.jsonl"
