#!/usr/bin/env bash
# What --metrics-listen costs the load: the send lag (actual send minus intended start) at an
# open-loop rate, without the endpoint and with it scraped every second, the two runs one after
# the other against the same mock. Each configuration runs REPEATS times, alternating, and the
# send lag's p50, p99 and max and the achieved rate of each run are printed, with the median p99
# of each configuration.
#
# Usage: bench/metrics.sh [RATE [SECONDS [REPEATS]]]   (default 5000 requests/s, 20 s, 3)
# BUILD names the build directory (default build-bench, a Release build made here).
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-5000}
dur=${2:-20}
repeats=${3:-3}
build=${BUILD:-build-bench}
if [ ! -x "$build/vlmload" ] || [ "${BUILD:-}" = "" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
  cmake --build "$build" -j"$(nproc)" --target vlmload vlmmock >/dev/null
fi
work=$(mktemp -d)
mock_pid=""
scraper_pid=""
cleanup() {
  [ -n "$scraper_pid" ] && kill "$scraper_pid" 2>/dev/null
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$build/vlmmock" --host 127.0.0.1 --port 0 --port-file "$work/port" >/dev/null 2>&1 &
mock_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
url="http://127.0.0.1:$(cat "$work/port")"
mport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

# One run; $1 is "off" or "scraped". Prints "p50 p99 max achieved scrapes".
one() {
  local mode=$1 out="$work/$1.json" extra=() scrapes=0
  if [ "$mode" = scraped ]; then
    extra=(--metrics-listen "127.0.0.1:$mport")
    # A scrape every second for the run's length, as Prometheus at scrape_interval 1s.
    (
      n=0
      while :; do
        sleep 1
        if curl -s -o /dev/null --noproxy '*' "http://127.0.0.1:$mport/metrics"; then
          n=$((n + 1))
          echo "$n" >"$work/scrapes"
        fi
      done
    ) &
    scraper_pid=$!
  fi
  echo 0 >"$work/scrapes"
  "$build/vlmload" --url "$url" --rate "$rate" --duration "${dur}s" --concurrency 2000 --quiet \
    --output "$out" "${extra[@]}" >/dev/null 2>"$work/stderr" || {
    cat "$work/stderr" >&2
    exit 1
  }
  if [ -n "$scraper_pid" ]; then
    kill "$scraper_pid" 2>/dev/null
    wait "$scraper_pid" 2>/dev/null || true
    scraper_pid=""
    scrapes=$(cat "$work/scrapes")
  fi
  python3 - "$out" "$scrapes" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
lag = s["send_lag_ms"]
print("%.3f %.3f %.3f %.1f %s" % (lag["p50"], lag["p99"], lag["max"], s["rate"]["achieved"],
                                  sys.argv[2]))
PY
}

echo "send lag at $rate requests/s for ${dur}s, $repeats runs each (load average $(cut -d' ' -f1 /proc/loadavg))"
printf '%-8s %10s %10s %10s %10s %8s\n' mode p50_ms p99_ms max_ms achieved scrapes
off=() on=()
for i in $(seq "$repeats"); do
  for mode in off scraped; do
    read -r p50 p99 max ach sc < <(one "$mode")
    printf '%-8s %10s %10s %10s %10s %8s\n' "$mode" "$p50" "$p99" "$max" "$ach" "$sc"
    if [ "$mode" = off ]; then off+=("$p99"); else on+=("$p99"); fi
  done
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "median send lag p99: without the endpoint $(median "${off[@]}") ms, scraped every second $(median "${on[@]}") ms"
