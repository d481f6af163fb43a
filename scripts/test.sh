#!/usr/bin/env bash
# Set-up (scripts/setup.sh), then the whole test suite: the no-throw rule,
# ctest, and each fuzz target for a short run when clang is available.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

scripts/check_no_throw.sh
CMAKE_ARGS="${CMAKE_ARGS:-} ${CI:+-DONNXKIT_WERROR=ON}" scripts/setup.sh
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}"

# Short fuzz runs (clang with ASan + UBSan); FUZZ_SECONDS=0 skips them.
if [ "${FUZZ_SECONDS:-30}" != 0 ] && command -v clang++ >/dev/null; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-30} scripts/fuzz.sh
fi
