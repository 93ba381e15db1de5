#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Sets up, builds, and classifies the bundled sample clips with the bundled model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEGA_BUILD_TESTS=OFF >/dev/null
cmake --build build --target keyword_spotter mega_rtf   # the CLI and the benchmark the README shows
MODEL=${MODEL:-models/sc10-demo.mega}
./build/keyword_spotter selftest -m "$MODEL"
./build/keyword_spotter classify -m "$MODEL" samples/*.wav
