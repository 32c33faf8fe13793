#!/usr/bin/env bash
# The whole test suite: installs what is missing, then builds and runs every test twice, in a
# release build and in an AddressSanitizer + UndefinedBehaviorSanitizer build, and ends with the
# ten slowest tests of the two. Release tests run side by side, two per core, and the end-to-end
# tests that hold tight timing bounds take turns (tests/CMakeLists.txt, the lock `timing`);
# sanitized tests run one at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh --test

jobs=$(nproc 2>/dev/null || echo 2)
status=0
start=$SECONDS
for variant in release asan; do
  dir=build-test-$variant
  opts=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  [ "$variant" = asan ] && opts+=(-DVL_SANITIZE=ON)
  echo "== $variant build ($dir)"
  cmake -S . -B "$dir" "${opts[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs"
  echo "== $variant tests"
  # Sanitized tests use several times the CPU and run one at a time: beside each other, the timing
  # bounds they hold with the harness's slack did not hold.
  par=$((jobs * 2))
  [ "$variant" = asan ] && par=1
  (cd "$dir" && ctest --output-on-failure -j"$par" --output-junit junit.xml) || status=1
done
echo "== the ten slowest tests (whole suite: $((SECONDS - start)) s)"
python3 - build-test-release/junit.xml build-test-asan/junit.xml <<'PY'
import os, sys
import xml.etree.ElementTree as ET
rows = []
for path in sys.argv[1:]:
    if os.path.exists(path):
        variant = os.path.basename(os.path.dirname(path)).replace("build-test-", "")
        for case in ET.parse(path).getroot().iter("testcase"):
            rows.append((float(case.get("time", 0)), variant, case.get("name")))
for took, variant, name in sorted(rows, reverse=True)[:10]:
    print("%8.1f s  %-7s  %s" % (took, variant, name))
PY
exit $status
