#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Training smoke test: a tiny synthetic dataset, a few dozen steps of the small
# preset on it; the loss must go down, and the checkpoint must convert, load
# and pass its self-test in the runtime; then the training options end to end (runs stopped and
# resumed give the same losses, each option reaches the loss, checkpoints convert and classify as
# PyTorch does). The functions behind them, and the refusal of bad option values, are tested on
# generated signals, without the text-to-speech programs, in tests/tools/ (pytest).
#   test_train_smoke.sh PATH/TO/keyword_spotter REPO_ROOT
set -eu
KS=$1
ROOT=$2
PY=/usr/bin/python3
CHECKS=$(dirname "$0")/train_smoke_checks.py  # the checks of what the tools write, one function each
export PYTHONPATH="$ROOT/tools${PYTHONPATH:+:$PYTHONPATH}"  # the mega_kws_tools package
for tool in espeak-ng flite sox text2wave; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
T=$(mktemp -d /tmp/ks_train.XXXXXX)
trap 'rm -rf "$T"' EXIT
# runtime_agrees NAME VERSION: $T/NAME.mega (converted) passes the runtime's self-test, says schema
# VERSION, and keyword_spotter classifies the validation clips as PyTorch did ($T/NAME.json)
runtime_agrees() {
  "$KS" selftest -m "$T/$1.mega"
  "$KS" info -m "$T/$1.mega" | grep -q "schema version *$2"
  $PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$T/$1.mega" --data "$T/data" --split validation \
      --json-out "$T/$1-ks.json" >/dev/null
  $PY "$CHECKS" same_confusion "$T/$1.json" "$T/$1-ks.json"
}
$PY -m mega_kws_tools.data.make_sc10 --out "$T/data" --per-word 4 --unknown 12 --silence 8 --jobs 2 --seed 3 >/dev/null
# voice-disjoint splits: no voice group in two splits, no reserved voice
$PY -m mega_kws_tools.data.check_splits "$T/data" >"$T/splits.log"
# overfit a handful of clips: the loss must drop fast if gradients flow everywhere
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/run" --preset smoke --steps 100 \
    --batch 16 --lr 1e-2 --warmup 5 --max-per-class 2 --eval-every 100 --threads 1 >"$T/train.log"
# mean loss of the first 10 steps vs the last 10
$PY "$CHECKS" loss_falls "$T/run/losses.txt" 100
$PY -m mega_kws_tools.convert.mega_convert "$T/run/last.pt" -o "$T/smoke.mega" >"$T/convert.log"
grep -q "_silence_" "$T/convert.log"
"$KS" selftest -m "$T/smoke.mega"
"$KS" classify -m "$T/smoke.mega" --json "$ROOT/samples/yes.wav" | grep -q '"label"'
# resume continues from the checkpoint
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/run" --preset smoke --steps 110 \
    --batch 16 --warmup 5 --max-per-class 2 --eval-every 110 --threads 1 --resume >"$T/resume.log"
grep -q "resumed at step 100" "$T/resume.log"
# a run stopped (--stop-at) and resumed draws the same batches and augmentations, so its losses are those
# of the run in one go, to the printed digit
AUG="--preset smoke --steps 20 --batch 8 --warmup 5 --max-per-class 2 --eval-every 10 --threads 1 --seed 7
     --noise-prob 0.5 --speed-prob 0.5 --color-prob 0.5 --vowel-prob 0.5 --pitch-prob 0.5 --warp-prob 0.5
     --mask-prob 0.5"
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/whole" $AUG >/dev/null
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/split" $AUG --stop-at 10 >"$T/stop.log"
grep -q "stopped at step 10 of 20" "$T/stop.log"
[ "$(wc -l <"$T/split/losses.txt")" = 10 ]
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/split" $AUG --resume >/dev/null
cmp "$T/whole/losses.txt" "$T/split/losses.txt"
# --prefetch: a second process makes the batches ahead; the same batches, so the same losses, and the
# same generator state in the checkpoints (stopped with one depth, resumed with another)
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/pf" $AUG --prefetch 2 --stop-at 10 \
    >"$T/pf.log"
grep -q "^prefetch: up to 2 batches made ahead in process [0-9]*$" "$T/pf.log"
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/pf" $AUG --prefetch 3 --resume >/dev/null
cmp "$T/whole/losses.txt" "$T/pf/losses.txt"
# a worker that dies stops the run with one line that says so, not a hang
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/pfkill" $AUG --steps 100000 \
    --eval-every 100000 --prefetch 2 >"$T/pfkill.log" 2>&1 &
TRAINER=$!
for _ in $(seq 100); do [ -s "$T/pfkill/losses.txt" ] && break; sleep 0.2; done
kill -9 "$(sed -n 's/^prefetch: .* in process \([0-9]*\)$/\1/p' "$T/pfkill.log")"
# (killed while sending a batch, the worker leaves half a batch in the pipe: that must end too)
for _ in $(seq 600); do kill -0 $TRAINER 2>/dev/null || break; sleep 0.1; done
if kill -0 $TRAINER 2>/dev/null; then
  kill -9 $TRAINER; echo "the trainer still waited 60 s after its batch worker died"; cat "$T/pfkill.log"; exit 1
fi
if wait $TRAINER; then echo "the trainer went on without its batch worker"; exit 1; fi
grep -q "^train.py: --prefetch: the batch worker (pid [0-9]*) died, exit code -9$" "$T/pfkill.log"
# SIGTERM (or Ctrl-C) ends the step under way, saves last.pt and exits with 128 + 15; resumed, the run
# draws what the run in one go draws
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/sig" $AUG --steps 100000 \
    --eval-every 100000 --prefetch 2 >"$T/sig.log" 2>&1 &
TRAINER=$!
for _ in $(seq 100); do [ -f "$T/sig/losses.txt" ] && [ "$(wc -l <"$T/sig/losses.txt")" -ge 3 ] && break; sleep 0.2; done
kill -TERM $TRAINER
RC=0; wait $TRAINER || RC=$?
[ $RC = 143 ] || { echo "SIGTERM: exit status $RC, not 143"; cat "$T/sig.log"; exit 1; }
K=$(sed -n 's/^stopped at step \([0-9]*\) of 100000 (SIGTERM): .*last.pt saved; go on with .*--resume.*/\1/p' "$T/sig.log")
[ -n "$K" ] && [ "$K" = "$(wc -l <"$T/sig/losses.txt")" ] || { echo "SIGTERM: no stop message"; cat "$T/sig.log"; exit 1; }
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/sig" $AUG --steps 100000 \
    --eval-every 100000 --stop-at $((K + 4)) --resume >/dev/null
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/nosig" $AUG --steps 100000 \
    --eval-every 100000 --stop-at $((K + 4)) >/dev/null
cmp "$T/nosig/losses.txt" "$T/sig/losses.txt"
# --consistency: each drawn clip augmented twice and the two views' predictions pulled together;
# it resumes as exactly and reaches the loss, also scoped to the keywords
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/cwhole" $AUG --consistency 4 >/dev/null
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/csplit" $AUG --consistency 4 \
    --stop-at 10 >/dev/null
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/csplit" $AUG --consistency 4 \
    --resume >/dev/null
cmp "$T/cwhole/losses.txt" "$T/csplit/losses.txt"
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/cpf" $AUG --consistency 4 \
    --prefetch 1 >/dev/null
cmp "$T/cwhole/losses.txt" "$T/cpf/losses.txt"
if cmp -s "$T/cwhole/losses.txt" "$T/whole/losses.txt"; then echo "--consistency changed no loss"; exit 1; fi
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/ckw" $AUG --consistency 4 \
    --consistency-scope keywords --stop-at 5 >/dev/null
if [ "$(head -n 5 "$T/cwhole/losses.txt")" = "$(cat "$T/ckw/losses.txt")" ]; then echo "--consistency-scope keywords changed no loss"; exit 1; fi
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/boost" $AUG --class-boost go=3 --stop-at 5 \
    >/dev/null
if [ "$(head -n 5 "$T/whole/losses.txt")" = "$(cat "$T/boost/losses.txt")" ]; then echo "--class-boost changed no loss"; exit 1; fi
# augmentation_run NAME "OPTIONS" LOG_LINE: the run with OPTIONS added to AUG logs LOG_LINE, gives the
# same losses stopped halfway (with --prefetch) and resumed, and not the losses of AUG alone
augmentation_run() {
  local name=$1 opts="$AUG $2" line=$3
  $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/${name}whole" $opts >"$T/$name.log"
  grep -q "$line" "$T/$name.log"
  $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/${name}split" $opts --prefetch 2 \
      --stop-at 10 >/dev/null
  $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/${name}split" $opts --resume >/dev/null
  cmp "$T/${name}whole/losses.txt" "$T/${name}split/losses.txt"
  if [ "$(head -n 5 "$T/whole/losses.txt")" = "$(head -n 5 "$T/${name}whole/losses.txt")" ]; then
    echo "$2 changed no loss"; exit 1
  fi
}
# --mixup-prob, --babble-prob: the run resumes exactly (also with --prefetch) and the mix reaches the loss
augmentation_run m "--mixup-prob 0.5 --mixup-alpha 0.4" "^mixup: 0.5 of the clips"
augmentation_run b "--babble-prob 0.8" "^babble: 0.8 of the noise"
# --nonspeech-negatives (issue 83 item 5): generated tones, beeps and noise as _silence_ reach the loss
augmentation_run ns "--nonspeech-negatives 0.3" "^non-speech negatives: 0.3 of the examples, labelled _silence_"
# --nonspeech-audio (recorded music, half of the non-speech) and --nonspeech-weight (beeps drawn more often)
mkdir -p "$T/music"
"$PY" -c 'import sys, numpy as np; from mega_kws_tools.audio import write_wav
write_wav(sys.argv[1], (np.sin(np.arange(48000) * 0.05) * 8000).astype(np.int16))' "$T/music/tune.wav"
augmentation_run nsa "--nonspeech-negatives 0.3 --nonspeech-audio $T/music --nonspeech-weight beeps=4" \
  "^recorded non-speech: 1 recordings, 0.1 min, 50% of the non-speech negatives"
grep -q "^non-speech negatives: 0.3 of the examples (tone 10%, square 10%, saw 10%, chirp 10%, beeps 40%" "$T/nsa.log"
if cmp -s "$T/nswhole/losses.txt" "$T/nsawhole/losses.txt"; then echo "--nonspeech-audio changed no loss"; exit 1; fi
# --voice-adversary: the run resumes exactly and the adversary reaches the loss; voice_probe.py and
# voice_norm_check.py read its checkpoints; a run made with it does not resume without it
augmentation_run va "--voice-adversary 0.5 --voice-adversary-ramp 5 --steps 25" "^voice adversary: weight 0.5 (reached at step 5), [0-9]* voice classes"
grep -q "voice adversary 0\.[0-9]* right" "$T/va.log" || { echo "no voice adversary accuracy logged"; exit 1; }
"$PY" -m mega_kws_tools.training.voice_probe --data "$T/data" "$T/vawhole/last.pt" "$T/whole/last.pt" --clips 40 \
    >"$T/probe.log"
grep -q "^$T/vawhole/last.pt: voice 0\.[0-9]*, keyword 0\.[0-9]*$" "$T/probe.log"
"$PY" -m mega_kws_tools.training.voice_norm_check --data "$T/data" --split training --alphas 0,1 "$T/whole/last.pt" \
    >"$T/norm.log"
[ "$(grep -c "^  voices: keywords 0\.[0-9]*, -> _unknown_ 0\.[0-9]*, _unknown_ rejected" "$T/norm.log")" = 2 ]
if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/vasplit" $AUG --resume \
    >"$T/bad.log" 2>&1; then echo "a voice-adversary run resumed without the flag"; exit 1; fi
grep -q "was made with --voice-adversary" "$T/bad.log"
# fine-tuning: weights from the checkpoint, a fresh schedule, training clips of a second folder added
FT="--data $T/data --extra-data $T/data --extra-val $T/data --classes kws12 --preset smoke --steps 10 --batch 16
    --lr 1e-3 --warmup 1 --max-per-class 2 --eval-every 10 --threads 1 --speed-prob 0.5 --noise-prob 0.5
    --warp-prob 0.5 --mask-prob 0.5"
$PY -m mega_kws_tools.training.train $FT --init "$T/run/last.pt" --out "$T/ft" >"$T/ft.log"
grep -q "initialized from" "$T/ft.log"
$PY "$CHECKS" extra_data_doubles "$T/train.log" "$T/ft.log"
# the trained weights were really loaded by --init: the first losses of run $1 are far below those of
# run $2, the same command without --init (so the same batches and augmentation) from fresh weights
expect_weights_loaded() {
  $PY "$CHECKS" weights_loaded "$T/$2/losses.txt" "$T/$1/losses.txt" "$3"
}
$PY -m mega_kws_tools.training.train $FT --out "$T/ft0" >/dev/null
expect_weights_loaded ft ft0 "--init"
# --patch-norm running_mean from a checkpoint without it: it trains, resumes, and evaluate.py
# --checkpoint measures it
NORM="--patch-norm running_mean --patch-norm-decay 0.02 --preset smoke --batch 16 --lr 1e-3 --warmup 1
      --max-per-class 2 --eval-every 5 --threads 1 --warp-prob 0.5 --mask-prob 0.5"
$PY -m mega_kws_tools.training.train --data "$T/data" --init "$T/run/last.pt" --classes kws12 --out "$T/cmn" \
    $NORM --steps 5 >"$T/cmn.log"
grep -q "running mean: decay 0.02, starting value set from 24 training inputs" "$T/cmn.log"
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/cmn" $NORM --steps 10 --resume \
    >"$T/cmn2.log"
grep -q "resumed at step 5" "$T/cmn2.log"
# the run's --patch-norm and the checkpoint's must agree: one line that says so, for --resume and --init
if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/cmn" --preset smoke --batch 16 \
    --max-per-class 2 --threads 1 --steps 12 --resume >"$T/cmn-bad.log" 2>&1; then
  echo "--resume of a --patch-norm run without it was accepted"; exit 1
fi
grep -q "^train.py: --resume .*last.pt does not fit this run's flags (preset smoke): the checkpoint has embed_tokens.norm_init, this run not (--patch-norm differs from the checkpoint's)$" "$T/cmn-bad.log"
if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/cmn-init" --preset smoke \
    --init "$T/cmn/last.pt" --max-per-class 2 --threads 1 --steps 1 >"$T/cmn-bad2.log" 2>&1; then
  echo "--init from a --patch-norm run into one without it was accepted"; exit 1
fi
grep -q "^train.py: --init .*does not fit preset smoke: .*(--patch-norm differs from the checkpoint's)$" "$T/cmn-bad2.log"
[ "$(wc -l <"$T/cmn-bad2.log")" -le 3 ]
$PY -m mega_kws_tools.evaluation.evaluate --checkpoint "$T/cmn/last.pt" --data "$T/data" --split validation \
    --json-out "$T/cmn.json" >/dev/null
$PY "$CHECKS" clips_without_errors "$T/cmn.json"
# it converts (schema 3), passes the runtime's self-test, and the runtime classifies the clips
# as PyTorch does
$PY -m mega_kws_tools.convert.mega_convert "$T/cmn/last.pt" -o "$T/cmn.mega" >"$T/cmn-convert.log"
grep -q "less their running mean (decay 0.02)" "$T/cmn-convert.log"
runtime_agrees cmn 3
# evaluate.py --checkpoint classifies as the runtime does: the same confusion matrix as
# keyword_spotter on the model converted from the same checkpoint
$PY -m mega_kws_tools.evaluation.evaluate --checkpoint "$T/smoke.mega" --data "$T/data" --split training \
    --json-out "$T/pt.json" >/dev/null
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$T/smoke.mega" --data "$T/data" --split training \
    --json-out "$T/ks.json" >/dev/null
$PY "$CHECKS" same_confusion "$T/pt.json" "$T/ks.json"
# evaluate.py's trade-off (keyword accuracy at each rejection level): the runtime's logits give the
# checkpoint's levels
$PY "$CHECKS" rejection_levels_agree "$T/pt.json" "$T/ks.json"
# --init from a .mega model file (mega_unpack.py): the converted weights are loaded
FTM="--data $T/data --classes kws12 --preset smoke --steps 10 --batch 16 --lr 1e-3 --warmup 1 --max-per-class 2
     --eval-every 10 --threads 1"
$PY -m mega_kws_tools.training.train $FTM --init "$T/smoke.mega" --out "$T/ftm" >"$T/ftm.log"
grep -q "initialized from .*smoke.mega (its step None, validation accuracy unknown)" "$T/ftm.log"
$PY -m mega_kws_tools.training.train $FTM --out "$T/ftm0" >/dev/null
expect_weights_loaded ftm ftm0 "--init .mega"
# --weight-average: a run validates and keeps (best.pt) the average, and last.pt carries it
# across --resume
$PY -m mega_kws_tools.training.train --data "$T/data" --init "$T/run/last.pt" --classes kws12 --out "$T/wa" \
    --preset smoke --steps 10 --batch 16 --lr 1e-2 --warmup 1 --max-per-class 2 --eval-every 10 --threads 1 \
    --weight-average 0.9 >"$T/wa.log"
$PY -m mega_kws_tools.training.train --data "$T/data" --init "$T/run/last.pt" --classes kws12 --out "$T/wa" \
    --preset smoke --steps 20 --batch 16 --lr 1e-2 --warmup 1 --max-per-class 2 --eval-every 20 --threads 1 \
    --weight-average 0.9 --resume >"$T/wa2.log"
grep -q "weight average: decay 0.9, 10 updates so far" "$T/wa2.log"
$PY "$CHECKS" weight_average_kept "$T/wa"
# soup.py: the weighted mean of every floating-point tensor of two runs of one
# configuration (integer counters from the first); the soup converts and passes the
# runtime's self-test; checkpoints of another configuration or labels are refused
$PY -m mega_kws_tools.training.soup -o "$T/soup.pt" "$T/run/last.pt" "$T/wa/last.pt" --weights 1 3 >"$T/soup.log"
$PY "$CHECKS" soup_is_weighted_mean "$T/run/last.pt" "$T/wa/last.pt" "$T/soup.pt"
$PY -m mega_kws_tools.convert.mega_convert "$T/soup.pt" -o "$T/soup.mega" >/dev/null
"$KS" selftest -m "$T/soup.mega"
$PY "$CHECKS" make_mismatched_checkpoints "$T/run/last.pt" "$T/other.pt" "$T/relabel.pt"
# soup.py --greedy: every candidate scored; the best first; the soup written is the
# mean of the checkpoints it names
$PY -m mega_kws_tools.training.soup -o "$T/greedy.pt" "$T/run/last.pt" "$T/wa/last.pt" "$T/ftm/last.pt" \
    --greedy "$T/data" >"$T/greedy.log"
$PY "$CHECKS" greedy_soup "$T/greedy.log" "$T/greedy.pt"
for bad in "other.pt:configuration differs" "relabel.pt:labels differ" "soup.log:cannot read it"; do
  if $PY -m mega_kws_tools.training.soup -o "$T/bad_soup.pt" "$T/run/last.pt" "$T/${bad%%:*}" 2>"$T/soup.err"; then
    echo "soup.py accepted ${bad%%:*}"; exit 1
  fi
  grep -q "${bad#*:}" "$T/soup.err"
done
# --speed-range / --warp-range: the run logs them, resumes exactly and changes the losses
augmentation_run sr "--speed-range 0.6 1.6" "^speed factors 0.6-1.6 (p 0.5), warp factors 0.88-1.14 (p 0.5)"
augmentation_run wr "--warp-range 0.7 1.3" "^speed factors 0.88-1.12 (p 0.5), warp factors 0.7-1.3 (p 0.5)"
# make_splices.py: half-keyword clips of one split, all _unknown_, listed for evaluate.py; never
# over an existing folder
$PY -m mega_kws_tools.augment.make_splices --data "$T/data" --split training --per-keyword 2 --out "$T/half" >/dev/null
$PY "$CHECKS" splices_listed "$T/half"
# evaluate.py reads splices.csv: per keyword and part kept, the clips called that keyword
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$T/smoke.mega" --data "$T/half" --split validation \
    --json-out "$T/half.json" >/dev/null
$PY "$CHECKS" halfwords_evaluated "$T/half.json"
# a listed clip missing from disk counts as an error, not as a clip the split lacks
cp -r "$T/half" "$T/half-missing"
rm "$T/half-missing/$(head -n 1 "$T/half/validation_list.txt")"
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$T/smoke.mega" --data "$T/half-missing" \
    --split validation --json-out "$T/half-missing.json" >/dev/null 2>"$T/half-missing.err"
grep -q "1 clip(s) of .* validation list missing" "$T/half-missing.err"
$PY "$CHECKS" missing_clip_counted "$T/half-missing.json"
# evaluate.py's _unknown_ words (from the manifest) agree with its confusion matrix's _unknown_ row
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$T/smoke.mega" --data "$T/data" --split training \
    --json-out "$T/train-clips.json" >/dev/null
$PY "$CHECKS" unknown_words_reported "$T/train-clips.json"
if $PY -m mega_kws_tools.augment.make_splices --data "$T/data" --split training --out "$T/half" 2>/dev/null; then
  echo "make_splices.py wrote over an existing folder"; exit 1
fi
# hard examples (mine_hard.py): windows of a training-voice recording, mixed into batches
$PY -m mega_kws_tools.data.make_stream --data "$T/data" --split training --minutes 0.5 --out "$T/tr.wav" \
    --labels-out "$T/tr.csv" --seed 4 >/dev/null
$PY -m mega_kws_tools.training.mine_hard --checkpoint "$T/run/last.pt" --stream "$T/tr.wav" --labels "$T/tr.csv" \
    --data "$T/data" -o "$T/hard.npz" --negative-min 0 --positive-max 1.01 >"$T/mine.log"
$PY "$CHECKS" hard_examples_mined "$T/hard.npz" "$T/tr.csv"
# a recording of validation or test voices is refused
$PY -m mega_kws_tools.data.make_stream --data "$T/data" --split validation --minutes 0.3 --out "$T/va.wav" \
    --labels-out "$T/va.csv" --seed 4 >/dev/null
if $PY -m mega_kws_tools.training.mine_hard --checkpoint "$T/run/last.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --data "$T/data" -o "$T/bad.npz" 2>"$T/mine_bad.log"; then
  echo "mine_hard.py accepted a recording of validation voices"; exit 1
fi
grep -q "training voices only" "$T/mine_bad.log"
# --once: recordings that share a played-clips list never play a keyword or word clip twice, and one
# that would run out writes nothing
for s in 5 6; do
  $PY -m mega_kws_tools.data.make_stream --data "$T/data" --split training --minutes 0.4 --out "$T/once$s.wav" \
      --labels-out "$T/once$s.csv" --seed $s --once "$T/played.txt" >/dev/null
done
$PY "$CHECKS" once_plays_each_once "$T/played.txt" "$T/once5.csv" "$T/once6.csv"
if $PY -m mega_kws_tools.data.make_stream --data "$T/data" --split training --minutes 30 --out "$T/once7.wav" \
    --labels-out "$T/once7.csv" --seed 7 --once "$T/played.txt" 2>"$T/once7.log"; then
  echo "make_stream.py --once played clips again"; exit 1
fi
grep -q "used up" "$T/once7.log"
[ ! -e "$T/once7.wav" ] && [ ! -e "$T/once7.csv" ]
# --only-split: more clips of one split's voices, past an earlier run's indices, that merge into it
$PY -m mega_kws_tools.data.make_sc10 --out "$T/valmore" --per-word 1 --unknown 2 --silence 0 --near-miss 2 \
    --only-split validation --first-index 12 --jobs 2 --seed 3 >/dev/null
$PY "$CHECKS" validation_only_split "$T/valmore"
$PY -m mega_kws_tools.data.merge_sets --out "$T/merged" "$T/data" "$T/valmore" >/dev/null
$PY -m mega_kws_tools.training.train --data "$T/data" --init "$T/run/last.pt" --classes kws12 --out "$T/fth" \
    --preset smoke --steps 5 --batch 16 --lr 1e-3 --warmup 1 --max-per-class 2 --eval-every 5 --threads 1 \
    --hard-examples "$T/hard.npz" --hard-share 0.5 >"$T/fth.log"
grep -q "hard examples: [0-9]* windows" "$T/fth.log"
# the hard windows are drawn into the batch by the --prefetch worker as they are here
$PY -m mega_kws_tools.training.train --data "$T/data" --init "$T/run/last.pt" --classes kws12 --out "$T/fthp" \
    --preset smoke --steps 5 --batch 16 --lr 1e-3 --warmup 1 --max-per-class 2 --eval-every 5 --threads 1 \
    --hard-examples "$T/hard.npz" --hard-share 0.5 --prefetch 2 >/dev/null
cmp "$T/fth/losses.txt" "$T/fthp/losses.txt"
# --val-stream: checkpoints are judged on a recording of validation voices too
$PY -m mega_kws_tools.training.train --data "$T/data" --init "$T/run/last.pt" --classes kws12 --out "$T/fts" \
    --preset smoke --steps 4 --batch 16 --lr 1e-3 --warmup 1 --max-per-class 2 --eval-every 2 --threads 1 \
    --val-stream "$T/va.wav" "$T/va.csv" >"$T/fts.log"
[ "$(grep -c "validation accuracy .*, stream recall [0-9.]* at threshold" "$T/fts.log")" = 2 ]
$PY "$CHECKS" best_key_is_stream_ranked "$T/fts/best.pt"
# tune_detection.py pools several recordings: one recording twice tunes as it does once (offsets line up)
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --max-fa-per-hour 50 -o "$T/det1.json" >/dev/null 2>&1
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --stream "$T/va.wav" --labels "$T/va.csv" --max-fa-per-hour 50 -o "$T/det2.json" >/dev/null 2>&1
$PY "$CHECKS" tuned_on_two_streams "$T/det1.json" "$T/det2.json"
# --curve: one line per limit, recall never falling as the limit grows; at 50 per hour it is
# what -o tuned there (det1.json)
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --curve >"$T/curve.log" 2>&1
$PY "$CHECKS" curve_matches_tuning "$T/curve.log" "$T/det1.json"
# --false-alarms: the smoke model raises none (the report on false alarms placed by hand:
# tests/tools/test_evaluation.py)
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --max-fa-per-hour 50 --false-alarms >"$T/fa.log" 2>&1
grep -q "^0 false alarms, 0 in keyword-free stretches$" "$T/fa.log"
# --holdout-check tunes on one half and scores on the other: on one recording twice, each half is
# that recording (tests/tools/test_evaluation.py), so the shared threshold is det1's and scores as det1 did
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --stream "$T/va.wav" --labels "$T/va.csv" --max-fa-per-hour 50 --holdout-check >"$T/holdout.txt" 2>&1
$PY "$CHECKS" holdout_halves "$T/det1.json" "$T/holdout.txt"
# --preset *-mel (log-mel front end): a run trains, resumes, converts (schema 4), passes the runtime's
# self-test and classifies as PyTorch does
MEL="--data $T/data --classes kws12 --out $T/mel --preset smoke-mel --batch 16 --lr 1e-2 --warmup 5
     --max-per-class 2 --eval-every 20 --threads 1 --warp-prob 0.5 --mask-prob 0.5"
$PY -m mega_kws_tools.training.train $MEL --steps 60 >"$T/mel.log"
grep -q "^log-mel: 16 bands, bias set from" "$T/mel.log"
$PY "$CHECKS" loss_falls "$T/mel/losses.txt" 60 log-mel
$PY -m mega_kws_tools.training.train $MEL --steps 70 --resume >"$T/mel-resume.log"
grep -q "resumed at step 60" "$T/mel-resume.log"
$PY -m mega_kws_tools.convert.mega_convert "$T/mel/last.pt" -o "$T/mel.mega" >"$T/mel-convert.log"
grep -q "features logmel (188 bins in 16 bands" "$T/mel-convert.log"
$PY -m mega_kws_tools.evaluation.evaluate --checkpoint "$T/mel/last.pt" --data "$T/data" --split validation \
    --json-out "$T/mel.json" >/dev/null
runtime_agrees mel 4
# a checkpoint of another architecture is refused with a clear message
if $PY -m mega_kws_tools.training.train --data "$T/data" --init "$T/run/last.pt" --out "$T/bad" --preset demo \
    --steps 1 --max-per-class 2 --threads 1 >"$T/bad.log" 2>&1; then
  echo "--init with another preset was accepted"; exit 1
fi
grep -q "does not fit preset demo" "$T/bad.log"
# --label-smoothing reaches the loss: from the same weights and batch, the first loss with smoothing 0.5
# is above the one without (the trained model is surer of a clip's class than of the others)
for e in 0.0 0.5; do
  $PY -m mega_kws_tools.training.train --data "$T/data" --init "$T/run/last.pt" --classes kws12 --out "$T/ls$e" \
      --preset smoke --steps 1 --batch 16 --lr 1e-3 --warmup 1 --max-per-class 2 --eval-every 1 --threads 1 \
      --label-smoothing $e >"$T/ls$e.log"
  grep -q "^label smoothing $e$" "$T/ls$e.log"
done
$PY "$CHECKS" label_smoothing_raises_loss "$T/ls0.0/losses.txt" "$T/ls0.5/losses.txt"
echo "training smoke test passed"
