#!/usr/bin/env bash
# The "Reproduce a memory leak" walkthrough of docs/memory.md, run as written there (on a free
# port instead of 8000): the mock leaks 64 KiB per image for real and caches 512 KiB per image
# until a flush, vlmload sends 2000 image requests from corpus/ with a flush every 50, watches the
# mock's RSS and its own accounting, analyses the timeline and plots the two. Writes the timeline
# and the summary to OUTDIR (default build/walkthrough) and the plot to
# docs/images/leak-walkthrough.png.
# Usage: tools/leak-walkthrough.sh [BUILD_DIR [OUTDIR]]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-$build/walkthrough}
mkdir -p "$out"
rm -f "$out/port"
"$build/vlmmock" --port 0 --port-file "$out/port" --latency 20ms --memory-base-mb 256 \
  --leak-kb-per-image 64 --cache-kb-per-image 512 --memory-noise-kb 2048 >/dev/null &
mock=$!
trap 'kill $mock 2>/dev/null; wait $mock 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$out/port" ] && break; sleep 0.05; done
[ -s "$out/port" ] || { echo "leak-walkthrough: the mock server did not start" >&2; exit 1; }
url="http://127.0.0.1:$(cat "$out/port")"

"$build/vlmload" --url "$url" --rate 100 --requests 2000 --warmup 100 --images corpus/ \
  --flush-every 50 --monitor-pid "mock=$mock" \
  --monitor-prom "mock=$url/metrics#vlmmock_memory_bytes" \
  --sample-every 100ms --timeline "$out/timeline.csv" --analyze --output "$out/summary.json"
"$build/vlmload" analyze "$out/timeline.csv" --series rss_mb.mock,prom.mock.vlmmock_memory_bytes \
  --plot docs/images/leak-walkthrough.png --quiet
echo "plot: docs/images/leak-walkthrough.png  timeline: $out/timeline.csv"
