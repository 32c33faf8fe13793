#!/usr/bin/env bash
# The whole test suite: installs what is missing, then builds and runs every test twice, in a
# release build and in an AddressSanitizer + UndefinedBehaviorSanitizer build, and ends with the
# ten slowest tests of the two. Tests run side by side, two per core (most of them wait on the
# mock's delays); those that hold tight timing bounds or keep a core busy keep out of each other's
# way through ctest locks (tests/CMakeLists.txt, the timing lanes), and the sanitized build leaves
# them out.
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
  (cd "$dir" && ctest --output-on-failure -j$((jobs * 2)) --output-junit junit.xml) || status=1
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
