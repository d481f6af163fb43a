#!/usr/bin/env bash
# Installs what onnxkit needs on Debian 12, then configures and builds it.
#
#   scripts/setup.sh            install packages (if missing), configure, build
#   BUILD_DIR=out scripts/setup.sh   build elsewhere (default: build)
#   ONNXKIT_SKIP_APT=1 ...      skip the package step
#
# Works as root or through sudo. Safe to run again: packages already present
# are not reinstalled, and the build is incremental.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo}

PACKAGES=(
  build-essential cmake ninja-build pkg-config git python3
  libprotobuf-dev protobuf-compiler libonnx-dev libcli11-dev libabsl-dev
  libdnnl-dev libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev
  python3-onnx python3-numpy libonnx-testdata
  libjpeg-dev libpng-dev libtiff-dev libwebp-dev libopenjp2-7-dev
  clang libclang-rt-14-dev
)

if [ "${ONNXKIT_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
    echo "setup: installing ${missing[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
