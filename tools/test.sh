#!/usr/bin/env bash
# The whole test suite: installs what is missing, then builds and runs every test twice, in a
# release build and in an AddressSanitizer + UndefinedBehaviorSanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh --test

jobs=$(nproc 2>/dev/null || echo 2)
status=0
for variant in release asan; do
  dir=build-test-$variant
  opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  [ "$variant" = asan ] && opts+=(-DVL_SANITIZE=ON)
  echo "== $variant build ($dir)"
  cmake -S . -B "$dir" "${opts[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs"
  echo "== $variant tests"
  (cd "$dir" && ctest --output-on-failure -j"$jobs") || status=1
done
exit $status
