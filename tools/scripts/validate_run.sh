#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The validation figures models are chosen by, for one training run: nothing here
# touches a test voice or a testing-split speaker. The pipeline of the synthetic-voice
# runs in docs/lab-log.md; the ship rule now reads continue_real.sh's real-speaker figures.
#   validate_run.sh RUN_DIR DATA_DIR REAL_DIR KEYWORD_SPOTTER
# Uses the six validation recordings beside DATA_DIR (recordings.sh) and the
# half-keyword sets halfword-val and halfword-realval there (each made if missing:
# make_stream.py, make_splices.py). Writes RUN_DIR/validation/: the recall / false-alarm
# curve on the six recordings pooled (curve.txt), the model converted with defaults
# tuned there (model.mega), and evaluate.py's figures on the validation voices'
# clips, the real validation speakers' clips and both half-keyword sets (*.json).
set -euo pipefail
RUN=$1 DATA=$2 REAL=$3 KS=$4
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$(dirname "$HERE")")
PY=/usr/bin/python3
export PYTHONPATH="$ROOT/tools${PYTHONPATH:+:$PYTHONPATH}"  # the mega_kws_tools package
WORK=$(dirname "$DATA")
OUT=$RUN/validation
mkdir -p "$OUT"
. "$HERE/recordings.sh"
TUNE=()
validation_recordings "$DATA" "$REAL"
[ -d "$WORK/halfword-val" ] || $PY -m mega_kws_tools.augment.make_splices --data "$DATA" --split validation \
  --per-keyword 100 --out "$WORK/halfword-val"
[ -d "$WORK/halfword-realval" ] || $PY -m mega_kws_tools.augment.make_splices --data "$REAL" --split validation \
  --per-keyword 100 --out "$WORK/halfword-realval"
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$RUN/best.pt" "${TUNE[@]}" --curve --max-fa-per-hour 5 \
  -o "$OUT/detection.json" | tee "$OUT/curve.txt"
$PY -m mega_kws_tools.convert.mega_convert "$RUN/best.pt" -o "$OUT/model.mega" --detection "$OUT/detection.json" >/dev/null
for set in "$DATA:voices" "$REAL:real" "$WORK/halfword-val:halfword-val" "$WORK/halfword-realval:halfword-realval"; do
  echo "== ${set##*:}"
  $PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$OUT/model.mega" --data "${set%:*}" --split validation \
    --json-out "$OUT/${set##*:}.json" | sed -n 1,3p
done
