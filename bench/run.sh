#!/usr/bin/env bash
# vlmload against its peers, every workload of issue 6 in one command, on this machine.
#
# Installs what is missing from Debian (wrk, h2load from nghttp2-client, hey, python3-aiohttp,
# nginx-light, GNU time; linux-perf when available), builds vlmload Release, then runs each workload
# against the same target with every client pinned to core 0 and the target (nginx, or the mock) on
# the last core, prints a table of absolute figures and ratios to vlmload, and writes it to
# bench/results/bench.json and bench/results/bench.csv.
#
# Every workload that goes through libcurl (all but 5) also runs its floor: the same libcurl with
# no work per request, build/vlmload-bench-floor (bench/floor.c), on a libuv + multi_socket loop as
# vlmload is wired (--floor-loop poll: a curl_multi_poll loop). Each row shows the floor's figure of
# the same metric and vlmload's ratio to it ("vs floor"), and issue 17's targets are judged
# against it:
#   - text-only closed loop (1): vlmload >= 0.9x the floor's req/s (both loops printed);
#   - 5,000 SSE streams (6): vlmload >= 0.9x the floor's tokens/s;
#   - 10,000 in flight with ~1 MB images (4): vlmload's (peak RSS - images held) / in flight at most
#     3 KiB above the floor's (the floor sends one shared body, curl's buffers sized as vlmload's).
#
#   1. text-only POST, closed loop, 64 connections, static JSON target (nginx): req/s of vlmload,
#      the floor, wrk, h2load --h1, hey and bench/pyclient.py (target >= 0.9x floor, >= 0.8x wrk,
#      >= 12x Python);
#   2. ~1.3 MB image bodies: vlmload streaming 16 distinct images vs wrk's one fixed body of the
#      same size, and the floor's one shared body: bytes/s (target >= 1.0x wrk);
#   3. open loop, Poisson arrivals at 1k, 5k, 20k req/s: achieved rate error and send-lag p50/p99,
#      vlmload vs the floor (bare transfers on vlmload's schedule and ticker) and the Python client
#      (target at 5k: error <= 0.5%, lag p99 <= 1 ms);
#   4. 10,000 in flight against vlmmock --latency 5s, ~1 MB image each: vlmload's peak RSS
#      (/usr/bin/time -v) vs its image pool (target: pool + 64 MiB), and per in-flight request vs
#      the floor's (target: <= floor + 3 KiB);
#   5. --unique-images 1024x1024 JPEG throughput on all cores (target >= 500/s);
#   6. 5,000 concurrent SSE streams of 256 tokens (mock --itl 20ms): tokens/s vs the floor's
#      (target >= 0.9x), CPU per token and the event loop's CPU share (target: under one core).
#
# Usage: bench/run.sh [--quick] [--only N,...] [--duration S] [--repeat N] [more: --help]
# Exit status: 0 every target met, 3 a target missed, 1 the driver could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

case " $* " in
  *" --help "* | *" -h "*) exec python3 bench/driver.py --help ;;
esac

need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
command -v wrk >/dev/null || need+=(wrk)
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v hey >/dev/null || need+=(hey)
/usr/bin/python3 -c 'import aiohttp' 2>/dev/null || need+=(python3-aiohttp)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
[ -x /usr/bin/time ] || need+=(time)
command -v taskset >/dev/null || need+=(util-linux)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
if ((${#need[@]})); then
  echo "installing: ${need[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
# perf is optional (bench/profile.sh and manual profiles); its absence costs nothing here.
if ! command -v perf >/dev/null && ! have linux-perf; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends linux-perf \
    >/dev/null 2>&1 || echo "linux-perf is not available: continuing without it" >&2
fi

tools/deps.sh --test
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target vlmload vlmmock vlmload-bench-image \
  vlmload-bench-floor >/dev/null

exec python3 bench/driver.py "$@"
