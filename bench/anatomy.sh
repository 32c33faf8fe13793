#!/usr/bin/env bash
# What the memory anatomy costs: one smaps read of a process of 5,000 mappings
# (build/vlmload-bench-smaps, bench/smaps-cost.c), and the loop's send lag at 1,000 requests/s
# against the mock with the anatomy off, at its default cadence (5 s) and read every sample
# (100 ms), the monitor following the mock and a process of 5,000 mappings (whose smaps read is
# the slow one). Printed figures, not a test; docs/memory.md gives a run's.
#
# Usage: bench/anatomy.sh [SECONDS]   (default 10 per run; BUILD=dir for another build folder)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
secs=${1:-10}
for b in vlmload vlmmock vlmload-bench-smaps; do
  [ -x "$build/$b" ] || { echo "bench/anatomy.sh: no $build/$b; build first (cmake --build $build)" >&2; exit 1; }
done
tmp=$(mktemp -d)
cleanup() {
  [ -n "${mock:-}" ] && kill "$mock" 2>/dev/null || true
  [ -n "${HOLD_PID:-}" ] && kill "$HOLD_PID" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

"$build/vlmload-bench-smaps" 5000 50

"$build/vlmmock" --port 0 --port-file "$tmp/port" --latency 1ms >/dev/null 2>&1 &
mock=$!
coproc HOLD { exec "$build/vlmload-bench-smaps" --hold 5000; }
read -r big <&"${HOLD[0]}"
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
port=$(cat "$tmp/port")

echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
echo "send lag at 1000 requests/s for ${secs}s, monitoring the mock and a process of 5,000 mappings:"
printf '  %-24s %10s %10s %10s %12s\n' "anatomy" "lag p50" "lag p99" "lag max" "rate"
for every in 0 5s 100ms; do
  "$build/vlmload" --url "http://127.0.0.1:$port" --rate 1000 --duration "${secs}s" \
    --monitor-pid "mock=$mock" --monitor-pid "big=$big" --sample-every 100ms \
    --anatomy-every "$every" --output "$tmp/s.json" --quiet >/dev/null
  python3 - "$tmp/s.json" "$every" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
lag = s["send_lag_ms"]
name = {"0": "off (--anatomy-every 0)", "5s": "every 5s (default)"}.get(sys.argv[2], "every " + sys.argv[2])
print("  %-24s %8.3f ms %8.3f ms %8.3f ms %10.1f/s" % (name, lag["p50"], lag["p99"], lag["max"],
                                                   s["rate"]["achieved"]))
EOF
done
