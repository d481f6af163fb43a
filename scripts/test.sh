#!/usr/bin/env bash
# Set-up (scripts/setup.sh), then the whole test suite: the no-throw rule,
# ctest, and each fuzz target for a short run when clang is available.
# Ends with one line "tests: N passed, N failed".
#
#   FUZZ_SECONDS=0 scripts/test.sh     skip the fuzz runs (default 60 s each)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

scripts/check_no_throw.sh
CMAKE_ARGS="${CMAKE_ARGS:-} ${CI:+-DONNXKIT_WERROR=ON}" scripts/setup.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}" 2>&1 | tee "$log" || status=$?

fuzz_failed=0
if [ "${FUZZ_SECONDS:-60}" != 0 ] && command -v clang++ >/dev/null; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-60} scripts/fuzz.sh || fuzz_failed=1
fi

summary=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -1 || true)
failed=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$summary")
total=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$summary")
if [ -z "$summary" ]; then failed=1; total=1; status=1; fi
echo "tests: $((total - failed)) passed, $((failed + fuzz_failed)) failed"
[ "$status" = 0 ] && [ "$fuzz_failed" = 0 ]
