#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Sets up, builds (warnings as errors) and runs every test; checks the install,
# the Debian packages, the README's paths and the aarch64 cross build
# (with its arm64 packages); then runs the tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, and the fuzzers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
JOBS=$(nproc)
FIXTURES=$PWD/build-fixtures   # base-size golden fixtures, generated once, shared by both builds

# The CUDA backend is built wherever nvcc is installed; its tests (label cuda)
# skip without a GPU. The sanitizer build stays CPU-only.
CUDA=()
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then CUDA=(-DMEGA_CUDA=ON); fi
# prefix /usr: the layout of the Debian packages made from this build (scripts/test_packages.sh)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEGA_WERROR=ON -DMEGA_TEST_GENERATED="$FIXTURES" \
      -DCMAKE_INSTALL_PREFIX=/usr "${CUDA[@]}"
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"
if [ ${#CUDA[@]} -gt 0 ]; then bash scripts/check_cuda_arch.sh build 87; fi   # Jetson Orin device code
bash scripts/test_install.sh build   # cmake --install; examples/embed against the installed package
# the Debian packages of this build: made, installed, used (CLI, Python, pip, C example), removed
t0=$SECONDS
bash scripts/test_packages.sh build
echo "Debian packages: $((SECONDS - t0)) s"
/usr/bin/python3 scripts/check_readme_paths.py --build build README.md   # every path the README names
/usr/bin/python3 scripts/check_readme_outputs.py --build build README.md # every keyword_spotter output it shows
bash scripts/test_cross.sh build     # aarch64: cross build, unit tests and CLI parity under qemu

# The CUDA backend's tests on the CPU stand-in for the CUDA runtime and cuBLAS
# (tests/kernels/cuda/standin/, docs/cuda-standin.md): every cuda-labelled test runs,
# none may be skipped; then again under the sanitizers (without the base-size
# cases and the thousand streams, which take minutes there).
standin() {  # preset
  cmake --preset "$1" -DMEGA_TEST_GENERATED="$FIXTURES"
  cmake --build --preset "$1" -j "$JOBS"
  ctest --preset "$1" -j "$JOBS" --no-tests=error | tee "build-$1/ctest.log"
  if grep -Eq "\*\*\*Skipped|Not Run" "build-$1/ctest.log"; then
    echo "a cuda test was skipped or not run on the stand-in ($1)" >&2
    exit 1
  fi
}
standin cuda-standin
standin cuda-standin-asan

# the asan preset (CMakePresets.json): build-asan, its sanitizer options and test filter. The
# Python tools' tests are not registered there (tests/CMakeLists.txt, MEGA_TOOL_TESTS: they run
# no binary of the build), and the filter leaves out train_smoke, minutes of PyTorch training
# around a self-test and classify runs that the fixture models' tests already do under the
# sanitizers (the release build above runs it).
cmake --preset asan -DMEGA_TEST_GENERATED="$FIXTURES"
cmake --build --preset asan -j "$JOBS"
# (The microphone test, listen, runs there without the leak check: tests/CMakeLists.txt says why.)
ctest --preset asan -j "$JOBS"
bash scripts/ci_fuzz.sh 60   # libFuzzer: model loader and audio-file reader, 60 s each (at once)
echo "all tests passed (release, install, aarch64 under qemu, sanitizers, fuzzing)"
