#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The CUDA backend is a module (libmega_kws_cuda.so) that libmega_kws.so loads
# only when asked for the cuda backend with a GPU present: neither the library
# nor the CLI links a CUDA library, a CPU run never maps one, and a missing
# module or GPU is a clear error.
#   test_backend_module.sh PATH/TO/keyword_spotter PATH/TO/libmega_kws.so REPO_ROOT CUDA_BUILT(0|1)
set -u
KS=$1
LIB=$2
ROOT=$3
CUDA_BUILT=$4
MODEL=$ROOT/models/sc10-demo.mega
CLIP=$ROOT/samples/yes.wav
MODULE=$(dirname "$LIB")/libmega_kws_cuda.so
T=$(mktemp -d /tmp/ks_module.XXXXXX)
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }

for f in "$KS" "$LIB"; do
  if ! ldd "$f" >"$T/ldd" 2>&1 || ! grep -q "libc.so" "$T/ldd"; then fail "ldd cannot read $f"; cat "$T/ldd"
  elif grep -Eq "libcuda|libcublas" "$T/ldd"; then fail "$(basename "$f") links a CUDA library"; cat "$T/ldd"
  else pass "$(basename "$f") links no CUDA library"; fi
done

# Which libraries a run maps (the dynamic loader's own record).
mapped() { LD_DEBUG=files "$@" 2>&1 >/dev/null | grep -E "file=.*\[0\];  (needed|dynamically loaded)" ; }

mapped "$KS" classify -m "$MODEL" --backend cpu "$CLIP" >"$T/cpu_libs"
if ! grep -q "libmega_kws.so" "$T/cpu_libs"; then fail "the loader's record of a run is empty"; cat "$T/cpu_libs"
elif grep -Eq "libcublas|libmega_kws_cuda" "$T/cpu_libs"; then fail "--backend cpu loaded CUDA"; cat "$T/cpu_libs"
else pass "--backend cpu loads no CUDA library"; fi

"$KS" classify -m "$MODEL" --backend cuda "$CLIP" >"$T/out" 2>"$T/err"
rc=$?
if [ "$CUDA_BUILT" = 0 ]; then
  if [ "$rc" -ne 0 ] && grep -q "no CUDA backend" "$T/err"; then pass "cpu-only build: --backend cuda says so"
  else fail "cpu-only build: --backend cuda: exit $rc"; cat "$T/err"; fi
else
  [ -f "$MODULE" ] && pass "module built beside the library" || fail "no $MODULE"
  if [ "$rc" -eq 0 ]; then
    pass "--backend cuda runs (a GPU is present)"
  elif grep -Eq "no NVIDIA driver|no CUDA device|no usable CUDA device" "$T/err"; then
    pass "--backend cuda without a GPU: $(head -c 200 "$T/err")"
    # without a GPU, the module is not even loaded
    mapped "$KS" classify -m "$MODEL" --backend cuda "$CLIP" >"$T/cuda_libs"
    if grep -q "libmega_kws_cuda" "$T/cuda_libs"; then fail "module loaded without a GPU"; else pass "module not loaded without a GPU"; fi
    # the default backend is then the CPU, still without CUDA
    mapped "$KS" classify -m "$MODEL" "$CLIP" >"$T/auto_libs"
    if grep -Eq "libcublas|libmega_kws_cuda" "$T/auto_libs"; then fail "default backend loaded CUDA"; else pass "default backend (cpu here) loads no CUDA"; fi
  else
    fail "--backend cuda: exit $rc, unclear error"; cat "$T/err"
  fi
  # A stand-in driver that reports one device (and is nothing more): the
  # factory then loads the module, whose own check (the CUDA runtime against
  # this "driver") fails cleanly. This covers the load: every symbol the
  # module needs resolves against libmega_kws.so, and its entry point answers.
  printf 'int cuInit(unsigned f) { (void)f; return 0; }\nint cuDeviceGetCount(int* n) { *n = 1; return 0; }\n' >"$T/cuda.c"
  if cc -shared -fPIC -o "$T/libcuda.so.1" "$T/cuda.c" 2>"$T/cc_err"; then
    LD_LIBRARY_PATH="$T" LD_DEBUG=files "$KS" classify -m "$MODEL" --backend cuda "$CLIP" >"$T/fake_out" 2>&1
    if grep -q "libmega_kws_cuda.so \[0\];  dynamically loaded" "$T/fake_out" &&
       grep -q "no usable CUDA device" "$T/fake_out"; then
      pass "with a driver present, the module loads and reports the device problem"
    else
      fail "module load with a stand-in driver"; grep -E "loaded|error|keyword_spotter" "$T/fake_out" | head
    fi
  else
    echo "skip: no C compiler for the stand-in driver"; cat "$T/cc_err"
  fi
  MEGA_KWS_BACKEND_DIR="$T/none" "$KS" classify -m "$MODEL" --backend cuda "$CLIP" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" -ne 0 ] && grep -q "libmega_kws_cuda.so is missing" "$T/err"; then pass "missing module: clear error"
  else fail "missing module: exit $rc"; cat "$T/err"; fi
fi

if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "all backend-module checks passed"
