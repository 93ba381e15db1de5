#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Issue 83's curve: what the real `on`, `off` and `go` of training are worth to
# the teacher model's recipe (models/sc10-teacher.mega, student_b.sh's first
# training: the clips alone, 3,000 steps). The same training with only a share
# of those three words' real training clips (said alone and cut from sentences;
# the synthetic voices' clips stay whole), each share's clips a subset of the
# next one's, judged on the real validation speakers' clips and sentence cuts.
#
#   [STEP=DIR] [SHARES="0 0.25 0.5 1"] [SEED=83] real_curve.sh OUT_DIR
#
# STEP (default WORK/data/tcache-step): the step-floor caches of student_b.sh
# (made here if missing, from the data of continue_real.sh, the synthetic
# voices of teacher_head.sh and the teacher's files). Writes OUT_DIR/keep-SHARE
# (a run each) and OUT_DIR/curve.md. Every stage skips what is made; heavy
# stages run at nice 19 on one thread.
set -euo pipefail
OUT=$1
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/real_data.sh"
cd "$ROOT"
STEP=${STEP:-$WORK/data/tcache-step}
SYNT=$WORK/data/syntc
NICE="nice -n 19"
RUNNER="$PY -m mega_kws_tools.teacher.student_run"
for need in "$REAL" "$SO/clips" "$SOKW" "$CATHY" "$SYNT/README.txt" "${TEACHER:-$WORK/teacher}/embedding_model.onnx"; do
  [ -e "$need" ] || { echo "real_curve.sh: $need is missing (continue_real.sh stages 1-2b, teacher_head.sh's" \
                          "synthetic voices, python3 -m mega_kws_tools.teacher.fetch)" >&2; exit 1; }
done
# 1. the caches (student_b.sh's, chosen as teacher_head.sh ALL=1 chooses them)
for c in "real-val validation 0 0 $REAL" "sokw-val validation 0 0 $SOKW" "so-val validation 0 0 $SO/clips" \
         "real-train-all training 0 0 $REAL" "so-train-all training 0 0 $SO/clips" \
         "sokw-train training 60 3 $SOKW" "cathy-train training 40 5 $CATHY" "syn-train training 120 4 $SYNT"; do
  read -r name split most seed data <<< "$c"
  $NICE $PY -m mega_kws_tools.teacher.stream_embed clips --split "$split" --max-per-folder "$most" --seed "$seed" \
    --data "$data" --teacher "${TEACHER:-$WORK/teacher}" --out "$STEP/$name" | tail -1
done
# 2. a run per share: the real caches thinned, the synthetic voices whole; the checkpoint kept on the
#    real validation speakers as student_b.sh keeps it
for share in ${SHARES:-0 0.25 0.5 1}; do
  run=$OUT/keep-$share
  mkdir -p "$run"
  [ -f "$run/history.json" ] || $NICE $RUNNER train --out "$run" --steps 3000 --seed "${SEED:-83}" \
    --keep on="$share" --keep off="$share" --keep go="$share" \
    --train "$STEP/real-train-all" --train "$STEP/so-train-all" --train "$STEP/sokw-train" \
    --train "$STEP/cathy-train" --train-whole "$STEP/syn-train" \
    --val "$STEP/real-val" --val "$STEP/so-val" --val "$STEP/sokw-val" > "$run/train.log"
  grep "^kept" "$run/train.log"
  for j in real-val sokw-val so-val; do
    [ -f "$run/student-$j.json" ] || $RUNNER judge --checkpoint "$run/best.pt" --cache "$STEP/$j" \
      --json-out "$run/student-$j.json" > /dev/null
  done
done
# 3. the curve (teacher.real_curve): per share, the real training clips kept, each word's right answers on
#    each judge, the running speech rejected, and the sentence cuts where every run rejects as much of it
# shellcheck disable=SC2086  # SHARES: numbers, split on spaces
$PY -m mega_kws_tools.teacher.real_curve --out "$OUT" --step "$STEP" ${SHARES:-0 0.25 0.5 1} | tee "$OUT/curve.md"
