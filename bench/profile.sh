#!/usr/bin/env bash
# Instructions per request of workload 1 (text-only POST, closed loop, 64 connections, nginx's
# static chat completion), counted by callgrind, so that a change can be judged by a figure that
# does not depend on the machine's load.
#
# Builds vlmload Release with debug information in build-prof/ (same optimisation as build/), runs a
# fixed number of requests under valgrind --tool=callgrind against nginx on the last core, and prints:
#   - Ir per request for the whole process and for the event loop alone (uv_run, inclusive: what
#     start-up and teardown cost is left out);
#   - the same for the libcurl floor (bench/floor.c, libuv + multi_socket, the same requests), and
#     vlmload's share of it; then for the floor's curl_multi_poll loop (--loop poll);
#   - system calls per request of both, counted natively (perf's syscall tracepoints where the
#     kernel allows them, else strace -c, which slows both and so changes what curl does);
#   - the top functions by inclusive and by self cost (callgrind_annotate).
# Writes bench/results/profile.json (the figures and the top functions) and keeps the raw profile in
# bench/results/callgrind.out.w1 for callgrind_annotate or kcachegrind.
#
# Usage: bench/profile.sh [REQUESTS] [-- VLMLOAD_OPTION...]   (default 20000 requests)
#   e.g. bench/profile.sh 20000 -- --http2
set -euo pipefail
cd "$(dirname "$0")/.."
requests=20000
if [ $# -gt 0 ] && [ "$1" != "--" ]; then requests=$1; shift; fi
[ "${1:-}" = "--" ] && shift
extra=("$@")
top=${TOP:-25}

need=()
command -v valgrind >/dev/null || need+=(valgrind)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
if ((${#need[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
tools/deps.sh --test
cmake -S . -B build-prof -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-g -DBUILD_TESTING=OFF >/dev/null
cmake --build build-prof -j"$(nproc)" --target vlmload vlmload-bench-floor >/dev/null

cores=$(nproc)
server_core=$((cores > 1 ? cores - 1 : 0))
work=$(mktemp -d)
nginx_pid=""
cleanup() {
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
reply='{"id":"b","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":1,"total_tokens":9}}'
cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$port;
    location / { default_type application/json; return 200 '$reply'; }
  }
}
CONF
taskset -c "$server_core" "$nginx_bin" -c "$work/nginx.conf" -p "$work" -g 'daemon off;' &
nginx_pid=$!
for _ in $(seq 100); do
  python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' \
    "$port" 2>/dev/null && break
  sleep 0.05
done

mkdir -p bench/results
out=bench/results/callgrind.out.w1
echo "callgrind: $requests requests, closed loop, 64 connections, nginx on core $server_core" >&2
# Generous bound: callgrind runs vlmload some 50-100 times slower than it runs natively.
timeout 1800 taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$out" \
  build-prof/vlmload --url "http://127.0.0.1:$port" --model m --rate 0 --concurrency 64 \
  --requests "$requests" --quiet --output "$work/summary.json" "${extra[@]}" 2> "$work/valgrind.log" ||
  { tail -20 "$work/valgrind.log" >&2; exit 1; }

floor_out=bench/results/callgrind.out.floor
timeout 1800 taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$floor_out" \
  build-prof/vlmload-bench-floor --url "http://127.0.0.1:$port/v1/chat/completions" -c 64 \
  -n "$requests" > "$work/floor.json" 2> "$work/valgrind-floor.log" ||
  { tail -20 "$work/valgrind-floor.log" >&2; exit 1; }
floor_total=$(callgrind_annotate "$floor_out" | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
# The same floor around curl_multi_poll (--loop poll), the cheaper of libcurl's two loops.
poll_out=bench/results/callgrind.out.floor-poll
timeout 1800 taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$poll_out" \
  build-prof/vlmload-bench-floor --url "http://127.0.0.1:$port/v1/chat/completions" -c 64 \
  -n "$requests" --loop poll > "$work/floor-poll.json" 2> "$work/valgrind-floor-poll.log" ||
  { tail -20 "$work/valgrind-floor-poll.log" >&2; exit 1; }
poll_total=$(callgrind_annotate "$poll_out" | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)

# System calls per request, natively: 20,000 requests of each client.
calls="sendto recvfrom poll epoll_wait epoll_ctl"
count_calls() { # name command...: writes "name syscall count" lines
  local name=$1; shift
  local events=""
  for c in $calls; do events+="${events:+,}syscalls:sys_enter_$c"; done
  if perf stat -x, -e "$events" -o "$work/perf.$name" "$@" > /dev/null 2>&1; then
    awk -F, -v n="$name" '$1 ~ /^[0-9]+$/ { sub("syscalls:sys_enter_", "", $3); print n, $3, $1 }' \
      "$work/perf.$name"
  else
    strace -f -c -o "$work/strace.$name" "$@" > /dev/null 2>&1
    awk -v n="$name" -v want=" $calls " 'index(want, " " $NF " ") { print n, $NF, $4 }' \
      "$work/strace.$name"
  fi
}
{
  count_calls vlmload taskset -c 0 build-prof/vlmload --url "http://127.0.0.1:$port" --model m \
    --rate 0 --concurrency 64 --requests 20000 --quiet --output "$work/s2.json" "${extra[@]}"
  count_calls floor taskset -c 0 build-prof/vlmload-bench-floor \
    --url "http://127.0.0.1:$port/v1/chat/completions" -c 64 -n 20000
  count_calls floor-poll taskset -c 0 build-prof/vlmload-bench-floor \
    --url "http://127.0.0.1:$port/v1/chat/completions" -c 64 -n 20000 --loop poll
} > "$work/syscalls.txt"

# The caller trees name each function's object ([libcurl.so...]), which the flat listings leave out;
# their "*" lines are every function once, with its inclusive or its self cost.
callgrind_annotate --tree=caller --inclusive=yes --threshold=100 "$out" > "$work/inclusive.txt"
callgrind_annotate --tree=caller --inclusive=no --threshold=100 "$out" > "$work/self.txt"
python3 - "$work/summary.json" "$work/inclusive.txt" "$work/self.txt" "$top" "$requests" \
  "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "${extra[*]:-}" \
  "$work/floor.json" "$floor_total" "$work/syscalls.txt" "$work/floor-poll.json" "$poll_total" <<'PY'
import json, os, re, sys
(summary, inc_path, self_path, top, planned, commit, extra, floor_path, floor_total, sc_path,
 poll_path, poll_total) = sys.argv[1:]
top = int(top)
d = json.load(open(summary))
done = d["requests"]["completed"]
ok = d["requests"]["ok"]
total = None

def rows(path):
    """(Ir, function, object) of every '*' line of a callgrind_annotate caller tree, costliest
    first; sets the program total."""
    global total
    out = []
    for line in open(path):
        m = re.match(r"\s*([\d,]+)\s+(?:\([\s\d.]+%\)\s+)?(\*\s+)?(.*\S)\s*$", line)
        if not m:
            continue
        ir, star, name = int(m.group(1).replace(",", "")), m.group(2), m.group(3)
        if name.startswith("PROGRAM TOTALS"):
            total = ir
        o = re.match(r"(.*) \[(.*)\]$", name)
        if star and o:  # lines without an object repeat an inlined file's view of the same function
            fn = o.group(1).rsplit(":", 1)[-1]
            out.append((ir, fn, os.path.basename(o.group(2))))
    out.sort(key=lambda r: -r[0])
    return out

inc = rows(inc_path)
self_ = rows(self_path)
objs = {}
for ir, fn, ob in self_:
    objs[ob] = objs.get(ob, 0) + ir
loop = next((ir for ir, fn, ob in inc if fn == "uv_run"), None)
print("requests: %d completed, %d ok (planned %s)%s; commit %s"
      % (done, ok, planned, (" options: " + extra) if extra else "", commit))
print("Ir total:            %15s   %10.0f per request" % (format(total, ","), total / done))
if loop:
    print("Ir in the loop:      %15s   %10.0f per request  (uv_run, inclusive)"
          % (format(loop, ","), loop / done))
floor = json.load(open(floor_path))
floor_ir = int(floor_total) / floor["ok"] if floor.get("ok") else None
if floor_ir:
    print("floor's Ir total:    %15s   %10.0f per request  (bench/floor.c, libuv loop: "
          "vlmload costs %.2fx, the floor is %.2fx of it)"
          % (format(int(floor_total), ","), floor_ir, total / done / floor_ir,
             floor_ir / (total / done)))
poll = json.load(open(poll_path))
poll_ir = int(poll_total) / poll["ok"] if poll.get("ok") else None
if poll_ir:
    print("poll floor's Ir:     %15s   %10.0f per request  (--loop poll, curl_multi_poll: "
          "vlmload costs %.2fx, the floor is %.2fx of it)"
          % (format(int(poll_total), ","), poll_ir, total / done / poll_ir,
             poll_ir / (total / done)))
calls = {}
for line in open(sc_path):
    who, name, n = line.split()
    calls.setdefault(who, {})[name] = int(n) / 20000
for who in ("vlmload", "floor", "floor-poll"):
    if who in calls:
        print("syscalls per request, %-8s %s (total %.2f)" % (who + ":", "  ".join(
            "%s %.2f" % kv for kv in sorted(calls[who].items())), sum(calls[who].values())))
print("\nIr per request by object (self cost):")
for ob, ir in sorted(objs.items(), key=lambda r: -r[1])[:10]:
    print("  %10.0f  %5.1f%%  %s" % (ir / done, 100.0 * ir / total, ob))
for title, listing in (("inclusive", inc), ("self", self_)):
    print("\ntop %d by %s cost (Ir per request, share of total, function, object):" % (top, title))
    for ir, fn, ob in listing[:top]:
        print("  %10.0f  %5.1f%%  %-40s %s" % (ir / done, 100.0 * ir / total, fn, ob))
fmt = lambda l: [{"function": fn, "object": ob, "ir": ir, "ir_per_request": ir / done}
                 for ir, fn, ob in l[:top]]
json.dump({"commit": commit, "requests": done, "ok": ok, "options": extra,
           "ir_total": total, "ir_per_request": total / done,
           "ir_loop": loop, "ir_loop_per_request": loop / done if loop else None,
           "ir_per_request_by_object": {ob: ir / done for ob, ir in objs.items()},
           "floor_ir_per_request": floor_ir, "poll_floor_ir_per_request": poll_ir,
           "syscalls_per_request": calls,
           "top_inclusive": fmt(inc), "top_self": fmt(self_)},
          open("bench/results/profile.json", "w"), indent=2)
print("\nwritten: bench/results/profile.json, bench/results/callgrind.out.w1 and .floor (for"
      " callgrind_annotate --tree=caller, or kcachegrind)")
PY
