#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The measurements behind docs/performance.md, in one run, from the repository
# root after a release build:
#
#   bench/measure.sh [BUILD_DIR] [MODEL]      (default: build, models/sc10-random-init.mega)
#
# Prints the machine's load before and after, mega_rtf (1 and 2
# threads, 3 runs each, 20 s of audio), the PyTorch comparison (1 and 2
# threads), mega_bench (kernels, sgemm, whole model), the allocation test, and
# the peak RSS of `keyword_spotter scan` on a 2-minute recording. Takes about
# 10 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
MODEL=${2:-models/sc10-random-init.mega}
KS=$BUILD/keyword_spotter
RTF=$BUILD/bench/mega_rtf

echo "== machine"
uptime
grep -m1 "model name" /proc/cpuinfo || true
ps -eo ni,pcpu,comm --sort=-pcpu | head -6

echo "== mega_rtf ($MODEL)"
for t in 1 2; do
  for r in 1 2 3; do "$RTF" -m "$MODEL" --threads "$t" --seconds 20 --json; done
done

echo "== PyTorch reference vs runtime"
/usr/bin/python3 bench/compare_pytorch.py --build "$BUILD" --threads 1
/usr/bin/python3 bench/compare_pytorch.py --build "$BUILD" --threads 2

echo "== mega_bench"
"$BUILD/bench/mega_bench" --model="$MODEL"

echo "== allocations per chunk"
"$BUILD/tests/mega_alloc_tests"

echo "== scan: peak RSS on a 2-minute recording"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
clips=()
for _ in $(seq 10); do clips+=(samples/commands.wav); done
sox "${clips[@]}" "$tmp/long.wav"
/usr/bin/time -f "scan: %e s wall, %U s user, peak RSS %M KB" "$KS" scan -m "$MODEL" "$tmp/long.wav" >/dev/null

echo "== machine"
uptime
