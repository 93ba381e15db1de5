#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# End-to-end tests of keyword_spotter: usage, exit codes, classify (offline and
# streamed), audio formats, and bad inputs that must be reported while the
# other files are still processed; and of mega_rtf, the benchmark.
#   test_cli.sh PATH/TO/keyword_spotter REPO_ROOT [PATH/TO/mega_rtf]
# (mega_rtf: by default the build's bench/mega_rtf next to keyword_spotter;
# its tests are skipped, with a note, where it is not built.)
set -u
KS=$1
ROOT=$2
RTF=${3:-$(dirname "$KS")/bench/mega_rtf}
PY=/usr/bin/python3
CHECKS=$(dirname "$0")/cli_checks.py  # the checks of the output, one function each
export PYTHONPATH="$ROOT/tools${PYTHONPATH:+:$PYTHONPATH}"  # the mega_kws_tools package
FIX=$ROOT/tests/fixtures/data
RANDOM_MODEL=$ROOT/models/sc10-random-init.mega  # base architecture, random weights (slow under ASan)
MODEL=$ROOT/models/sc10-demo.mega
T=$(mktemp -d /tmp/ks_cli.XXXXXX)
trap 'rm -rf "$T"' EXIT
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }
# expect_rc WANT DESCRIPTION -- command...
expect_rc() {
  local want=$1 what=$2; shift 3
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then pass "$what (exit $rc)"; else fail "$what: exit $rc, wanted $want"; cat "$T/err"; fi
}
expect_in() {  # FILE NEEDLE DESCRIPTION
  if grep -qF -- "$2" "$1"; then pass "$3"; else fail "$3: '$2' not in $(basename "$1")"; cat "$1"; fi
}
expect_not_in() {  # FILE NEEDLE DESCRIPTION
  if grep -qF -- "$2" "$1"; then fail "$3: '$2' in $(basename "$1")"; cat "$1"; else pass "$3"; fi
}

expect_rc 0 "--help" -- "$KS" --help
expect_in "$T/out" "classify" "--help lists classify"
expect_in "$T/out" "[whole clip]" "--help shows defaults"
# each command's --help lists the options it accepts, and only those
expect_rc 0 "classify --help" -- "$KS" classify --help
expect_in "$T/out" "--block-size" "classify --help lists --block-size"
expect_not_in "$T/out" "--sensitivity" "classify --help leaves out --sensitivity"
expect_rc 0 "scan --help" -- "$KS" scan --help
expect_in "$T/out" "--sensitivity" "scan --help lists --sensitivity"
expect_in "$T/out" "--threshold" "scan --help lists --threshold"
expect_not_in "$T/out" "--block-size" "scan --help leaves out --block-size"
expect_rc 0 "info --help" -- "$KS" info --help
expect_in "$T/out" "--json" "info --help lists --json"
expect_not_in "$T/out" "--backend" "info --help leaves out --backend"
expect_not_in "$T/out" "--threshold" "info --help leaves out --threshold"
# an option that does not apply to the command is refused, the same way for every command
expect_rc 2 "classify --sensitivity is refused" -- "$KS" classify -m "$MODEL" --sensitivity 0.8 "$ROOT/samples/yes.wav"
expect_in "$T/err" "option --sensitivity does not apply to classify" "classify --sensitivity: the message"
expect_rc 2 "scan -b is refused" -- "$KS" scan -m "$MODEL" -b 100 "$ROOT/samples/yes.wav"
expect_in "$T/err" "option --block-size does not apply to scan" "scan -b: the message"
expect_rc 2 "info --threads is refused" -- "$KS" info -m "$MODEL" --threads 2
expect_in "$T/err" "option --threads does not apply to info" "info --threads: the message"
expect_rc 2 "devices --model is refused" -- "$KS" devices -m "$MODEL"
# --option=value
expect_rc 0 "--model=PATH" -- "$KS" info --model="$FIX/tiny_uni.mega"
expect_in "$T/out" "tiny_uni.mega" "--model=PATH is the model"
expect_rc 0 "--block-size=N" -- "$KS" classify --model="$MODEL" --json --block-size=1000 "$ROOT/samples/yes.wav"
expect_in "$T/out" '"label": "yes"' "--block-size=N classifies"
expect_rc 2 "--json=1 (a switch takes no value)" -- "$KS" info -m "$MODEL" --json=1
expect_rc 2 "--model= (empty)" -- "$KS" info --model=
# --version: the project's (project(... VERSION) in CMakeLists.txt)
VERSION=$(sed -n 's/^project([A-Za-z_]* VERSION \([0-9][0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
expect_rc 0 "--version" -- "$KS" --version
if [ -n "$VERSION" ] && [ "$(cat "$T/out")" = "keyword_spotter $VERSION" ]; then pass "--version says $VERSION"
else fail "--version: '$(cat "$T/out")', wanted 'keyword_spotter $VERSION'"; fi
expect_rc 2 "no command" -- "$KS"
expect_rc 2 "unknown command" -- "$KS" frobnicate
# without -m: $MEGA_KWS_MODEL, else the demo model installed relative to the
# program (bin/../share/mega_kws/models), else the source tree's from the build tree
mkdir -p "$T/inst/bin"
cp "$KS" "$T/inst/bin/keyword_spotter"
expect_rc 2 "no -m and no default model" -- env -u MEGA_KWS_MODEL "$T/inst/bin/keyword_spotter" classify "$ROOT/samples/yes.wav"
expect_in "$T/err" "$T/inst/bin/../share/mega_kws/models/sc10-demo.mega" "the error names the paths tried"
expect_in "$T/err" "MEGA_KWS_MODEL" "the error names MEGA_KWS_MODEL"
mkdir -p "$T/inst/share/mega_kws/models"
cp "$MODEL" "$T/inst/share/mega_kws/models/"
expect_rc 0 "no -m: the installed demo model" -- env -u MEGA_KWS_MODEL "$T/inst/bin/keyword_spotter" classify --json "$ROOT/samples/yes.wav"
expect_in "$T/out" '"label": "yes"' "the installed demo model classifies"
expect_rc 0 "no -m: \$MEGA_KWS_MODEL first" -- env MEGA_KWS_MODEL="$FIX/tiny_uni.mega" "$T/inst/bin/keyword_spotter" info
expect_in "$T/out" "class0" "\$MEGA_KWS_MODEL is the model"
expect_rc 0 "no -m, from the build tree" -- env -u MEGA_KWS_MODEL "$KS" info
expect_in "$T/out" "models/sc10-demo.mega" "the build tree's default is the source tree's demo model"
expect_rc 2 "unknown option" -- "$KS" classify -m "$MODEL" --bogus x.wav
expect_rc 2 "bad block size" -- "$KS" classify -m "$MODEL" --block-size 0 x.wav
expect_rc 2 "classify without files" -- "$KS" classify -m "$MODEL"

expect_rc 0 "info" -- "$KS" info -m "$RANDOM_MODEL"
expect_in "$T/out" "PLACEHOLDER" "info shows the model notes"
expect_in "$T/out" "yes,no,up,down,left,right,on,off,stop,go" "info shows labels"
expect_rc 0 "selftest on the random base model" -- "$KS" selftest -m "$RANDOM_MODEL"
expect_in "$T/out" "self-test passed" "selftest says passed"
DEMO=$ROOT/models/sc10-demo.mega
expect_rc 0 "selftest on the trained demo model" -- "$KS" selftest -m "$DEMO"
# the demo model's notes were written without its accuracy figure ("None ?"): info leaves such a placeholder out
expect_rc 0 "info on the demo model" -- "$KS" info -m "$DEMO"
grep '^notes' "$T/out" >"$T/notes"
expect_in "$T/notes" "See docs/models.md" "info shows the demo model's notes"
expect_not_in "$T/notes" "None" "no 'None' in the notes"
expect_not_in "$T/notes" "?" "no '?' in the notes"
# --json: one JSON object, for info and selftest as for the others
expect_rc 0 "info --json" -- "$KS" info -m "$DEMO" --json
if $PY "$CHECKS" info_json "$T/out"; then pass "info --json is JSON with the model's fields"; else fail "info --json"; cat "$T/out"; fi
expect_rc 0 "selftest --json" -- "$KS" selftest -m "$DEMO" --json
if $PY "$CHECKS" selftest_json "$T/out"; then pass "selftest --json is JSON"; else fail "selftest --json"; cat "$T/out"; fi
# results that cannot be written (a full disk) are an error: exit 1, one line on stderr
for args in "classify -m $DEMO $ROOT/samples/yes.wav $ROOT/samples/no.wav" "classify -m $DEMO --json $ROOT/samples/yes.wav" \
            "scan -m $DEMO $ROOT/samples/commands.wav" "info -m $DEMO" "info -m $DEMO --json" "selftest -m $DEMO" \
            "selftest -m $DEMO --json" "--help" "classify --help" "--version"; do
  # shellcheck disable=SC2086
  "$KS" $args >/dev/full 2>"$T/err"
  rc=$?
  n=$(grep -c "cannot write the output" "$T/err")
  if [ "$rc" -eq 1 ] && [ "$n" -eq 1 ] && { [ "${args%% *}" = scan ] || [ "$(wc -l <"$T/err")" -eq 1 ]; }; then
    pass "${args%% -m*} > /dev/full: exit 1, one line ($(grep "cannot write" "$T/err"))"
  else
    fail "${args%% -m*} > /dev/full: exit $rc, $n error line(s)"; cat "$T/err"
  fi
done
# the demo model gets every bundled sample clip right (espeak-ng en-us renderings)
expect_rc 0 "classify the bundled samples with the demo model" -- "$KS" classify -m "$DEMO" --json "$ROOT"/samples/{yes,no,up,down,left,right,on,off,stop,go}.wav
if $PY "$CHECKS" samples_classified "$T/out"; then pass "every sample clip classified correctly"; else fail "sample clips misclassified"; cat "$T/out"; fi
# scan finds the spoken keywords of samples/commands.wav, in order, each within one hop of the word's end
expect_rc 0 "scan the commands recording" -- "$KS" scan -m "$DEMO" --json --sensitivity 0.8 "$ROOT/samples/commands.wav"
if $PY "$CHECKS" scan_finds_commands "$T/out" "$ROOT/samples/commands.csv"; then pass "scan: right keywords at the right times"; else fail "scan timing"; cat "$T/out"; fi
# a word that ends the file: the end-of-stream flush completes the chunk and the smoothing
# (the demo model smooths over 3 hops; "go" fills the last one or two of a 0.68 s file)
if command -v flite >/dev/null; then
  flite -t go -o "$T/go_end.wav"
  expect_rc 0 "scan a word at the very end of a short file" -- "$KS" scan -m "$DEMO" --json "$T/go_end.wav"
  expect_in "$T/out" '"label": "go"' "the last word of a file is detected"
else
  fail "flite is not installed (scripts/setup.sh installs it): the end-of-file word is not tested"
fi
for m in "$FIX"/tiny_*.mega; do expect_rc 0 "selftest $(basename "$m")" -- "$KS" selftest -m "$m"; done
$PY -m mega_kws_tools.convert.mega_convert "$FIX/tiny_uni.pt" -o "$T/fp16.mega" --labels class0,class1,class2,class3 \
  --fp16 >/dev/null || fail "fp16 conversion"
expect_rc 0 "selftest on a float16 model" -- "$KS" selftest -m "$T/fp16.mega"
expect_rc 0 "info on a float16 model" -- "$KS" info -m "$T/fp16.mega"
expect_in "$T/out" "float16" "info says float16"
# per-keyword detection thresholds: converter -> model file -> info
echo '{"thresholds": [0.55, 0.65, 0.75, 0.85], "smoothing_hops": 2, "refractory_ms": 600}' >"$T/det.json"
$PY -m mega_kws_tools.convert.mega_convert "$FIX/tiny_uni.pt" -o "$T/det.mega" --labels class0,class1,class2,class3 \
  --detection "$T/det.json" >/dev/null || fail "conversion with per-label thresholds"
expect_rc 0 "info on a model with per-label thresholds" -- "$KS" info -m "$T/det.mega"
expect_in "$T/out" "thresholds 0.550 0.650 0.750 0.850; smoothing 2 hops, refractory 600 ms" "info shows each label's threshold"
expect_rc 3 "newer schema refused" -- "$KS" selftest -m "$FIX/bad_schema_newer.mega"
expect_in "$T/err" "newer than this runtime supports" "schema message"
expect_rc 3 "missing model file" -- "$KS" info -m "$T/none.mega"
expect_in "$T/err" "cannot open" "missing model message"
# stored detection defaults the detector would refuse, and repeated labels: refused at load (issue 85 item 5)
expect_rc 3 "info on a model whose stored thresholds are 0" -- "$KS" info -m "$FIX/bad_threshold_zero.mega"
expect_in "$T/err" "detection threshold of label 'class0' is 0" "zero threshold message"
expect_rc 3 "scan with a model whose stored thresholds are 0" -- "$KS" scan -m "$FIX/bad_threshold_zero.mega" "$ROOT/samples/yes.wav"
expect_rc 3 "selftest on a model with a repeated label" -- "$KS" selftest -m "$FIX/bad_duplicate_label.mega"
expect_in "$T/err" "label 'class1' appears twice" "repeated label message"
# a FIFO as the model or an audio file: refused at once (it used to wait for a writer forever)
mkfifo "$T/f.mega" "$T/f.wav"
expect_rc 3 "a FIFO as the model" -- timeout 10 "$KS" info -m "$T/f.mega"
expect_in "$T/err" "not a regular file" "FIFO model message"
expect_rc 1 "a FIFO as an audio file (classify)" -- timeout 10 "$KS" classify -m "$MODEL" "$T/f.wav"
expect_in "$T/err" "f.wav: not a regular file" "FIFO audio message"
expect_rc 1 "a FIFO as an audio file (scan)" -- timeout 10 "$KS" scan -m "$MODEL" "$T/f.wav"
expect_rc 3 "audio file as model" -- "$KS" info -m "$ROOT/samples/yes.wav"
expect_in "$T/err" "not a .mega model file" "audio-as-model message"

# classify: offline and streamed in several block sizes give the same logits
expect_rc 0 "classify --json" -- "$KS" classify -m "$MODEL" --json "$ROOT"/samples/*.wav
cp "$T/out" "$T/offline.jsonl"
n=$(wc -l <"$T/offline.jsonl")
want=$(ls "$ROOT"/samples/*.wav | wc -l)
[ "$n" -eq "$want" ] && pass "one JSON line per file" || fail "expected $want lines, got $n"
# (three clips keep this quick: each block size streams them again)
head -n 3 "$T/offline.jsonl" >"$T/offline3.jsonl"
mapfile -t three < <($PY "$CHECKS" files "$T/offline3.jsonl")
for b in 1 7 999 1000 1001 16000; do
  expect_rc 0 "classify --block-size $b" -- "$KS" classify -m "$MODEL" --json --block-size "$b" "${three[@]}"
  if $PY "$CHECKS" block_logits_equal_offline "$T/offline3.jsonl" "$T/out"; then pass "block $b logits equal offline"; else fail "block $b logits differ"; fi
done
# the reference kernels (plain scalar loops) agree with the optimized ones
expect_rc 0 "optimized kernels" -- "$KS" classify -m "$FIX/tiny_uni.mega" --json "$ROOT/samples/yes.wav"
cp "$T/out" "$T/opt.json"
expect_rc 0 "reference kernels" -- "$KS" classify -m "$FIX/tiny_uni.mega" --json --kernels reference "$ROOT/samples/yes.wav"
if $PY "$CHECKS" reference_kernels_agree "$T/opt.json" "$T/out"; then pass "reference kernels agree"; else fail "reference kernels differ"; fi

# formats: 24-bit, float, FLAC and stereo versions of one clip give the same label
src=$ROOT/samples/stop.wav
sox "$src" -b 24 "$T/s24.wav" && sox "$src" -e floating-point -b 32 "$T/f32.wav" && sox "$src" "$T/s.flac" &&
  sox "$src" -c 2 "$T/stereo.wav" && sox "$src" -b 8 -e unsigned "$T/u8.wav" && sox "$src" "$T/s.ogg" ||
  fail "sox could not make format variants"
sox "$src" -r 8000 "$T/s8k.wav" && sox "$src" -r 44100 -c 2 "$T/s44k_st.wav" && sox "$src" -r 48000 -b 24 "$T/s48k.wav" ||
  fail "sox could not make rate variants"
expect_rc 0 "classify format and rate variants" -- "$KS" classify -m "$ROOT/models/sc10-demo.mega" --json "$src" \
  "$T/s24.wav" "$T/f32.wav" "$T/s.flac" "$T/stereo.wav" "$T/u8.wav" "$T/s.ogg" "$T/s8k.wav" "$T/s44k_st.wav" "$T/s48k.wav"
if $PY "$CHECKS" formats_agree "$T/out"; then pass "every format and rate says stop"; else fail "formats/rates disagree"; cat "$T/out"; fi

# bad inputs: each reported, the good file still classified, exit 1
mkdir "$T/adir"
echo "this is not audio" >"$T/notaudio.wav"
head -c 30 "$src" >"$T/trunc_header.wav"
head -c 5000 "$T/s.ogg" >"$T/cut.ogg"  # an Ogg file cut before its last page has no length
sox "$src" -r 8000 "$T/rate8k.wav"
$PY "$CHECKS" make_bad_files "$T"
expect_rc 1 "bad files among good ones" -- "$KS" classify -m "$MODEL" --json "$T/missing.wav" "$T/adir" "$T/notaudio.wav" \
  "$T/empty.wav" "$T/trunc_header.wav" "$T/nan.wav" "$T/inf.wav" "$T/cut.ogg" "$T/rate500.wav" "$T/ch65.wav" "$src"
if $PY "$CHECKS" bad_file_messages "$T/out"; then pass "each bad file has its own message"; else fail "bad-file messages"; cat "$T/out"; fi
# truncated files: a header that announces more audio than the file holds is an error (exit 1, one line
# naming the file), for classify and scan; libsndfile itself trims the length to the data and reads on
sox "$ROOT/samples/commands.wav" "$T/c.aiff" && sox "$ROOT/samples/commands.wav" "$T/c.au" &&
  sox "$ROOT/samples/commands.wav" "$T/c.ogg" || fail "sox could not make the files to truncate"
head -c 98826 "$ROOT/samples/commands.wav" >"$T/cut_data.wav"
head -c 200000 "$T/c.aiff" >"$T/cut_data.aiff"
head -c 200000 "$T/c.au" >"$T/cut_data.au"
head -c 20000 "$T/c.ogg" >"$T/cut_pages.ogg"  # 5.3 s decodable, the last page (the length) gone
for f in cut_data.wav cut_data.aiff cut_data.au cut_pages.ogg; do
  for cmd in classify scan; do
    expect_rc 1 "$cmd of truncated $f" -- "$KS" $cmd -m "$MODEL" "$T/$f"
    # scan streams: what it detected before the cut is already printed; classify prints nothing
    if [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "$f: file is truncated" "$T/err" &&
       { [ "$cmd" = scan ] || [ ! -s "$T/out" ]; }; then
      pass "$cmd of $f: one line naming the file ($(cat "$T/err"))"
    else
      fail "$cmd of $f: wanted one line '$f: file is truncated...'"; cat "$T/err"
    fi
  done
done
expect_rc 1 "plain output reports errors on stderr" -- "$KS" classify -m "$MODEL" "$T/missing.wav" "$src"
expect_in "$T/err" "missing.wav: no such file" "stderr names the file"
expect_in "$T/out" "stop.wav" "the good file is still classified"

# other rates are resampled; short clips are padded; long ones report their best window
sox "$src" -r 44100 -c 2 "$T/s44k.wav"
sox "$src" "$T/short.wav" trim 0 0.5
sox "$ROOT/samples/yes.wav" "$ROOT/samples/no.wav" "$src" "$T/long.wav"
expect_rc 0 "rates, short and long clips" -- "$KS" classify -m "$MODEL" --json "$T/rate8k.wav" "$T/s44k.wav" "$T/short.wav" "$T/long.wav"
if $PY "$CHECKS" rates_short_long "$T/out"; then pass "resampled, padded, best window"; else fail "rates/short/long"; cat "$T/out"; fi

# scan: a detection stream over a recording (a low threshold makes the random model fire)
expect_rc 0 "scan --json" -- "$KS" scan -m "$MODEL" --json --threshold 0.2 --refractory-ms 0 "$T/long.wav"
if $PY "$CHECKS" scan_output "$T/out"; then pass "scan output"; else fail "scan output"; cat "$T/out"; fi
expect_in "$T/err" "scanned 3.000 s" "scan summary on stderr"
expect_rc 0 "scan of a resampled stereo file" -- "$KS" scan -m "$MODEL" "$T/s44k.wav"
# resampled scans keep the resampler's tail: the whole file is scanned
sox "$ROOT/samples/commands.wav" -r 8000 "$T/c8k.wav" && sox "$ROOT/samples/commands.wav" -r 44100 "$T/c44k.wav" &&
  sox -n -r 1000 "$T/one_k.wav" synth 3 sine 100 || fail "sox could not make the rate variants for scan"
for f in c8k.wav:12.352 c44k.wav:12.352 one_k.wav:3.000; do
  expect_rc 0 "scan of ${f%%:*}" -- "$KS" scan -m "$MODEL" "$T/${f%%:*}"
  expect_in "$T/err" "scanned ${f##*:} s" "scan of ${f%%:*} covers the whole file"
done
expect_rc 1 "scan of a missing file" -- "$KS" scan -m "$MODEL" "$T/missing.wav"
expect_rc 1 "scan of a NaN file" -- "$KS" scan -m "$MODEL" "$T/nan.wav"
expect_in "$T/err" "not a finite number" "scan names the bad sample"
expect_rc 0 "scan of float audio beyond full scale" -- "$KS" scan -m "$MODEL" "$T/loud.wav"
expect_in "$T/err" "16000 samples beyond full scale clipped" "scan reports the clipped samples"
# several files: each with a fresh session and detector, each line naming its file; a bad file does not stop the others
CMDS=$ROOT/samples/commands.wav
expect_rc 0 "scan one file" -- "$KS" scan -m "$DEMO" --json --sensitivity 0.8 "$CMDS"
cp "$T/out" "$T/one.jsonl"
expect_rc 0 "scan several files" -- "$KS" scan -m "$DEMO" --json --sensitivity 0.8 "$CMDS" "$T/long.wav" "$CMDS"
cp "$T/err" "$T/several.err"
if $PY "$CHECKS" several_files "$T/one.jsonl" "$T/out" "$CMDS" "$T/long.wav"; then pass "several files: named, each from a fresh state"; else fail "scan of several files"; cat "$T/out"; fi
expect_in "$T/several.err" "commands.wav: scanned 12.352 s: 5 detection(s)" "several files: a summary per file"
expect_rc 0 "scan several files, plain" -- "$KS" scan -m "$DEMO" --sensitivity 0.8 "$CMDS" "$CMDS"
if [ "$(grep -c "^$CMDS	[0-9.]*	[a-z]*	[0-9.]*\$" "$T/out")" -eq 10 ]; then pass "plain lines start with the file"; else fail "plain lines of several files"; cat "$T/out"; fi
expect_rc 1 "scan: a bad file among good ones" -- "$KS" scan -m "$DEMO" --sensitivity 0.8 "$T/missing.wav" "$CMDS"
expect_in "$T/err" "missing.wav: no such file" "scan names the bad file"
expect_in "$T/err" "commands.wav: scanned 12.352 s" "the good file is still scanned"
expect_rc 2 "scan without files" -- "$KS" scan -m "$MODEL"
expect_rc 2 "standard input twice" -- "$KS" scan -m "$MODEL" - -
# "-": standard input, a WAV stream or raw s16le mono 16 kHz: the same detections as the file (named "-")
sed "s|\"file\": \"$CMDS\"|\"file\": \"-\"|" "$T/one.jsonl" >"$T/one_stdin.jsonl"
"$KS" scan -m "$DEMO" --json --sensitivity 0.8 - <"$CMDS" >"$T/stdin_redir.jsonl" 2>"$T/err" &&
  cmp -s "$T/one_stdin.jsonl" "$T/stdin_redir.jsonl" && pass "scan - <file.wav" || { fail "scan - <file.wav"; cat "$T/err"; }
cat "$CMDS" | "$KS" scan -m "$DEMO" --json --sensitivity 0.8 - >"$T/stdin_wav.jsonl" 2>"$T/err" &&
  cmp -s "$T/one_stdin.jsonl" "$T/stdin_wav.jsonl" && grep -q "scanned 12.352 s" "$T/err" && pass "cat file.wav | scan -" ||
  { fail "cat file.wav | scan -"; cat "$T/err"; }
sox "$CMDS" -t raw -e signed -b 16 -c 1 -r 16000 - | "$KS" scan -m "$DEMO" --json --sensitivity 0.8 - >"$T/stdin_raw.jsonl" 2>"$T/err" &&
  cmp -s "$T/one_stdin.jsonl" "$T/stdin_raw.jsonl" && grep -q "scanned 12.352 s" "$T/err" && pass "raw s16le | scan -" ||
  { fail "raw s16le | scan -"; cat "$T/err"; }
sox "$CMDS" -t wav -e floating-point -b 32 -r 44100 -c 2 - | "$KS" scan -m "$DEMO" --json --sensitivity 0.8 - >"$T/out" 2>"$T/err" &&
  $PY "$CHECKS" same_labels "$T/one.jsonl" "$T/out" &&
  pass "a 44.1 kHz stereo float WAV stream: the same words" || { fail "float WAV stream"; cat "$T/err"; }
head -c 98826 "$CMDS" | "$KS" scan -m "$DEMO" - >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" -eq 1 ] && grep -q "ended early" "$T/err" && pass "a WAV stream cut short: exit 1" || { fail "cut WAV stream: exit $rc"; cat "$T/err"; }
expect_rc 1 "empty standard input" -- "$KS" scan -m "$DEMO" - </dev/null
expect_in "$T/err" "no audio on standard input" "empty standard input message"
# Issue 85 item 3: "-" decodes what a file of the same format gives (libsndfile
# on the pipe), the same lines and summary, for every container sox writes;
# sox writing to the pipe itself puts a placeholder length in its header
for f in s16.wav:-b16 f32.wav:-efloating-point:-b32 f64.wav:-efloating-point:-b64 st.flac st.ogg st.aiff st.au; do
  name=${f%%:*}
  opts=$(echo "${f#"$name"}" | tr ':' ' ')
  sox "$src" $opts "$T/pipe_$name" || { fail "sox could not write $name"; continue; }
  "$KS" scan -m "$MODEL" "$T/pipe_$name" >"$T/file.txt" 2>&1
  cat "$T/pipe_$name" | "$KS" scan -m "$MODEL" - >"$T/pipe.txt" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] && cmp -s "$T/file.txt" "$T/pipe.txt" && grep -q "	stop	" "$T/pipe.txt"; then
    pass "cat $name | scan -: what the file gives"
  else
    fail "cat $name | scan -: exit $rc"; diff "$T/file.txt" "$T/pipe.txt"
  fi
  sox "$src" $opts -t "${name##*.}" - 2>/dev/null | "$KS" scan -m "$MODEL" - >"$T/pipe.txt" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] && cmp -s "$T/file.txt" "$T/pipe.txt" && pass "sox -t ${name##*.} - | scan -: what the file gives" ||
    { fail "sox -t ${name##*.} - | scan -: exit $rc"; diff "$T/file.txt" "$T/pipe.txt"; }
done
# two fmt chunks: refused on the pipe as on disk, for the same reason
{ head -c 36 "$T/pipe_s16.wav"; tail -c +13 "$T/pipe_s16.wav" | head -c 24; tail -c +37 "$T/pipe_s16.wav"; } >"$T/twofmt.wav"
expect_rc 1 "a WAV file with two fmt chunks" -- "$KS" scan -m "$MODEL" "$T/twofmt.wav"
why=$(sed -n 's/.*(\(.*\))$/\1/p' "$T/err")
expect_rc 1 "a WAV stream with two fmt chunks" -- sh -c 'cat "$1" | "$2" scan -m "$3" -' sh "$T/twofmt.wav" "$KS" "$MODEL"
[ -n "$why" ] && expect_in "$T/err" "($why)" "two fmt chunks: the stream refused for the file's reason" ||
  fail "two fmt chunks: no reason given for the file"
[ "$(wc -l <"$T/err")" -eq 1 ] && pass "two fmt chunks: one line" || fail "two fmt chunks: $(wc -l <"$T/err") lines"
# a container's magic and then nothing it can decode: one line, exit 1 (was noise, exit 0)
for magic in fLaC OggS .snd FORM; do
  ( printf '%s' "$magic"; head -c 20000 /dev/urandom ) | "$KS" scan -m "$MODEL" - >"$T/out" 2>"$T/err"
  rc=$?
  [ "$rc" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && [ ! -s "$T/out" ] && pass "'$magic' and garbage: refused in one line" ||
    { fail "'$magic' and garbage: exit $rc"; cat "$T/err"; }
done
# Issue 85 item 11: SIGTERM while scan - waits on its pipe: the summary, then exit 143
mkfifo "$T/fifo"
"$KS" scan -m "$MODEL" - <"$T/fifo" >"$T/out" 2>"$T/err" &
kspid=$!
exec 3>"$T/fifo"
sox "$src" -t raw - >&3
sleep 1
kill -TERM "$kspid"
wait "$kspid"
rc=$?
exec 3>&-
[ "$rc" -eq 143 ] && grep -q "^scanned [0-9.]* s: " "$T/err" && pass "SIGTERM during scan -: summary, exit 143" ||
  { fail "SIGTERM during scan -: exit $rc"; cat "$T/err"; }
# a word in the last, partial chunk is timed at the end of the audio, not of the chunk's silence
sox "$ROOT/samples/yes.wav" "$T/small.wav" trim 0.2 0.156
expect_rc 0 "scan of 0.156 s" -- "$KS" scan -m "$MODEL" "$T/small.wav"
expect_in "$T/out" "	yes	" "scan of 0.156 s: the word is found"
awk -F'\t' '$1 > 0.156 { bad = 1 } END { exit bad }' "$T/out" && pass "scan of 0.156 s: no detection after its end" ||
  { fail "scan of 0.156 s: a detection after its end"; cat "$T/out"; }
# the NaN message says where the bad sample is, not where the scan had got to
expect_rc 1 "scan of a NaN file, again" -- "$KS" scan -m "$MODEL" "$T/nan.wav"
expect_in "$T/err" "sample 100 (at 0.006 s) is not a finite number" "the NaN message: the sample and its time"
expect_not_in "$T/err" "(after" "the NaN message: no 'after 0.000 s'"
# classify says when it clips samples, in scan's words
expect_rc 0 "classify of float audio beyond full scale" -- "$KS" classify -m "$MODEL" "$T/loud.wav"
expect_in "$T/err" "loud.wav: 16000 samples beyond full scale clipped" "classify reports the clipped samples"
expect_rc 2 "scan needs a streaming model" -- "$KS" scan -m "$FIX/tiny_bi.mega" "$src"
expect_rc 2 "bad threshold" -- "$KS" scan -m "$MODEL" --threshold 2 "$src"
# per-keyword thresholds by label: the others keep the model's
expect_rc 0 "scan with the model's thresholds" -- "$KS" scan -m "$DEMO" --json "$ROOT/samples/commands.wav"
cp "$T/out" "$T/scan_default.jsonl"
first=$($PY "$CHECKS" first_label "$T/scan_default.jsonl")
all=$($PY "$CHECKS" every_label_at_one "$T/scan_default.jsonl")
expect_rc 0 "scan --threshold $first=1.0" -- "$KS" scan -m "$DEMO" --json --threshold "$first=1.0" "$ROOT/samples/commands.wav"
if $PY "$CHECKS" threshold_silences_one "$T/scan_default.jsonl" "$T/out" "$first"; then pass "$first=1.0 silences $first, the others as before"; else fail "--threshold $first=1.0"; cat "$T/out"; fi
expect_rc 0 "scan --threshold=$all" -- "$KS" scan -m "$DEMO" "--threshold=$all" "$ROOT/samples/commands.wav"
if [ -s "$T/out" ]; then fail "every detected keyword at 1.0, still detected"; cat "$T/out"; else pass "every detected keyword at 1.0: nothing detected"; fi
expect_rc 2 "--threshold with an unknown label" -- "$KS" scan -m "$DEMO" --threshold go=0.8,gone=0.5 "$src"
expect_in "$T/err" "no label 'gone'" "the error names the unknown label"
expect_rc 2 "--threshold go=1.5" -- "$KS" scan -m "$DEMO" --threshold go=1.5 "$src"
expect_rc 2 "--threshold go=0" -- "$KS" scan -m "$DEMO" --threshold go=0 "$src"
expect_rc 2 "--threshold go=" -- "$KS" scan -m "$DEMO" --threshold go= "$src"
expect_rc 2 "--threshold go=0.8,go=0.9" -- "$KS" scan -m "$DEMO" --threshold go=0.8,go=0.9 "$src"
# every numeric option has a range (in --help); outside it: a usage error, never an abort
for bad in "--block-size 0" "--block-size 1073741825" "--block-size 1e3" "--threads 0" "--threads 17"; do
  expect_rc 2 "classify $bad" -- "$KS" classify -m "$MODEL" $bad "$src"
done
for bad in "--threads 0" "--smoothing 0" "--smoothing 1025" "--refractory-ms -1" "--refractory-ms 600001" \
           "--sensitivity -0.1" "--sensitivity 1.5" "--sensitivity nan" "--threshold 0" "--threshold inf"; do
  expect_rc 2 "scan $bad" -- "$KS" scan -m "$MODEL" $bad "$src"
done
for bad in "--seconds 0" "--seconds 1e8" "--seconds nan" "--seconds -1" "--seconds 5x"; do
  expect_rc 2 "listen $bad" -- "$KS" listen -m "$MODEL" $bad
done

# the benchmark: a program of its own (bench/rtf.cpp); the CLI says where it went
expect_rc 2 "keyword_spotter bench is gone" -- "$KS" bench -m "$FIX/tiny_patch.mega" --seconds 2
expect_in "$T/err" "mega_rtf" "keyword_spotter bench names mega_rtf"
if [ "$(wc -l <"$T/err")" -ne 1 ] || [ -s "$T/out" ]; then fail "keyword_spotter bench: one line on stderr, nothing on stdout"; cat "$T/err"; fi
if [ ! -x "$RTF" ]; then
  echo "SKIP: mega_rtf ($RTF is not built: MEGA_BUILD_BENCH=OFF?)"
else
  expect_rc 0 "mega_rtf --help" -- "$RTF" --help
  RTF_HELP=$T/rtf_help.txt
  cp "$T/out" "$RTF_HELP"
  expect_in "$T/out" "--streams B" "mega_rtf --help lists --streams"
  expect_rc 0 "mega_rtf --version" -- "$RTF" --version
  if [ "$(cat "$T/out")" = "mega_rtf $VERSION" ]; then pass "mega_rtf --version says $VERSION"
  else fail "mega_rtf --version: '$(cat "$T/out")', wanted 'mega_rtf $VERSION'"; fi
  # without -m: the model keyword_spotter takes ($MEGA_KWS_MODEL, the installed demo model, the source tree's);
  # the benchmark says which model it measured
  expect_rc 0 "mega_rtf without -m, from the build tree" -- env -u MEGA_KWS_MODEL "$RTF" --backend cpu --seconds 0.5 --json
  expect_in "$T/out" "\"model\": \"$ROOT/models/sc10-demo.mega\"" "mega_rtf: the source tree's demo model"
  cp "$RTF" "$T/inst/bin/mega_rtf"
  expect_rc 0 "mega_rtf without -m, installed" -- env -u MEGA_KWS_MODEL "$T/inst/bin/mega_rtf" --backend cpu --seconds 0.5
  expect_in "$T/out" "$T/inst/bin/../share/mega_kws/models/sc10-demo.mega" "mega_rtf: the installed demo model"
  expect_rc 0 "mega_rtf without -m: \$MEGA_KWS_MODEL" -- env MEGA_KWS_MODEL="$FIX/tiny_patch.mega" "$RTF" --backend cpu --seconds 0.5 --json
  expect_in "$T/out" "\"model\": \"$FIX/tiny_patch.mega\"" "mega_rtf: \$MEGA_KWS_MODEL is the model"
  mkdir -p "$T/bare" && cp "$RTF" "$T/bare/mega_rtf"
  expect_rc 2 "mega_rtf without a model" -- env -u MEGA_KWS_MODEL "$T/bare/mega_rtf" --seconds 2
  expect_in "$T/err" "$T/bare/../share/mega_kws/models/sc10-demo.mega" "mega_rtf: the error names the paths tried"
  # less audio than one chunk measures nothing: refused, with the minimum (it printed "0.00 s in 0 chunks", exit 0)
  expect_rc 2 "mega_rtf --seconds 0.1 (less than a chunk)" -- "$RTF" -m "$MODEL" --backend cpu --seconds 0.1
  if [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q -- "--seconds 0.1 is less than one chunk of this model: at least 0.25" "$T/err"; then
    pass "mega_rtf --seconds 0.1: one line with the minimum"; else fail "mega_rtf --seconds 0.1: the message"; cat "$T/err"; fi
  expect_rc 2 "mega_rtf --streams --seconds 0.1" -- "$RTF" -m "$MODEL" --backend cpu --streams 2 --seconds 0.1
  expect_rc 0 "mega_rtf --seconds 0.25 (one chunk)" -- "$RTF" -m "$MODEL" --backend cpu --seconds 0.25
  expect_in "$T/out" "0.25 s in 1 chunks" "mega_rtf: one chunk measured"
  # results that cannot be written are an error, as for keyword_spotter
  for args in "--seconds 0.25" "--seconds 0.25 --json" "--seconds 0.25 --streams 2" "--help"; do
    "$RTF" -m "$MODEL" --backend cpu $args >/dev/full 2>"$T/err"
    rc=$?
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "mega_rtf: cannot write the output" "$T/err"; then
      pass "mega_rtf $args > /dev/full: exit 1, one line"; else fail "mega_rtf $args > /dev/full: exit $rc"; cat "$T/err"; fi
  done
  expect_rc 2 "mega_rtf: unknown option" -- "$RTF" -m "$FIX/tiny_patch.mega" --bogus
  expect_rc 2 "mega_rtf takes at most one file" -- "$RTF" -m "$FIX/tiny_patch.mega" "$ROOT/samples/yes.wav" "$ROOT/samples/no.wav"
  expect_rc 3 "mega_rtf: missing model" -- "$RTF" -m "$T/none.mega"
  # numeric options out of range: a usage error (--seconds 1e7 was an uncaught std::bad_alloc, exit 134)
  for bad in "--seconds 1e7" "--seconds 3600.5" "--seconds 0" "--seconds nan" "--streams 0" "--streams 4097" \
             "--threads 0" "--threads 17"; do
    expect_rc 2 "mega_rtf $bad" -- timeout 60 "$RTF" -m "$MODEL" --backend cpu $bad
    expect_in "$T/err" "${bad%% *}" "mega_rtf $bad: the message names the option"
  done
  expect_in "$RTF_HELP" "(0.001..3600)" "mega_rtf --help gives the range of --seconds"
  expect_rc 1 "mega_rtf: missing audio file" -- "$RTF" -m "$FIX/tiny_patch.mega" --backend cpu "$T/missing.wav"
  expect_in "$T/err" "mega_rtf: $T/missing.wav: no such file" "mega_rtf names the missing file"
  expect_rc 1 "mega_rtf: a directory" -- "$RTF" -m "$FIX/tiny_patch.mega" --backend cpu "$T/adir"
  expect_in "$T/err" "mega_rtf: $T/adir: " "mega_rtf names the directory"
  expect_rc 0 "mega_rtf --json" -- "$RTF" -m "$FIX/tiny_patch.mega" --backend cpu --json --seconds 2
  if $PY "$CHECKS" rtf_fields "$T/out"; then pass "mega_rtf fields"; else fail "mega_rtf fields"; cat "$T/out"; fi
  expect_rc 0 "mega_rtf on a file" -- "$RTF" -m "$MODEL" --backend cpu --seconds 2 "$ROOT/samples/yes.wav"
  expect_in "$T/out" "real-time factor" "mega_rtf prints the real-time factor"
  # backends: cpu always; cuda runs where built in with a GPU, and says clearly why not elsewhere
  expect_rc 0 "mega_rtf --streams (cpu batch)" -- "$RTF" -m "$FIX/tiny_patch.mega" --backend cpu --streams 3 --json --seconds 1
  expect_in "$T/out" '"streams": 3' "batch mega_rtf reports its streams"
  # --streams max: B = 1, 2, 4, ... until a step is slower than the chunk (a usage error before issue 82)
  expect_rc 0 "mega_rtf --streams max" -- "$RTF" -m "$FIX/tiny_scan.mega" --backend cpu --streams max --json --seconds 0.07
  expect_in "$T/out" '"realtime_streams": ' "mega_rtf --streams max reports the streams kept in real time"
  expect_in "$T/out" '"sweep": [{"streams": 1, "step_ms_p50": ' "... a row per batch size from 1"
  expect_in "$T/out" '"engine_mb_per_stream": ' "... with the engine memory per stream"
fi
expect_rc 2 "unknown backend" -- "$KS" classify -m "$MODEL" --backend tpu "$ROOT/samples/yes.wav"
# issue 81 item 2: the reference backend (the scalar kernels, the core's stream) scans as the cpu backend does
expect_rc 0 "scan --backend reference" -- "$KS" scan -m "$MODEL" --backend reference "$ROOT/samples/commands.wav"
cp "$T/out" "$T/ref_scan"
expect_rc 0 "scan --backend cpu" -- "$KS" scan -m "$MODEL" --backend cpu "$ROOT/samples/commands.wav"
if [ -s "$T/out" ] && cmp -s "$T/out" "$T/ref_scan"; then pass "reference backend: the cpu backend's detections"; else fail "reference backend's detections differ"; fi
expect_rc 2 "--fp16 is not for the reference backend" -- "$KS" classify -m "$MODEL" --backend reference --fp16 "$ROOT/samples/yes.wav"
expect_rc 2 "reference kernels are cpu only" -- "$KS" classify -m "$MODEL" --backend cuda --kernels reference "$ROOT/samples/yes.wav"
expect_rc 2 "--streams is for mega_rtf" -- "$KS" classify -m "$MODEL" --streams 2 "$ROOT/samples/yes.wav"
"$KS" classify -m "$FIX/tiny_uni.mega" --backend cuda --json "$ROOT/samples/yes.wav" >"$T/out" 2>"$T/err"
rc=$?
if [ "$rc" -eq 4 ] && grep -q "cuda backend is not available" "$T/err"; then
  pass "--backend cuda without a GPU: exit 4 and a clear message ($(cat "$T/err"))"
elif [ "$rc" -eq 0 ] && grep -q '"label"' "$T/out"; then
  pass "--backend cuda classifies on the GPU"
else
  fail "--backend cuda: exit $rc"; cat "$T/err"
fi

# Issue 85 item 2: the first hops of a stream, while the model's window fills,
# fire nothing on sound that holds no keyword (each of these fired in the first
# 250 ms: yes, go, down); a keyword said at the very start is still heard, in a
# longer recording and in each one-second sample clip, each its own word and no other.
sox -n -r 16000 -b 16 -c 1 "$T/square200.wav" synth 58 square 200 vol 0.3 &&
  sox -n -r 16000 -b 16 -c 1 "$T/tone440.wav" synth 10 sine 440 vol 0.3 &&
  espeak-ng -v en-gb-scotland -w "$T/para_raw.wav" \
    "Daniel bought fresh bread and cheese at the market before walking home through the park." &&
  sox "$T/para_raw.wav" -r 16000 "$T/para.wav" && sox "$ROOT/samples/stop.wav" "$T/stop_then_silence.wav" pad 0 5 ||
  fail "sox or espeak-ng could not make the start-of-stream files"
expect_rc 0 "scan a square wave, a tone and a keyword-free sentence" -- \
  "$KS" scan -m "$DEMO" "$T/square200.wav" "$T/tone440.wav" "$T/para.wav"
if [ -s "$T/out" ]; then fail "no keyword, yet detections:"; cat "$T/out"; else pass "no detection at their start"; fi
for f in "$T/stop_then_silence.wav" "$ROOT"/samples/{yes,no,up,down,left,right,on,off,stop,go}.wav; do
  want=$(basename "$f" .wav)
  [ "$want" = stop_then_silence ] && want=stop
  "$KS" scan -m "$DEMO" "$f" >"$T/out" 2>"$T/err" || fail "scan $f: exit $?"
  got=$(cut -f2 "$T/out" | tr '\n' ' ' | sed 's/ $//')
  if [ "$got" = "$want" ]; then pass "scan $(basename "$f"): '$got' from its start"; else fail "scan $(basename "$f"): '$got', wanted '$want'"; fi
done

expect_rc 2 "bidirectional model cannot stream" -- "$KS" classify -m "$FIX/tiny_bi.mega" --block-size 5 "$src"
expect_in "$T/err" "bidirectional" "message says why"

if [ "$failures" -ne 0 ]; then echo "$failures CLI test(s) failed"; exit 1; fi
echo "all CLI tests passed"
