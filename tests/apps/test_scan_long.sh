#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# scan streams a 2-hour recording with flat memory: its peak RSS must match
# that of a 1-minute scan (the file is never loaded whole), from the file and
# through a pipe (scan -).
#   test_scan_long.sh PATH/TO/keyword_spotter MODEL
set -eu
KS=$1
MODEL=$2
command -v sox >/dev/null || { echo "SKIP: sox not installed"; exit 77; }
T=$(mktemp -d /tmp/ks_long.XXXXXX)
trap 'rm -rf "$T"' EXIT
sox -n -r 16000 -b 16 -c 1 "$T/short.wav" synth 60 pinknoise vol 0.2
sox -n -r 16000 -b 16 -c 1 "$T/long.wav" synth 7200 pinknoise vol 0.2
peak_kb() { /usr/bin/time -f "%M" "$KS" scan -m "$MODEL" --json "$1" 2>&1 >/dev/null | tail -1; }
short=$(peak_kb "$T/short.wav")
long=$(peak_kb "$T/long.wav")
echo "peak RSS: 1 minute ${short} kB, 2 hours ${long} kB (file $(du -m "$T/long.wav" | cut -f1) MB)"
"$KS" scan -m "$MODEL" "$T/long.wav" 2>&1 >/dev/null | grep -q "scanned 7200.000 s"
[ "$long" -le $((short + 4096)) ] || { echo "FAIL: memory grew with the length of the recording"; exit 1; }
# the same through a pipe (scan -): libsndfile reads it with only its header
# kept (stdin_audio.h), however long the stream
pipe_peak_kb() { cat "$1" | /usr/bin/time -f "%M" "$KS" scan -m "$MODEL" --json - 2>&1 >/dev/null | tail -1; }
short_pipe=$(pipe_peak_kb "$T/short.wav")
long_pipe=$(pipe_peak_kb "$T/long.wav")
echo "peak RSS through a pipe: 1 minute ${short_pipe} kB, 2 hours ${long_pipe} kB"
[ "$long_pipe" -le $((short_pipe + 4096)) ] || { echo "FAIL: memory grew with the length of the piped recording"; exit 1; }
echo "scan memory is flat"
