# Sourced by make_demo_model.sh and validate_run.sh: the continuous recordings
# detection defaults are tuned and models are chosen on, and those the chosen model
# is measured on, named in one place.
# Needs WORK (where the recordings live), ROOT (the repository) and PY set.

# recording NAME DATA SPLIT MINUTES SEED [MAKE_STREAM_OPTION...]: $WORK/NAME.wav and .csv,
# made by make_stream.py unless there
recording() {
  [ -f "$WORK/$1.wav" ] || $PY "$ROOT/tools/data/make_stream.py" --data "$2" --split "$3" \
    --minutes "$4" --out "$WORK/$1.wav" --labels-out "$WORK/$1.csv" --seed "$5" "${@:6}"
}

# listed_recording ARRAY NAME DATA SPLIT MINUTES SEED [OPTION...]: recording, then appended to
# the array named ARRAY as tune_detection.py arguments
listed_recording() {
  local -n list=$1
  recording "${@:2}"
  list+=(--stream "$WORK/$2.wav" --labels "$WORK/$2.csv")
}

# validation_recordings DATA [REAL]: the validation recordings, made if missing and
# appended to TUNE. The data's splits are voice-disjoint (tools/data/voices.py): these
# hold only validation voices, and with REAL (tools/data/fetch_real_sc.py's folder) real
# validation-split speakers too.
validation_recordings() {
  # 60 minutes (about 27 of them keyword-free): one false alarm is about 2.2 per hour there
  listed_recording TUNE stream-val60 "$1" validation 60 7
  # 120 more minutes: with 60 alone a limit of 5 false alarms per hour came down to two or
  # three of them
  listed_recording TUNE stream-val120-17 "$1" validation 120 17
  # 150 minutes, 80% keyword-free (120 minutes): with the two above alone (81 keyword-free
  # minutes, 108 with the real ones) a limit of 5 per hour came down to 9 false alarms
  listed_recording TUNE stream-valfree150-19 "$1" validation 150 19 --keyword-free 0.8
  if [ -n "${2:-}" ]; then
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
