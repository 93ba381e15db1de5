#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A continuation of a committed model on real speech that fits in a session
# (issue "Real people first"; docs/models.md, "How to train, and how long it takes"):
# rebuild the data it needs, continue training, tune the detection defaults on
# real validation recordings, convert, and measure on real validation speakers.
#
#   [SHIPPED_RUN=DIR] [STEPS=N] [HARD_SHARE=P] [TRAIN_ARGS="..."] continue_real.sh INIT.mega PRESET RUN_DIR [SEED]
#
# WORK (default work/ in the repository) holds the data; every stage skips what
# is already made, and the training resumes from RUN_DIR/last.pt, so the script
# can be run again after an interruption. TRAIN_ARGS: more train.py options (split at
# spaces), e.g. "--nonspeech-negatives 0.05 --teacher-targets T.npz --distill 1" (the music of
# stage 3b: "--nonspeech-audio work/data/music"). HARD_SHARE > 0 mines hard examples with
# INIT (stage 4b: the windows of training speakers' running speech it fires on,
# and training speakers' keywords it misses in a recording) and draws them that
# share of each batch. Before the first run, clone the public sources into
# MIRROR (default WORK/sources): `bash tools/scripts/reproduce_training.sh sources`.
# Stage times on this project's 2-core machine are in docs/models.md.
set -euo pipefail
INIT=$1 PRESET=$2 RUN=$3 SEED=${4:-171}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/real_data.sh"
STEPS=${STEPS:-1500} HARD_SHARE=${HARD_SHARE:-0}
read -r -a EXTRA_ARGS <<< "${TRAIN_ARGS:-}"
# HARD_SHARE: 0 (no hard examples) or a share in (0, 1]; MINE=1 when above 0
MINE=$($PY -c 'import sys
p = float(sys.argv[1])
if not 0 <= p <= 1: raise ValueError(p)
print(int(p > 0))' "$HARD_SHARE" 2>/dev/null) \
  || { echo "continue_real.sh: HARD_SHARE=$HARD_SHARE: give 0 (no hard examples) or a share of each batch from 0 to 1" >&2; exit 2; }

# 1. real Speech Commands clips (training- and validation-split speakers only)
[ -f "$REAL/validation_list.txt" ] || $PY -m mega_kws_tools.data.fetch_real_sc --out "$REAL" \
  --sources "$ROOT/tools/mega_kws_tools/data/real_sc_sources.txt" --mirror-root "$MIRROR"
# 2. speechocean762's train/ half: keyword-free sentences, their 1 s windows, a keyword-free recording
[ -f "$SO/keyword_free_validation.wav" ] || $PY -m mega_kws_tools.data.speechocean \
  --repo "$MIRROR/jimbozhang+speechocean762/repo" --out "$SO"
# 2b. the keywords said inside read sentences, cut by forced alignment: speechocean762's train/ half
#     (its validation speakers' cuts validate) and rhasspy/dataset-voice-cathy (one speaker: training)
[ -f "$SOKW/align.tsv" ] || $PY -m mega_kws_tools.data.sentence_keywords --source speechocean762 \
  --repo "$MIRROR/jimbozhang+speechocean762/repo" --out "$SOKW"
[ -f "$CATHY/align.tsv" ] || $PY -m mega_kws_tools.data.sentence_keywords --source cathy \
  --repo "$MIRROR/rhasspy+dataset-voice-cathy/repo" --out "$CATHY"
#     and the validation speakers' sentences that hold them, whole: a recording with the aligned words as its
#     labels (measure_run.sh scans it)
[ -f "$SOSENT.csv" ] || $PY -m mega_kws_tools.data.sentence_stream --repo "$MIRROR/jimbozhang+speechocean762/repo" \
  --align "$SOKW/align.tsv" --out "$SOSENT"
# 2c. near misses inside the same sentences (one, an, in, of, good, so ...): two-second windows ending just
#     after each, `_unknown_` hard examples (train them with TRAIN_ARGS="--hard-examples $NEAR-so-training.npz
#     --hard-examples $NEAR-cathy.npz"); the validation speakers' windows are a judge (measure_run.sh 8)
for s in training validation; do
  [ -f "$NEAR-so-$s.npz" ] || $PY -m mega_kws_tools.data.near_miss --repo "$MIRROR/jimbozhang+speechocean762/repo" \
    --split $s -o "$NEAR-so-$s.npz"
done
[ -f "$NEAR-cathy.npz" ] || $PY -m mega_kws_tools.data.near_miss --source cathy \
  --repo "$MIRROR/rhasspy+dataset-voice-cathy/repo" -o "$NEAR-cathy.npz"
# 3. a small synthetic set of training voices, so the continuation keeps hearing on/off/go
[ -f "$SYN/README.txt" ] || $PY -m mega_kws_tools.data.make_sc10 --out "$SYN" --seed 71 --only-split training \
  --per-word 250 --unknown 1200 --near-miss 800 --silence 300 --babble-words 100 --jobs 2 --festival pipe
# 3b. recorded music for the non-speech negatives (TRAIN_ARGS="--nonspeech-negatives F --nonspeech-audio $MUSIC"):
#     two Debian game-data packages' tracks; the music the non-speech check scans stays out. Only for a run
#     whose TRAIN_ARGS use it: the others need no download from Debian's archive
if [[ " ${EXTRA_ARGS[*]} " == *" --nonspeech-audio "* ]] && [ ! -f "$MUSIC/SOURCES.txt" ]; then
  bash "$HERE/music_negatives.sh" "$MUSIC"
fi
# 4. real validation recordings: validation-split speakers' words over noise beds
mkdir -p "$REC"
[ -f "$REC/realval20.csv" ] || $PY -m mega_kws_tools.data.make_stream --data "$REAL" --split validation \
  --minutes 20 --seed 5 --out "$REC/realval20.wav" --labels-out "$REC/realval20.csv"
[ -f "$REC/realvalfree60.csv" ] || $PY -m mega_kws_tools.data.make_stream --data "$REAL" --split validation \
  --minutes 60 --seed 20 --keyword-free 0.8 --out "$REC/realvalfree60.wav" --labels-out "$REC/realvalfree60.csv"
# 4b. hard examples, mined with INIT from training speakers only: speechocean762's keyword-free
#     sentences (windows it scores a keyword >= 0.3) and a recording of Speech Commands training-split words
HARD=()
if [ "$MINE" = 1 ]; then
  mkdir -p "$RUN"
  [ -f "$RUN/init.pt" ] || $PY -m mega_kws_tools.convert.mega_unpack "$INIT" -o "$RUN/init.pt"
  [ -f "$REC/realtrain60.csv" ] || $PY -m mega_kws_tools.data.make_stream --data "$REAL" --split training \
    --minutes 60 --seed 30 --keyword-free 0.5 --out "$REC/realtrain60.wav" --labels-out "$REC/realtrain60.csv"
  [ -f "$RUN/hard-speech.npz" ] || $PY -m mega_kws_tools.training.mine_hard --checkpoint "$RUN/init.pt" \
    --stream "$SO/keyword_free_training.wav" --labels "$SO/keyword_free_training.csv" --data "$SO/clips" \
    -o "$RUN/hard-speech.npz"
  [ -f "$RUN/hard-words.npz" ] || $PY -m mega_kws_tools.training.mine_hard --checkpoint "$RUN/init.pt" \
    --stream "$REC/realtrain60.wav" --labels "$REC/realtrain60.csv" --data "$REAL" -o "$RUN/hard-words.npz"
  HARD=(--hard-examples "$RUN/hard-speech.npz" --hard-examples "$RUN/hard-words.npz" --hard-share "$HARD_SHARE")
fi
# 5. the continuation; validation (the kept checkpoint) = real validation speakers' clips and windows
RESUME=()
[ -f "$RUN/last.pt" ] && RESUME=(--resume)
$PY -m mega_kws_tools.training.train --data "$SYN" --extra-data "$REAL" --extra-data "$SO/clips" --extra-data "$SOKW" --extra-data "$CATHY" \
  --extra-val "$REAL" --extra-val "$SO/clips" --extra-val "$SOKW" --classes kws12 --preset "$PRESET" --init "$INIT" \
  --steps "$STEPS" --batch 32 --eval-every 250 --lr 3e-4 --warmup 100 --noise-prob 0.5 --babble-prob 0.3 \
  --speed-prob 0.5 --warp-prob 0.5 --mask-prob 0.5 --pitch-prob 0.8 --unknown-share 0.35 --extra-share 0.35 \
  --label-smoothing 0 --threads 1 --seed "$SEED" --out "$RUN" "${HARD[@]}" "${RESUME[@]}" "${EXTRA_ARGS[@]}"
# 6-9. detection defaults, conversion, measurement and the ship rule (SHIPPED_RUN)
bash "$HERE/measure_run.sh" "$RUN"
