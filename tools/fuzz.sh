#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ in build-fuzz/ (clang-14, ASan + UBSan) and runs
# each for the given time, then prints per target: seconds run, executions, corpus size, and
# whether it crashed. A crash input lands in build-fuzz/artifacts/TARGET/; copy it into
# tests/fuzz/regressions/TARGET/ with the fix, and the replay test keeps it fixed.
#
#   tools/fuzz.sh TARGET|all SECONDS     (FUZZ_JOBS=2 runs two targets at a time; default 1)
#
# Needs clang-14 and libclang-rt-14-dev (Debian). The working corpus grows in
# build-fuzz/corpus/TARGET/, seeded from tests/fuzz/corpus/TARGET/, which stays as committed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 2 ]; then
  echo "usage: $0 TARGET|all SECONDS" >&2
  exit 2
fi
what=$1
secs=$2
jobs=${FUZZ_JOBS:-1}
all=$(sed -n 's/^set(VL_FUZZ_TARGETS \(.*\))$/\1/p' tests/fuzz/targets.cmake)
if [ "$what" = all ]; then
  targets=$all
elif [[ " $all " == *" $what "* ]]; then
  targets=$what
else
  echo "$0: unknown target '$what' (one of: $all)" >&2
  exit 2
fi
cc=${CC:-clang-14}
command -v "$cc" >/dev/null || { echo "$0: $cc not found (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 1; }

dir=build-fuzz
cmake -S . -B "$dir" -DCMAKE_C_COMPILER="$cc" -DVL_FUZZ=ON -DBUILD_TESTING=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j"$jobs" --target $(for t in $targets; do echo "fuzz_$t"; done) >/dev/null

# Per-target limits: the longest input worth trying, and how long one may take.
max_len() {
  case $1 in
    image) echo 65536 ;;
    config | units) echo 4096 ;;
    *) echo 65536 ;;
  esac
}

run_one() {
  local t=$1 work=$dir/corpus/$1 art=$dir/artifacts/$1/ log=$dir/logs/$1.log
  mkdir -p "$work" "$art" "$dir/logs"
  local start=$SECONDS rc=0
  (cd "$dir" && "./tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -max_len="$(max_len "$t")" -print_final_stats=1 -artifact_prefix="artifacts/$t/" \
      "corpus/$t" "../tests/fuzz/corpus/$t") >"$log" 2>&1 || rc=$?
  local execs units
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  units=$(ls "$work" | wc -l)
  printf '%-9s %6ss %12s execs %6s inputs  %s\n' "$t" "$((SECONDS - start))" "${execs:-?}" \
    "$units" "$([ $rc -eq 0 ] && echo ok || echo "CRASH (rc $rc; $log, $art)")"
  return $rc
}

status=0
running=0
for t in $targets; do
  run_one "$t" &
  running=$((running + 1))
  if [ $running -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
done
while [ $running -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
