#!/usr/bin/env bash
# Instructions per request of each --workers worker against one process's, under callgrind.
#
#   tools/workers-callgrind.sh [BUILD_DIR] [REQUESTS] [WORKERS]
#
# Runs build/vlmmock on a free loopback port, then the same closed-loop text run of REQUESTS
# requests (default 10000) twice under valgrind --tool=callgrind: once as one process
# (--workers 1), once as --workers WORKERS (default 2) with --trace-children=yes, so that each
# worker gets its own profile. Only the instructions inside uv_run are counted (--toggle-collect):
# the load loop, where every request is sent, read and counted, and where a worker reports to
# its parent; not the set-up before it or the files written after it, which a process pays once
# whatever its number of requests. Worker i sends the requests of --shard i/N, whose count is
# computed the same way (ids below REQUESTS with id % N == i). Prints Ir per request of
# the single process and of each worker, and each worker's difference from the single process;
# exits 1 when a worker is more than 5% over.
set -euo pipefail
build=${1:-$(dirname "$0")/../build}
requests=${2:-10000}
workers=${3:-2}
vlmload=$build/vlmload
mock=$build/vlmmock
for b in "$vlmload" "$mock"; do
  [ -x "$b" ] || { echo "tools/workers-callgrind.sh: $b is missing (build first)" >&2; exit 2; }
done
command -v valgrind >/dev/null || { echo "tools/workers-callgrind.sh: needs valgrind" >&2; exit 2; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/vlmload-callgrind-XXXXXX")
mock_pid=
cleanup() {
  [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
"$mock" --host 127.0.0.1 --port 0 --port-file "$dir/port" >/dev/null 2>&1 &
mock_pid=$!
for _ in $(seq 100); do [ -s "$dir/port" ] && break; sleep 0.05; done
url=http://127.0.0.1:$(cat "$dir/port")
common=(--url "$url" --model m --rate 0 --concurrency 16 --requests "$requests" --seed 1 --quiet)
grind=(valgrind --tool=callgrind --toggle-collect=uv_run)

# The Ir total of a callgrind profile.
ir() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }

mkdir "$dir/one" "$dir/many"
"${grind[@]}" --callgrind-out-file="$dir/one/cg.%p" "$vlmload" "${common[@]}" --workers 1 \
  2>"$dir/one.log" || { cat "$dir/one.log" >&2; exit 1; }
"${grind[@]}" --trace-children=yes --callgrind-out-file="$dir/many/cg.%p" "$vlmload" \
  "${common[@]}" --workers "$workers" 2>"$dir/many.log" || { cat "$dir/many.log" >&2; exit 1; }

single=$(ir "$dir"/one/cg.*)
printf 'requests %d, closed loop, concurrency 16 in all, text only (Ir inside the loop, uv_run)\n' \
  "$requests"
printf '%-12s %10s %16s %14s %9s\n' process requests Ir Ir/request vs-single
awk -v ir="$single" -v n="$requests" \
  'BEGIN { printf "%-12s %10d %16d %14.0f %9s\n", "single", n, ir, ir / n, "" }'
# The profiles in pid order: the parent (which sends no load; its own loop only reads the
# workers' reports), then the workers in the order they started.
status=0 i=-1
for f in $(cd "$dir/many" && ls cg.* | sort -t. -k2 -n); do
  w=$(ir "$dir/many/$f")
  if [ $i -lt 0 ]; then
    printf '%-12s %10s %16d\n' parent - "${w:-0}"
    i=0
    continue
  fi
  mine=$(( (requests - i + workers - 1) / workers ))
  line=$(awk -v ir="$w" -v n="$mine" -v s="$single" -v total="$requests" -v i="$i" 'BEGIN {
    per = ir / n; base = s / total; d = (per / base - 1) * 100
    printf "%-12s %10d %16d %14.0f %+8.1f%%\n", "worker " i, n, ir, per, d
    exit (d > 5) }') || status=1
  echo "$line"
  i=$((i + 1))
done
[ "$i" -eq "$workers" ] || { echo "expected $workers worker profiles, found $i" >&2; exit 1; }
[ $status -eq 0 ] && echo "every worker within 5% of one process" ||
  echo "a worker is more than 5% over one process"
exit $status
