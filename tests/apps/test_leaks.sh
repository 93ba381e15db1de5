#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Every CLI path that does not touch a sound device, and mega_rtf (the build's
# bench/mega_rtf, where built), under valgrind's memcheck:
# no leak (definite, indirect or possible), no invalid access, and the same
# exit code as without valgrind. (The microphone paths load ALSA/PulseAudio/
# JACK plugins that leak on their own; scripts/test.sh runs them under
# AddressSanitizer without the leak check.)
#   test_leaks.sh PATH/TO/keyword_spotter REPO_ROOT
# Exit: 0 pass, 1 failure, 77 skipped (no valgrind).
set -u
KS=$1
ROOT=$2
RTF=$(dirname "$KS")/bench/mega_rtf
command -v valgrind >/dev/null || { echo "SKIP: valgrind not installed (apt-get install valgrind)"; exit 77; }
ldd "$KS" | grep -q "libasan\|libclang_rt.asan" && { echo "SKIP: $KS is built with AddressSanitizer (valgrind cannot run it)"; exit 77; }
FIX=$ROOT/tests/fixtures/data
DEMO=$ROOT/models/sc10-demo.mega
T=$(mktemp -d /tmp/ks_leaks.XXXXXX)
trap 'rm -rf "$T"' EXIT
export OPENBLAS_NUM_THREADS=1
failures=0

sox "$ROOT/samples/stop.wav" -r 44100 -c 2 "$T/stereo44k.flac"
echo "not audio" >"$T/notaudio.wav"
head -c 3000 "$ROOT/samples/yes.wav" >"$T/truncated.wav"  # read up to where the data ends
sox "$ROOT/samples/yes.wav" "$T/yes.ogg" && head -c 5000 "$T/yes.ogg" >"$T/cut.ogg"  # nothing decodable

# [PROG=PROGRAM] leak_check WANT_RC NAME -- ARGS...   (PROGRAM: keyword_spotter by default)
leak_check() {
  local want=$1 name=$2
  shift 3
  valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 --log-file="$T/vg.log" \
    "${PROG:-$KS}" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" -eq "$want" ] && [ ! -s "$T/vg.log" ]; then
    echo "ok:   $name (exit $rc, no leak or memory error)"
  else
    echo "FAIL: $name: exit $rc (wanted $want)"
    head -n 60 "$T/vg.log"
    tail -n 5 "$T/err"
    failures=$((failures + 1))
  fi
}

leak_check 0 "info" -- info -m "$DEMO"
leak_check 0 "selftest" -- selftest -m "$DEMO"
leak_check 0 "selftest, bidirectional, reference kernels" -- selftest -m "$FIX/tiny_bi.mega" --kernels reference
leak_check 0 "classify, offline and resampled" -- classify -m "$DEMO" --json "$ROOT/samples/yes.wav" "$T/stereo44k.flac"
leak_check 0 "classify, streamed in blocks" -- classify -m "$DEMO" --block-size 999 "$ROOT/samples/no.wav"
leak_check 1 "classify, bad files among good" -- classify -m "$DEMO" "$T/missing.wav" "$T/notaudio.wav" \
  "$T/cut.ogg" "$ROOT" "$T/truncated.wav" "$ROOT/samples/go.wav"
leak_check 0 "scan" -- scan -m "$DEMO" --json "$ROOT/samples/commands.wav"
leak_check 1 "scan, undecodable file" -- scan -m "$DEMO" "$T/cut.ogg"
if [ -x "$RTF" ]; then
  PROG=$RTF leak_check 0 "mega_rtf, short" -- -m "$DEMO" --seconds 2
else
  echo "SKIP: mega_rtf ($RTF is not built)"
fi
leak_check 3 "missing model" -- info -m "$T/none.mega"
leak_check 3 "corrupt model (NaN weight)" -- selftest -m "$FIX/bad_nan_weight.mega"
leak_check 3 "not a model" -- classify -m "$ROOT/samples/yes.wav" "$ROOT/samples/yes.wav"
leak_check 2 "usage error" -- classify -m "$DEMO" --block-size 0 x.wav
leak_check 2 "scan of a bidirectional model" -- scan -m "$FIX/tiny_bi.mega" "$ROOT/samples/yes.wav"
leak_check 2 "unknown command" -- frobnicate

if [ "$failures" -ne 0 ]; then echo "$failures leak check(s) failed"; exit 1; fi
echo "all leak checks passed"
