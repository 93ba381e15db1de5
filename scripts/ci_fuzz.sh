#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer targets (clang, AddressSanitizer + UndefinedBehaviorSanitizer,
# see fuzz/) and runs each for a fixed time, both at once, on a copy of its
# committed seed corpus (fuzz/corpus/). Fails on any crash, leak (but the
# third-party ones fuzz/lsan.supp names), timeout or out-of-memory; the input that caused it is kept under the output directory.
#   ci_fuzz.sh [SECONDS_EACH]           (default 60)
#   FUZZ_OUT=DIR ci_fuzz.sh 1800        keep corpora, logs and crash inputs in DIR
#   FUZZ_NICE=19 ...                    run the fuzzers at that niceness
#   FUZZ_TIMEOUT=S ...                  seconds one input may take (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-60}
BUILD=${FUZZ_BUILD:-build-fuzz}
OUT=${FUZZ_OUT:-$(mktemp -d /tmp/mega_fuzz.XXXXXX)}
mkdir -p "$OUT"

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
      -DCMAKE_CXX_COMPILER=clang++ -DMEGA_FUZZ=ON -DMEGA_BUILD_TESTS=OFF -DMEGA_BUILD_APPS=OFF -DMEGA_WERROR=ON >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target fuzz_model_load fuzz_audio_file

declare -A SEEDS=([model_load]=fuzz/corpus/model [audio_file]=fuzz/corpus/audio)
declare -A PIDS=()
for t in "${!SEEDS[@]}"; do
  mkdir -p "$OUT/$t/corpus" "$OUT/$t/crashes"
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan.supp \
    nice -n "${FUZZ_NICE:-0}" "$BUILD/fuzz/fuzz_$t" -max_total_time="$SECONDS_EACH" -timeout="${FUZZ_TIMEOUT:-30}" -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$OUT/$t/crashes/" "$OUT/$t/corpus" "${SEEDS[$t]}" >"$OUT/$t/log" 2>&1 &
  PIDS[$t]=$!
done
failed=0
for t in "${!PIDS[@]}"; do
  rc=0
  wait "${PIDS[$t]}" || rc=$?
  # the last status line: executions, coverage (cov: edges, ft: features), corpus size
  summary=$(grep -a "^#[0-9]" "$OUT/$t/log" | tail -n 1)
  echo "fuzz_$t: exit $rc; $summary; $(grep -a "^stat::number_of_executed_units" "$OUT/$t/log" | tail -n 1)"
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "fuzz_$t FAILED; crash inputs in $OUT/$t/crashes:"
    ls -l "$OUT/$t/crashes"
    tail -n 60 "$OUT/$t/log"
  fi
done
[ -z "${FUZZ_OUT:-}" ] && [ "$failed" -eq 0 ] && rm -rf "$OUT"
exit "$failed"
