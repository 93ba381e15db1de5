#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The teacher classifier (issue 83 item 3; docs/models.md, "Teacher classifier"):
# the teacher's embeddings of the project's training data and of the real
# validation judges, a head over them kept on real validation speakers only,
# and the head beside the bundled model on each judge, scored the same way.
#
#   [CACHE=DIR] [ALL=1] [UNKNOWN_SHARE=P] teacher_head.sh RUN_DIR [SEED]
#
# ALL=1 trains on every training clip of the real Speech Commands speakers and
# every speechocean762 training window (else at most 120 a word and 400
# windows); UNKNOWN_SHARE draws _unknown_ that share of each batch (else each
# label equally often).
# Needs the data of continue_real.sh stages 1-2b under WORK (real_sc, so762,
# so762kw, cathykw), the teacher's files (python3 -m
# mega_kws_tools.teacher.fetch, into work/teacher) and build/keyword_spotter.
# Makes its own small synthetic set of training voices. Every stage skips what
# is made (the caches resume shard by shard); heavy stages run at nice 19.
set -euo pipefail
RUN=$1 SEED=${2:-83}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/real_data.sh"
cd "$ROOT"
CACHE=${CACHE:-$WORK/data/tcache}
SYNT=$WORK/data/syntc
SYNTEST=$WORK/data/syntest83
NICE="nice -n 19"
EMBED="$NICE $PY -m mega_kws_tools.teacher.embed_cache --threads 2 --batch 32"
# synthetic training voices: 120 clips of each keyword, so on/off/go (a few real clips each) are heard
[ -f "$SYNT/README.txt" ] || $NICE $PY -m mega_kws_tools.data.make_sc10 --out "$SYNT" --seed 71 --only-split training \
  --per-word 120 --unknown 500 --near-miss 300 --silence 150 --babble-words 100 --jobs 2 --festival pipe
# synthetic test voices (a secondary judge, never trained on or selected with): a small set
[ -f "$SYNTEST/README.txt" ] || $NICE $PY -m mega_kws_tools.data.make_sc10 --out "$SYNTEST" --seed 72 --only-split testing \
  --per-word 30 --unknown 120 --near-miss 80 --silence 30 --babble-words 50 --jobs 1 --festival pipe
# 1. the judges: real validation speakers, whole, and the synthetic test voices
$EMBED --data "$REAL" --split validation --out "$CACHE/real-val"
$EMBED --data "$SO/clips" --split validation --out "$CACHE/so-val"
$EMBED --data "$SOKW" --split validation --out "$CACHE/sokw-val"
$EMBED --data "$SYNTEST" --split testing --out "$CACHE/syn-test"
# 2. training speakers and voices, at most N clips a folder (the time of the teacher on this CPU)
if [ "${ALL:-0}" = 1 ]; then
  REAL_TRAIN=real-train-all SO_TRAIN=so-train-all
  $EMBED --data "$REAL" --split training --out "$CACHE/$REAL_TRAIN"
  $EMBED --data "$SO/clips" --split training --out "$CACHE/$SO_TRAIN"
else
  REAL_TRAIN=real-train SO_TRAIN=so-train
  $EMBED --data "$REAL" --split training --max-per-folder 120 --seed 1 --out "$CACHE/$REAL_TRAIN"
  $EMBED --data "$SO/clips" --split training --max-per-folder 400 --seed 2 --out "$CACHE/$SO_TRAIN"
fi
$EMBED --data "$SOKW" --split training --max-per-folder 60 --seed 3 --out "$CACHE/sokw-train"
$EMBED --data "$CATHY" --split training --max-per-folder 40 --seed 5 --out "$CACHE/cathy-train"
$EMBED --data "$SYNT" --split training --max-per-folder 120 --seed 4 --out "$CACHE/syn-train"
# 3. the head, its checkpoint chosen on the real validation speakers' clips, windows and cuts (history.json:
#    written when it ends; one thread: two only wait on each other on a busy machine)
mkdir -p "$RUN"
[ -f "$RUN/history.json" ] || $NICE $PY -m mega_kws_tools.teacher.head train --out "$RUN" --seed "$SEED" --threads 1 \
  --unknown-share "${UNKNOWN_SHARE:-0}" --train "$CACHE/$REAL_TRAIN" --train "$CACHE/$SO_TRAIN" --train "$CACHE/sokw-train" --train "$CACHE/cathy-train" \
  --train "$CACHE/syn-train" --val "$CACHE/real-val" --val "$CACHE/so-val" --val "$CACHE/sokw-val" | tee "$RUN/train.log"
# 4. each judge: the head on its cache, the bundled model with the runtime (evaluate.py), side by side
JUDGES=()
for j in "real-val:$REAL:real validation speakers' clips:validation" "so-val:$SO/clips:running speech windows:validation" \
         "sokw-val:$SOKW:keywords inside sentences:validation" "syn-test:$SYNTEST:synthetic test voices:testing"; do
  IFS=: read -r name data title split <<< "$j"
  $PY -m mega_kws_tools.teacher.head eval --checkpoint "$RUN/best.pt" --cache "$CACHE/$name" \
    --json-out "$RUN/head-$name.json" > /dev/null
  [ -f "$RUN/bundled-$name.json" ] || $NICE $PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" \
    --model "$ROOT/models/sc10-demo.mega" --data "$data" --split "$split" --json-out "$RUN/bundled-$name.json" > /dev/null
  JUDGES+=(--judge "$title" "$RUN/bundled-$name.json" "$RUN/head-$name.json")
done
# 5. keywords inside sentences against running speech of the same speakers, pooled (one folder of links:
#    the cuts and the windows), so both are read at equal rejection of running speech
SENT=$WORK/data/sentval
if [ ! -f "$SENT/validation_list.txt" ]; then
  rm -rf "$SENT.part" && mkdir -p "$SENT.part"
  for src in "$SO/clips" "$SOKW"; do
    while read -r f; do
      mkdir -p "$SENT.part/$(dirname "$f")" && ln -s "$src/$f" "$SENT.part/$f"
    done < "$src/validation_list.txt"
    cat "$src/validation_list.txt" >> "$SENT.part/validation_list.txt"
  done
  touch "$SENT.part/testing_list.txt" && mv "$SENT.part" "$SENT"
fi
$PY -m mega_kws_tools.teacher.head eval --checkpoint "$RUN/best.pt" --cache "$CACHE/sokw-val" --cache "$CACHE/so-val" \
  --json-out "$RUN/head-sent-val.json" > /dev/null
[ -f "$RUN/bundled-sent-val.json" ] || $NICE $PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" \
  --model "$ROOT/models/sc10-demo.mega" --data "$SENT" --split validation --json-out "$RUN/bundled-sent-val.json" > /dev/null
JUDGES+=(--judge "sentence cuts and running speech pooled" "$RUN/bundled-sent-val.json" "$RUN/head-sent-val.json")
$PY -m mega_kws_tools.teacher.compare "${JUDGES[@]}" | tee "$RUN/table.md"
