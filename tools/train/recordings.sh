# Sourced by make_demo_model.sh and validate_run.sh: the continuous recordings
# detection defaults are tuned and models are chosen on, named in one place.
# Needs WORK (where the recordings live), ROOT (the repository) and PY set.

# recording NAME DATA SPLIT MINUTES SEED: $WORK/NAME.wav and .csv, made by make_stream.py unless there
recording() {
  [ -f "$WORK/$1.wav" ] || $PY "$ROOT/tools/data/make_stream.py" --data "$2" --split "$3" \
    --minutes "$4" --out "$WORK/$1.wav" --labels-out "$WORK/$1.csv" --seed "$5"
}

# validation_recordings DATA [REAL]: makes the validation recordings if missing and
# appends them to the array TUNE as tune_detection.py arguments. The data's splits are
# voice-disjoint (tools/data/voices.py): these hold only validation voices, and with
# REAL (tools/data/fetch_real_sc.py's folder) real validation-split speakers too.
validation_recordings() {
  # 60 minutes (about 27 of them keyword-free): one false alarm is about 2.2 per hour there
  recording stream-val60 "$1" validation 60 7
  # 120 more minutes: with 60 alone a limit of 5 false alarms per hour came down to two or
  # three of them
  recording stream-val120-17 "$1" validation 120 17
  local names=(stream-val60 stream-val120-17)
  if [ -n "${2:-}" ]; then
    recording stream-realval20 "$2" validation 20 5
    recording stream-realval40-18 "$2" validation 40 18
    names+=(stream-realval20 stream-realval40-18)
  fi
  local n
  for n in "${names[@]}"; do TUNE+=(--stream "$WORK/$n.wav" --labels "$WORK/$n.csv"); done
}
