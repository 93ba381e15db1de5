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

# tuning_recording NAME DATA SPLIT MINUTES SEED [OPTION...]: recording, then appended to the array TUNE
# as tune_detection.py arguments
tuning_recording() {
  recording "$@"
  TUNE+=(--stream "$WORK/$1.wav" --labels "$WORK/$1.csv")
}

# validation_recordings DATA [REAL]: the validation recordings, made if missing and
# appended to TUNE. The data's splits are voice-disjoint (tools/data/voices.py): these
# hold only validation voices, and with REAL (tools/data/fetch_real_sc.py's folder) real
# validation-split speakers too.
validation_recordings() {
  # 60 minutes (about 27 of them keyword-free): one false alarm is about 2.2 per hour there
  tuning_recording stream-val60 "$1" validation 60 7
  # 120 more minutes: with 60 alone a limit of 5 false alarms per hour came down to two or
  # three of them
  tuning_recording stream-val120-17 "$1" validation 120 17
  # 150 minutes, 80% keyword-free (120 minutes): with the two above alone (81 keyword-free
  # minutes, 108 with the real ones) a limit of 5 per hour came down to 9 false alarms
  tuning_recording stream-valfree150-19 "$1" validation 150 19 --keyword-free 0.8
  if [ -n "${2:-}" ]; then
    tuning_recording stream-realval20 "$2" validation 20 5
    tuning_recording stream-realval40-18 "$2" validation 40 18
    tuning_recording stream-realvalfree60-20 "$2" validation 60 20 --keyword-free 0.8
  fi
}

# test_recordings DATA: the test recordings (test voices only), made if missing and appended to
# the array TEST as tune_detection.py arguments. They measure a model after it is chosen, never choose it.
test_recordings() {
  # 60 minutes (27 keyword-free): 10 held too few keyword-free minutes (4.5) to tell 5 false
  # alarms per hour from 15
  recording stream-test60 "$1" testing 60 4
  # 150 minutes, 80% keyword-free (120 minutes): in the 27 above a limit of 5 per hour is two
  # false alarms. Fixed before any model was measured on it.
  recording stream-testfree150-21 "$1" testing 150 21 --keyword-free 0.8
  TEST+=(--stream "$WORK/stream-test60.wav" --labels "$WORK/stream-test60.csv"
         --stream "$WORK/stream-testfree150-21.wav" --labels "$WORK/stream-testfree150-21.csv")
}
