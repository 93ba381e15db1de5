#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Candidate (b) of issue 83 item 4 in PyTorch (docs/models.md, "Candidate (b)"):
# the teacher's embeddings as the runtime's front end will give them (each
# step's frames floored alone), Mega-chunk layers trained on them, measured on
# the real validation judges and on the real recordings, detection tuned per
# keyword at <= 2 false alarms per keyword-free hour as measure_run.sh tunes
# the bundled model.
#
#   [CACHE=DIR] [STEP=DIR] [TEACHER=DIR] [TH_RUN=DIR] [STREAM_ARGS="..."] student_b.sh RUN_DIR
#     [student_run train options...]
#
# The options go to both trainings; STREAM_ARGS to the second (with streams) alone: the bundled
# models/sc10-teacher.mega is STREAM_ARGS="--unknown-share 0.3 --seed 84" (b7), then
# STUDENT=1 measure_run.sh RUN_DIR.

#
# CACHE (default WORK/data/tcache): teacher_head.sh's caches (ALL=1), whose
# clips are embedded again here with the step floor into STEP (default
# CACHE-step); TEACHER: the ONNX files (default WORK/teacher); TH_RUN
# (default WORK/runs/th83a): teacher_head.sh's run, whose bundled-*.json and
# head-*.json make the table's first two columns. Needs the data of
# continue_real.sh and the teacher's files (work/teacher). Every stage skips
# what is made; heavy stages run at nice 19 on one thread.
set -euo pipefail
RUN=$1
shift
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/real_data.sh"
cd "$ROOT"
CACHE=${CACHE:-$WORK/data/tcache}
STEP=${STEP:-$CACHE-step}
TH_RUN=${TH_RUN:-$WORK/runs/th83a}
NICE="nice -n 19"
SE="$NICE $PY -m mega_kws_tools.teacher.stream_embed"
RUNNER="$PY -m mega_kws_tools.teacher.student_run"
T=${TEACHER:-$WORK/teacher}
# 1. the recordings of measure_run.sh's tuning, whole, the training speakers' keyword-free sentences
#    (speechocean762's train/ half) and recording (realtrain60, continue_real.sh's), and every cached
#    clip, with the step floor
$SE recordings --teacher "$T" --out "$STEP/streams" "$REC/realval20.wav" "$REC/realvalfree60.wav" \
  "$SO/keyword_free_validation.wav" "$SO/keyword_free_training.wav" "$REC/realtrain60.wav"
for pair in real-val:$REAL so-val:$SO/clips sokw-val:$SOKW sokw-train:$SOKW cathy-train:$CATHY \
            syn-train:$WORK/data/syntc so-train-all:$SO/clips real-train-all:$REAL syn-test:$WORK/data/syntest83; do
  $SE clips --teacher "$T" --like "$CACHE/${pair%%:*}" --data "${pair#*:}" --out "$STEP/${pair%%:*}"
done
# 2. the student: training speakers and voices only; the checkpoint kept on real validation speakers.
#    First on the clips alone (RUN/first), then again with windows of the training speakers' streams: their
#    sentences (half where the first took a keyword) as _unknown_, and their recording labelled by the
#    words ending in each window
DATA=(--train "$STEP/real-train-all" --train "$STEP/so-train-all" --train "$STEP/sokw-train"
      --train "$STEP/cathy-train" --train "$STEP/syn-train"
      --val "$STEP/real-val" --val "$STEP/so-val" --val "$STEP/sokw-val")
mkdir -p "$RUN/first"
[ -f "$RUN/first/history.json" ] || $NICE $RUNNER train --out "$RUN/first" --steps 3000 "$@" "${DATA[@]}" \
  | tee "$RUN/first/train.log"
# shellcheck disable=SC2086  # STREAM_ARGS: options, split on spaces
[ -f "$RUN/history.json" ] || $NICE $RUNNER train --out "$RUN" --steps 2000 "$@" ${STREAM_ARGS:-} "${DATA[@]}" \
  --negative-stream "$STEP/streams/keyword_free_training.npy" --mine-with "$RUN/first/best.pt" \
  --window-stream "$STEP/streams/realtrain60.npy" "$REC/realtrain60.csv" | tee "$RUN/train.log"
# 3. the clip judges, and the sentence cuts pooled with the running speech (equal rejection)
for j in real-val so-val sokw-val syn-test; do
  $RUNNER judge --checkpoint "$RUN/best.pt" --cache "$STEP/$j" --json-out "$RUN/student-$j.json" > /dev/null
done
$RUNNER judge --checkpoint "$RUN/best.pt" --cache "$STEP/sokw-val" --cache "$STEP/so-val" \
  --json-out "$RUN/student-sent-val.json" > /dev/null
# 4. the streaming figure
[ -f "$RUN/stream.json" ] || $NICE $RUNNER stream --checkpoint "$RUN/best.pt" --out "$RUN/stream.json" \
  --stream "$STEP/streams/realval20.npy" "$REC/realval20.csv" \
  --stream "$STEP/streams/realvalfree60.npy" "$REC/realvalfree60.csv" \
  --stream "$STEP/streams/keyword_free_validation.npy" "$SO/keyword_free_validation.csv" | tail -1
# 5. beside the bundled model and the teacher classifier
JUDGES=()
for j in "real-val:real validation speakers' clips" "so-val:running speech windows" \
         "sokw-val:keywords inside sentences" "syn-test:synthetic test voices" \
         "sent-val:sentence cuts and running speech pooled"; do
  JUDGES+=(--judge "${j#*:}" "$TH_RUN/bundled-${j%%:*}.json" "$TH_RUN/head-${j%%:*}.json" "$RUN/student-${j%%:*}.json")
done
$RUNNER table --columns "the bundled model" "the teacher classifier" "candidate (b)" "${JUDGES[@]}" | tee "$RUN/table.md"
