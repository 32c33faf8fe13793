#!/usr/bin/env bash
# Runs vlmload end to end under valgrind against the mock (which runs normally): text, streamed,
# corpus images, unique images, flushes, faults, Ctrl-C and nobody listening. Fails on any valgrind error or any
# definitely lost byte, and on a run that ends with an unexpected status.
#
#   tools/valgrind.sh [BUILD_DIR]      (default build/; VLMLOAD and VLMMOCK override the binaries)
#
# Every run is short; the whole takes about a minute. Outputs go to a temporary directory, removed
# at the end unless a run failed (its valgrind log is then kept and named).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
vlmload=${VLMLOAD:-$build/vlmload}
vlmmock=${VLMMOCK:-$build/vlmmock}
command -v valgrind >/dev/null || { echo "$0: valgrind not found (apt-get install valgrind)" >&2; exit 1; }
for b in "$vlmload" "$vlmmock"; do
  [ -x "$b" ] || { echo "$0: $b: not built" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/vlmload-valgrind-XXXXXX")
mock_pid=
keep=0
cleanup() {
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null || true
  if [ $keep -eq 0 ]; then rm -rf "$tmp"; else echo "valgrind logs kept in $tmp" >&2; fi
}
trap cleanup EXIT

# Starts a mock with the given options; sets url.
start_mock() {
  if [ -n "$mock_pid" ]; then
    kill "$mock_pid" 2>/dev/null || true
    wait "$mock_pid" 2>/dev/null || true
  fi
  rm -f "$tmp/port"
  "$vlmmock" --host 127.0.0.1 --port 0 --port-file "$tmp/port" "$@" >/dev/null 2>&1 &
  mock_pid=$!
  for _ in $(seq 100); do
    [ -s "$tmp/port" ] && break
    sleep 0.05
  done
  [ -s "$tmp/port" ] || { echo "$0: vlmmock did not start" >&2; exit 1; }
  url="http://127.0.0.1:$(cat "$tmp/port")"
}

vg=(valgrind --quiet --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite
    --error-exitcode=99 --num-callers=30 --suppressions=tools/valgrind.supp)
status=0
runs=0

# check NAME WANT_STATUS [--interrupt] -- vlmload options...
# With --interrupt, SIGINT goes to vlmload once its timeline has a row (the run is under way: a
# signal before vlmload installs its handler would be lost, background jobs ignoring SIGINT).
# Every run is killed after 180 s, whatever happens.
check() {
  local name=$1 want=$2 interrupt=0
  shift 2
  if [ "$1" = --interrupt ]; then
    interrupt=1
    shift
  fi
  [ "$1" = -- ] && shift
  local log=$tmp/$name.valgrind start=$SECONDS rc=0
  timeout -s KILL 180 "${vg[@]}" --log-file="$log" "$vlmload" --url "$url" --quiet \
    --output "$tmp/$name.json" --log-requests "$tmp/$name.jsonl" --timeline "$tmp/$name.csv" \
    "$@" >/dev/null 2>"$tmp/$name.err" &
  local pid=$!
  if [ $interrupt -eq 1 ]; then
    for _ in $(seq 600); do
      [ -s "$tmp/$name.csv" ] && [ "$(wc -l <"$tmp/$name.csv")" -ge 2 ] && break
      sleep 0.1
    done
    # timeout(1) passes the signal on to valgrind, which delivers it to vlmload.
    kill -INT "$pid" 2>/dev/null || true
  fi
  wait "$pid" || rc=$?
  runs=$((runs + 1))
  if [ $rc -eq 99 ] || [ -s "$log" ] || [ $rc -ne "$want" ]; then
    printf '%-14s FAIL  status %d (want %d), %ss; %s\n' "$name" "$rc" "$want" \
      "$((SECONDS - start))" "$log"
    sed 's/^/    /' "$log" | head -40
    sed 's/^/    stderr: /' "$tmp/$name.err" | head -5
    status=1
    keep=1
  else
    printf '%-14s ok    status %d, %ss, 0 errors, 0 bytes definitely lost\n' "$name" "$rc" \
      "$((SECONDS - start))"
  fi
}

start_mock --tokens 8
check text 0 -- --rate 50 --requests 30
check stream 0 -- --rate 50 --requests 30 --stream
check images 0 -- --rate 40 --requests 20 --images corpus --stream
check unique 0 -- --rate 40 --requests 20 --unique-images --resolution 224x224,320x240 \
  --pool-size 4 --image-format mixed

# Conversations: histories, unique images held across turns, think timers, Ctrl-C cutting them.
check turns 0 -- --rate 40 --requests 30 --turns 3 --think-time 20ms --stream --unique-images \
  --resolution 224x224 --pool-size 4 --image-reuse 0.3
check turns-ctrl-c 130 --interrupt -- --rate 20 --duration 60s --turns 4 --think-time 5s \
  --images corpus --grace 300ms

start_mock --profile sglang --latency 5ms
check flush 0 -- --rate 100 --requests 40 --flush-every 10
check flush-inline 0 -- --rate 100 --requests 40 --flush-every 10 --flush-mode inline

start_mock --tokens 8 --fault http500:0.1 --fault reset:0.1 --fault truncate:0.1 \
  --fault malformed:0.1 --fault stall:0.05 --fault reset_after_headers:0.05 --fault huge:0.05 \
  --fault flush500:0.5
check faults 0 -- --rate 100 --requests 40 --timeout 1s --max-response 64KiB --flush-every 10
# A fresh mock: half of its flushes fail, and a run none of whose flushes succeeded fails.
start_mock --tokens 8 --fault http500:0.1 --fault reset:0.1 --fault truncate:0.1 \
  --fault malformed:0.1 --fault stall:0.05 --fault reset_after_headers:0.05 --fault huge:0.05 \
  --fault flush500:0.5
check faults-sse 0 -- --rate 100 --requests 40 --timeout 1s --stream --flush-every 10

start_mock --fault stall:1
check ctrl-c 130 --interrupt -- --rate 20 --duration 60s --grace 300ms --timeout 60s

kill "$mock_pid" 2>/dev/null || true
wait "$mock_pid" 2>/dev/null || true
mock_pid=
check connect 1 -- --model m --rate 50 --requests 10 --connect-timeout 1s

echo "valgrind: $runs runs, $([ $status -eq 0 ] && echo "all clean" || echo "FAILED")"
exit $status
