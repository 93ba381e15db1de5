# SPDX-License-Identifier: Apache-2.0
# Sourced by make_demo_model.sh and validate_run.sh: the continuous recordings
# detection defaults are tuned and models are chosen on, and those the chosen model
# is measured on, named in one place.
# Needs WORK (where the recordings live), ROOT (the repository) and PY set.

# recording NAME DATA SPLIT MINUTES SEED [MAKE_STREAM_OPTION...]: $WORK/NAME.wav and .csv,
# made by make_stream.py unless there
recording() {
  [ -f "$WORK/$1.wav" ] || $PY -m mega_kws_tools.data.make_stream --data "$2" --split "$3" \
    --minutes "$4" --out "$WORK/$1.wav" --labels-out "$WORK/$1.csv" --seed "$5" "${@:6}"
}

# listed_recording ARRAY NAME DATA SPLIT MINUTES SEED [OPTION...]: recording, then appended to
# the array named ARRAY as tune_detection.py arguments
listed_recording() {
  local -n list=$1
  recording "${@:2}"
  list+=(--stream "$WORK/$2.wav" --labels "$WORK/$2.csv")
}

# valwords DATA: $WORK/valwords, DATA's clips plus more clips of its validation voices (make_sc10.py
# --only-split validation, in $WORK/valmore), linked, made if missing. The extra clips start at clip
# index 20000 of make_sc10.py's default seed, past every index DATA's runs used (sc10v: 1,500 per
# keyword and 6,000 _unknown_; nearmiss2: 12,000 near misses); merge_sets.py refuses any clash.
valwords() {
  [ -d "$WORK/valwords" ] && return
  [ -f "$WORK/valmore/manifest.csv" ] || $PY -m mega_kws_tools.data.make_sc10 --out "$WORK/valmore" \
    --only-split validation --first-index 20000 --per-word 350 --unknown 2500 --near-miss 5000 --silence 0 --jobs 2
  $PY -m mega_kws_tools.data.merge_sets --out "$WORK/valwords" "$1" "$WORK/valmore" >/dev/null
}

# validation_recordings DATA [REAL]: the validation recordings, made if missing and
# appended to TUNE. The data's splits are voice-disjoint (tools/mega_kws_tools/data/voices.py): these
# hold only validation voices, and with REAL (tools/mega_kws_tools/data/fetch_real_sc.py's folder) real
# validation-split speakers too.
validation_recordings() {
  # The three of validation voices play each keyword and word clip once, across all three
  # (make_stream.py --once): a clip a model mistakes counts one false alarm, not one per
  # replay. (The recordings before them replayed clips up to four times: three clips made 9 of
  # one model's 21 false alarms.) They draw from valwords, as DATA's validation clips were too
  # few to play once each. The played list chains them: without it, all three are made again.
  local played=$WORK/valwords-played.txt once=(stream-once-val60 stream-once-val120-17 stream-once-valfree150-19)
  valwords "$1"
  if [ ! -f "$played" ]; then
    for r in "${once[@]}"; do rm -f "$WORK/$r.wav" "$WORK/$r.csv"; done
  fi
  # 60 minutes (about 27 of them keyword-free): one false alarm is about 2.2 per hour there
  listed_recording TUNE stream-once-val60 "$WORK/valwords" validation 60 7 --once "$played"
  # 120 more minutes: with 60 alone a limit of 5 false alarms per hour came down to two or
  # three of them
  listed_recording TUNE stream-once-val120-17 "$WORK/valwords" validation 120 17 --once "$played"
  # 150 minutes, 80% keyword-free (120 minutes): with the two above alone (81 keyword-free
  # minutes, 108 with the real ones) a limit of 5 per hour came down to 9 false alarms
  listed_recording TUNE stream-once-valfree150-19 "$WORK/valwords" validation 150 19 --keyword-free 0.8 \
    --once "$played"
  if [ -n "${2:-}" ]; then
    # Real validation speakers are too few to play each clip once (on, off and go have 2-3
    # clips each), so these replay clips as before.
    listed_recording TUNE stream-realval20 "$2" validation 20 5
    listed_recording TUNE stream-realval40-18 "$2" validation 40 18
    listed_recording TUNE stream-realvalfree60-20 "$2" validation 60 20 --keyword-free 0.8
  fi
}

# test_recordings DATA: the test recordings (test voices only), made if missing and appended to
# the array TEST as tune_detection.py arguments. They measure a model after it is chosen, never choose it.
test_recordings() {
  # 60 minutes (27 keyword-free): 10 held too few keyword-free minutes (4.5) to tell 5 false
  # alarms per hour from 15
  listed_recording TEST stream-test60 "$1" testing 60 4
  # 150 minutes, 80% keyword-free (120 minutes): in the 27 above a limit of 5 per hour is two
  # false alarms. Fixed before any model was measured on it.
  listed_recording TEST stream-testfree150-21 "$1" testing 150 21 --keyword-free 0.8
}
