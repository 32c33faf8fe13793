#!/usr/bin/env bash
# Regenerates the option reference in docs/options.md (the block between options:begin and
# options:end) from the option table in src/options/configtable.c; the docs test fails until it is run
# after an option changes. The man pages and the completion need no step: the build writes them.
# Usage: tools/update-readme.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake --build "$build" --target vlmload-docs >/dev/null
"$build/vlmload-docs" markdown >"$build/options.md"
python3 - "$build/options.md" <<'PY'
import re, sys
table = open(sys.argv[1]).read()
text = open("docs/options.md").read()
new, n = re.subn(r"<!-- options:begin -->\n.*?<!-- options:end -->",
                 lambda m: "<!-- options:begin -->\n" + table + "<!-- options:end -->", text,
                 flags=re.S)
if n != 1:
    sys.exit("docs/options.md has no options:begin/end block")
open("docs/options.md", "w").write(new)
PY
