#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Stages 6-9 of continue_real.sh for a run folder that holds a checkpoint
# (RUN/best.pt: a continuation, or a soup of runs made by
# mega_kws_tools.training.soup): tune the detection defaults on the real
# validation recordings, convert, measure with the shipped runtime, and judge
# against the shipped model's run.
#
#   [SHIPPED_RUN=DIR] [STUDENT=1 [TEACHER=DIR]] [TUNE_SENTENCES=1] measure_run.sh RUN_DIR
#
# STUDENT=1: RUN/best.pt is a student on the teacher's embedding (teacher.student_run's), converted by
# teacher.student_convert and tuned on this build's runtime (tune_detection --model).
#
# The data are continue_real.sh's (under WORK, default work/ in the repository); docs/models.md
# has the stage times.
set -euo pipefail
RUN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/real_data.sh"
[ -f "$RUN/best.pt" ] || { echo "measure_run.sh: $RUN/best.pt: no checkpoint to measure" >&2; exit 2; }
# 6. detection defaults: per keyword, the most recall at <= 2 false alarms per keyword-free hour of the
#    real validation recordings and speechocean762's validation speakers' sentences
TUNE=(--stream "$REC/realval20.wav" --labels "$REC/realval20.csv"
      --stream "$REC/realvalfree60.wav" --labels "$REC/realvalfree60.csv"
      --stream "$SO/keyword_free_validation.wav" --labels "$SO/keyword_free_validation.csv")
#    TUNE_SENTENCES=1 adds the same speakers' sentences that hold keywords, whole (continue_real.sh 2b): 170 real
#    keywords in running speech (35 `on`), 0.16 keyword-free hours (docs/models.md, "Keywords inside running speech")
if [ "${TUNE_SENTENCES:-0}" = 1 ]; then
  [ -f "$SOSENT.csv" ] || { echo "measure_run.sh: TUNE_SENTENCES=1: $SOSENT.csv is missing (continue_real.sh 2b)" >&2; exit 2; }
  TUNE+=(--stream "$SOSENT.wav" --labels "$SOSENT.csv")
fi
TUNING=(--max-fa-per-hour 2 --per-keyword -o "$RUN/detection.json" --curve-json "$RUN/curve.json")
NOTES="Demo model: synthetic speech (tools/mega_kws_tools/data/make_sc10.py) and real speech (Speech Commands training-split speakers, CC BY 4.0; speechocean762 training speakers' sentences and the keywords in them, CC BY 4.0; rhasspy/dataset-voice-cathy's keywords, CC0); checkpoint, detection defaults and the ship rule on real validation speakers. See docs/models.md."
if [ "${STUDENT:-0}" = 1 ]; then
  # a student on the teacher's embedding (teacher.student): converted with the teacher's weights
  # (TEACHER, default WORK/teacher), tuned on the runtime's own posteriors of that file
  SC=(-m mega_kws_tools.teacher.student_convert "$RUN/best.pt" --teacher "${TEACHER:-$WORK/teacher}")
  $PY "${SC[@]}" -o "$RUN/untuned.mega" | tail -1
  MEGA_KWS_LIBRARY=${MEGA_KWS_LIBRARY:-$(dirname "$KS")/libmega_kws.so} \
    $PY -m mega_kws_tools.evaluation.tune_detection --model "$RUN/untuned.mega" "${TUNE[@]}" "${TUNING[@]}" | tail -1
  NOTES="Mega-chunk layers on a pretrained front end, openWakeWord's melspectrogram and Google's speech embedding (Apache-2.0; NOTICE). Trained on synthetic speech (tools/mega_kws_tools/data/make_sc10.py) and real speech (Speech Commands training-split speakers, CC BY 4.0; speechocean762 training speakers' sentences and the keywords in them, CC BY 4.0; rhasspy/dataset-voice-cathy's keywords, CC0); checkpoint and detection defaults chosen on real validation speakers. See docs/models.md."
  $PY "${SC[@]}" -o "$RUN/model.mega" --detection "$RUN/detection.json" --notes "$NOTES" | tail -1
else
  $PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$RUN/best.pt" "${TUNE[@]}" "${TUNING[@]}" | tail -1
  $PY -m mega_kws_tools.convert.mega_convert "$RUN/best.pt" -o "$RUN/model.mega" --detection "$RUN/detection.json" \
    --notes "$NOTES"
fi
"$KS" selftest -m "$RUN/model.mega"
# 7. measured with the shipped runtime: real validation clips, the recordings at the stored defaults
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$RUN/model.mega" --data "$REAL" --split validation \
  --stream "$REC/realval20.wav" --stream-labels "$REC/realval20.csv" --json-out "$RUN/eval-realval.json" \
  | grep -v "^  missed"
"$KS" scan -m "$RUN/model.mega" "$SO/keyword_free_validation.wav" | tail -1
#    the keywords validation speakers said inside their sentences, scanned whole (where made: continue_real.sh 2b)
[ ! -f "$SOSENT.csv" ] || $PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$RUN/model.mega" \
  --stream "$SOSENT.wav" --stream-labels "$SOSENT.csv" --json-out "$RUN/eval-insentence.json" | sed -n 1p
# 8. what the ship rule reads besides: real running speech (one-second windows of speechocean762's
#    validation speakers' keyword-free sentences); the synthetic test voices, reported only, where made
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$RUN/model.mega" --data "$SO/clips" \
  --split validation --json-out "$RUN/eval-speech.json" | sed -n 1p
#    and the keywords validation speakers said inside sentences (speechocean762 cuts), reported
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$RUN/model.mega" --data "$SOKW" \
  --split validation --json-out "$RUN/eval-sentences.json" | sed -n 1p
#    the validation speakers' near misses in running speech (continue_real.sh 2c), at the window's end
[ ! -f "$NEAR-so-validation.npz" ] || MEGA_KWS_LIBRARY=${MEGA_KWS_LIBRARY:-$(dirname "$KS")/libmega_kws.so} \
  $PY -m mega_kws_tools.evaluation.windows --model "$RUN/model.mega" "$NEAR-so-validation.npz" \
  --json-out "$RUN/eval-nearmiss.json" | sed -n 1p
[ ! -d "$WORK/data/syntest71" ] || $PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$RUN/model.mega" \
  --data "$WORK/data/syntest71" --split testing --json-out "$RUN/eval-syntest.json" | sed -n 1p
# 9. against the shipped model's run (SHIPPED_RUN, if given): real speakers decide
[ -z "${SHIPPED_RUN:-}" ] || $PY -m mega_kws_tools.evaluation.ship_rule "$SHIPPED_RUN" "$RUN"
