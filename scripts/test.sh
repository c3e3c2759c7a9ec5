#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# The README's test command: installs what is missing, builds, runs every test suite (fast,
# integration, stress) and ends with the line "N passed, M failed" counted from meson's test log.
# Exits non-zero when anything failed. Extra arguments go to `meson test` (e.g. --suite fast).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || exit 1
bash scripts/build.sh || { echo "0 passed, 1 failed"; exit 1; }

# Fewer jobs than meson's default: the integration tests start EAL and memif in parallel
# processes, and the stress tests want a core each.
meson test -C build --print-errorlogs --num-processes 2 "$@"
rc=$?

python3 - build/meson-logs/testlog.json <<'PY'
import json, sys
passed = failed = skipped = 0
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line).get("result", "")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
PY
summary=$?
[ "$rc" -eq 0 ] && [ "$summary" -eq 0 ]
