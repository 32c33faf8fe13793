#!/usr/bin/env bash
# The main job, in about a minute: installs what the demo needs when it is missing (Debian 12:
# the compiler, CMake, the libraries and gnuplot; tools/test.sh installs the rest), builds vlmload
# and its mock VLM server, and starts the mock with a known memory behaviour: it holds 64 KiB for
# good per image it decodes (a leak of 62.5 MB per 1000 images) and caches 512 KiB per image until
# a cache flush gives them back. vlmload sends it images from corpus/ at 50 requests/s for 30
# seconds with streamed replies and a drained cache flush every 50 requests, samples the mock's
# memory every 200 ms, and ends with the summary, the verdict of each memory series and the paths
# of their plot and of the HTML report. Everything goes to build/demo/.
#
#   tools/demo.sh [--duration D] [--build DIR] [--out DIR]
#
# --build DIR runs the vlmload and vlmmock already built in DIR (nothing installed or built);
# --duration sets the seconds of load (default 30s).
set -euo pipefail
cd "$(dirname "$0")/.."
duration=30s build="" out=build/demo
while (($#)); do
  case "$1" in
    --duration) duration=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: tools/demo.sh [--duration D] [--build DIR] [--out DIR]" >&2; exit 2 ;;
  esac
done

if [ -z "$build" ]; then
  tools/deps.sh
  build=build
  mkdir -p "$build"
  echo "building vlmload and vlmmock (log: $build/build.log)"
  if ! { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release &&
         cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target vlmload vlmmock; } \
       >"$build/build.log" 2>&1; then
    tail -n 30 "$build/build.log" >&2
    echo "demo: the build failed" >&2
    exit 1
  fi
fi

mkdir -p "$out"
rm -f "$out/port"
"$build/vlmmock" --port 0 --port-file "$out/port" --ttft 30ms --itl 8ms --tokens 16 \
  --leak-kb-per-image 64 --cache-kb-per-image 512 --record "$out/mock-record.jsonl" >/dev/null &
mock=$!
trap 'kill $mock 2>/dev/null; wait $mock 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$out/port" ] && break; sleep 0.05; done
[ -s "$out/port" ] || { echo "demo: the mock server did not start" >&2; exit 1; }

echo "the mock leaks 64 KiB per image (62.5 MB per 1000) and caches 512 KiB per image until a flush"
status=0
"$build/vlmload" --url "http://127.0.0.1:$(cat "$out/port")" --rate 50 --images corpus/ \
  --duration "$duration" --stream --flush-every 50 --monitor-pid "mock=$mock" \
  --sample-every 200ms --analyze --plot "$out/memory.png" --report "$out/report.html" \
  --output "$out/summary.json" --timeline "$out/timeline.csv" \
  --log-requests "$out/requests.jsonl" || status=$?
echo
echo "memory plot:  $out/memory.png"
echo "HTML report:  $out/report.html"
echo "JSON summary: $out/summary.json  timeline: $out/timeline.csv  request log: $out/requests.jsonl"
exit $status
