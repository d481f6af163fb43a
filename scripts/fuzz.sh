#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz and runs
# each for FUZZ_SECONDS (default 60), seeded from testdata/. A crash, leak,
# sanitizer report or timeout fails the script and leaves the reproducer in
# build-fuzz/findings/<target>/.
#
#   FUZZ_SECONDS=3600 scripts/fuzz.sh            # the long run
#   FUZZ_SECONDS=600 scripts/fuzz.sh decode_model_fuzzer
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_DIR=${FUZZ_DIR:-build-fuzz}
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}

CC=clang CXX=clang++ cmake -S . -B "$FUZZ_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DONNXKIT_FUZZ=ON -DONNXKIT_BUILD_TESTS=OFF -DONNXKIT_BUILD_BENCH=OFF -DONNXKIT_ENABLE_CUDA=OFF >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cd tests/fuzz && ls *_fuzzer.cc | sed 's/\.cc$//')
fi
cmake --build "$FUZZ_DIR" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"

for t in "${targets[@]}"; do
  corpus="$FUZZ_DIR/corpus/$t"
  findings="$FUZZ_DIR/findings/$t"
  mkdir -p "$corpus" "$findings"
  seeds=(testdata)
  echo "fuzz: $t for ${SECONDS_PER_TARGET}s"
  "$FUZZ_DIR/tests/fuzz/$t" "$corpus" "${seeds[@]}" -max_total_time="$SECONDS_PER_TARGET" \
    -rss_limit_mb=2048 -timeout=10 -max_len=1048576 -artifact_prefix="$findings/" -print_final_stats=1 \
    2>"$FUZZ_DIR/$t.log" || { tail -40 "$FUZZ_DIR/$t.log"; echo "fuzz: $t FAILED" >&2; exit 1; }
  grep -E "stat::number_of_executed_units|Done [0-9]+ runs" "$FUZZ_DIR/$t.log" | tail -2 || true
done
