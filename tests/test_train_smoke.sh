#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Training smoke test: a tiny synthetic dataset, a few dozen steps of the small
# preset on it; the loss must go down, and the checkpoint must convert, load
# and pass its self-test in the runtime; then the training options end to end (runs stopped and
# resumed give the same losses, each option reaches the loss, checkpoints convert and classify as
# PyTorch does). The functions behind them, and the refusal of bad option values, are tested on
# generated signals, without the text-to-speech programs, in tests/python/ (pytest).
#   test_train_smoke.sh PATH/TO/keyword_spotter REPO_ROOT
set -eu
KS=$1
ROOT=$2
PY=/usr/bin/python3
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
  $PY -c "import json, sys; a, b = (json.load(open(p))['clips']['confusion'] for p in sys.argv[1:]); assert a == b, (a, b)" \
      "$T/$1.json" "$T/$1-ks.json"
}
$PY -m mega_kws_tools.data.make_sc10 --out "$T/data" --per-word 4 --unknown 12 --silence 8 --jobs 2 --seed 3 >/dev/null
# voice-disjoint splits: no voice group in two splits, no reserved voice
$PY -m mega_kws_tools.data.check_splits "$T/data" >"$T/splits.log"
# overfit a handful of clips: the loss must drop fast if gradients flow everywhere
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/run" --preset smoke --steps 100 \
    --batch 16 --lr 1e-2 --warmup 5 --max-per-class 2 --eval-every 100 --threads 1 >"$T/train.log"
# mean loss of the first 10 steps vs the last 10
$PY - "$T/run/losses.txt" <<'PY'
import sys
loss = [float(l.split()[1]) for l in open(sys.argv[1])]
first, last = sum(loss[:10]) / 10, sum(loss[-10:]) / 10
print(f"loss {first:.3f} -> {last:.3f}")
assert len(loss) == 100 and last < 0.9 * first, "loss did not decrease"
PY
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
AUG="--preset smoke --steps 20 --batch 16 --warmup 5 --max-per-class 2 --eval-every 10 --threads 1 --seed 7
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
$PY - "$T/train.log" "$T/ft.log" <<'PY'
import re, sys
n = [re.search(r"data: (\d+) training, (\d+) validation", open(p).read()).groups() for p in sys.argv[1:3]]
assert int(n[1][0]) == 2 * int(n[0][0]), f"--extra-data: {n[1][0]} training clips, expected twice {n[0][0]}"
assert int(n[1][1]) == 2 * int(n[0][1]), f"--extra-val: {n[1][1]} validation clips, expected twice {n[0][1]}"
PY
# the trained weights were really loaded by --init: the first losses of run $1 are far below those of
# run $2, the same command without --init (so the same batches and augmentation) from fresh weights
expect_weights_loaded() {
  $PY - "$T/$2/losses.txt" "$T/$1/losses.txt" "$3" <<'PY'
import sys
fresh = [float(l.split()[1]) for l in open(sys.argv[1])][:3]
tuned = [float(l.split()[1]) for l in open(sys.argv[2])][:3]
assert sum(tuned) < 0.9 * sum(fresh), f"{sys.argv[3]}: first losses {tuned} vs {fresh} from fresh weights"
PY
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
$PY -c "import json, sys; c = json.load(open(sys.argv[1]))['clips']; assert c['clips'] > 0 and c['errors'] == 0, c" \
    "$T/cmn.json"
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
$PY -c "import json, sys; a, b = (json.load(open(p))['clips']['confusion'] for p in sys.argv[1:]); assert a == b, (a, b)" \
    "$T/pt.json" "$T/ks.json"
# evaluate.py's trade-off (keyword accuracy at each rejection level): the runtime's logits give the
# checkpoint's levels
$PY - "$T/pt.json" "$T/ks.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["clips"]["keywords_at_rejection"] for p in sys.argv[1:3])
assert a.keys() == b.keys() and all((a[k] is None) == (b[k] is None) for k in a), (a, b)
PY
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
$PY - "$T/wa" <<'PY'
import sys
import torch
best, last = (torch.load(f"{sys.argv[1]}/{n}.pt") for n in ("best", "last"))
avg = last["weight_average"]
assert avg["n"] == 20 and best["step"] == 20, (avg["n"], best["step"])
assert all(torch.equal(v, avg["avg"][k]) for k, v in best["model"].items()), "best.pt is not the average"
assert any(not torch.equal(v, last["model"][k]) for k, v in best["model"].items()), "the average is the weights"
print("--weight-average: best.pt holds the average")
PY
# soup.py: the weighted mean of every floating-point tensor of two runs of one
# configuration (integer counters from the first); the soup converts and passes the
# runtime's self-test; checkpoints of another configuration or labels are refused
$PY -m mega_kws_tools.training.soup -o "$T/soup.pt" "$T/run/last.pt" "$T/wa/last.pt" --weights 1 3 >"$T/soup.log"
$PY - "$T/run/last.pt" "$T/wa/last.pt" "$T/soup.pt" <<'PY'
import sys
import torch
a, b, s = (torch.load(p)["model"] for p in sys.argv[1:4])
floats = [k for k, v in a.items() if v.is_floating_point()]
assert floats and any(not torch.equal(a[k], b[k]) for k in floats), "the two runs have the same weights"
for k, v in s.items():
    assert v.dtype == a[k].dtype, k
    if v.is_floating_point():
        assert torch.allclose(v.double(), (a[k].double() + 3 * b[k].double()) / 4, rtol=1e-6, atol=1e-7), k
    else:
        assert torch.equal(v, a[k]), k
print(f"soup.py: {len(floats)} tensors averaged 1:3")
PY
$PY -m mega_kws_tools.convert.mega_convert "$T/soup.pt" -o "$T/soup.mega" >/dev/null
"$KS" selftest -m "$T/soup.mega"
$PY - "$T/run/last.pt" "$T/other.pt" "$T/relabel.pt" <<'PY'
import sys
import torch
ck = torch.load(sys.argv[1])
torch.save(dict(ck, config=dict(ck["config"], n_layers=ck["config"]["n_layers"] + 1)), sys.argv[2])
torch.save(dict(ck, labels=list(reversed(ck["labels"]))), sys.argv[3])
PY
# soup.py --greedy: every candidate scored; the best first; the soup written is the
# mean of the checkpoints it names
$PY -m mega_kws_tools.training.soup -o "$T/greedy.pt" "$T/run/last.pt" "$T/wa/last.pt" "$T/ftm/last.pt" \
    --greedy "$T/data" >"$T/greedy.log"
$PY - "$T/greedy.log" "$T/greedy.pt" <<'PY'
import re, sys
import torch
log = open(sys.argv[1]).read()
score = {m[0]: float(m[1]) for m in re.findall(r"^soup.py: (\S+\.pt): ([0-9.]+)$", log, re.M)}
assert len(score) == 3, log
kept = re.search(r"^soup.py: greedy soup of \d+: (.*) \(([0-9.]+)\)$", log, re.M)
names = kept[1].split()
assert names[0] == max(score, key=score.get) and float(kept[2]) >= max(score.values()), log
got, parts = torch.load(sys.argv[2])["model"], [torch.load(n)["model"] for n in names]
for k, v in got.items():
    if v.is_floating_point():
        assert torch.allclose(v.double(), sum(p[k].double() for p in parts) / len(parts), rtol=1e-6, atol=1e-7), k
print(f"soup.py --greedy: kept {len(names)} of 3")
PY
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
$PY - "$T/half" <<'PY'
import csv, os, sys
rows = list(csv.DictReader(open(os.path.join(sys.argv[1], "splices.csv"))))
listed = open(os.path.join(sys.argv[1], "validation_list.txt")).read().split()
assert len(rows) == 20 and listed == [r["clip"] for r in rows], (len(rows), listed[:3])
assert all(r["clip"].startswith("halfword/") and os.path.getsize(os.path.join(sys.argv[1], r["clip"])) == 32044
           for r in rows)
assert {r["kept"] for r in rows} == {"onset", "coda"} and len({r["keyword"] for r in rows}) == 10
print("make_splices: 20 half-keyword clips")
PY
# evaluate.py reads splices.csv: per keyword and part kept, the clips called that keyword
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$T/smoke.mega" --data "$T/half" --split validation \
    --json-out "$T/half.json" >/dev/null
$PY - "$T/half.json" <<'PY'
import json, sys
h = json.load(open(sys.argv[1]))["clips"]["halfwords"]
assert len(h) == 20 and all(r["clips"] == 1 for r in h.values()), h
assert all(0 <= r["called_the_keyword"] <= r["called_a_keyword"] <= 1 for r in h.values()), h
PY
# a listed clip missing from disk counts as an error, not as a clip the split lacks
cp -r "$T/half" "$T/half-missing"
rm "$T/half-missing/$(head -n 1 "$T/half/validation_list.txt")"
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$T/smoke.mega" --data "$T/half-missing" \
    --split validation --json-out "$T/half-missing.json" >/dev/null 2>"$T/half-missing.err"
grep -q "1 clip(s) of .* validation list missing" "$T/half-missing.err"
$PY - "$T/half-missing.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["clips"]
assert c["errors"] == 1 and c["clips"] == 19, (c["errors"], c["clips"])
PY
# evaluate.py's _unknown_ words (from the manifest) agree with its confusion matrix's _unknown_ row
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$T/smoke.mega" --data "$T/data" --split training \
    --json-out "$T/train-clips.json" >/dev/null
$PY - "$T/train-clips.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["clips"]
u, words = c["labels"].index("_unknown_"), c["unknown_words"]
row = c["confusion"][u]
kw = [i for i, l in enumerate(c["labels"]) if not l.startswith("_")]
assert words and sum(r["clips"] for r in words.values()) == sum(row), (words, row)
assert round(sum(r["called_a_keyword"] * r["clips"] for r in words.values())) == sum(row[i] for i in kw), (words, row)
assert all((r["most_called"] in c["labels"]) == (r["called_a_keyword"] > 0) for r in words.values()), words
# pooled by kind of word, the same clips and the same rejections
kinds = c["unknown_kinds"]
assert set(kinds) <= {"speech_commands", "near_miss", "other"} and kinds, kinds
assert sum(r["clips"] for r in kinds.values()) == sum(row), (kinds, row)
assert round(sum((1 - r["rejected"]) * r["clips"] for r in kinds.values())) == sum(row[i] for i in kw), kinds
# per noise condition of the manifest: every keyword clip once, the same keywords right
noise = c["per_noise"]
assert noise, "no keyword clips with a manifest row"
assert sum(r["clips"] for r in noise.values()) == sum(sum(c["confusion"][i]) for i in kw), noise
assert round(sum(r["keyword_accuracy"] * r["clips"] for r in noise.values())) == sum(c["confusion"][i][i] for i in kw)
assert round(sum(r["called_unknown"] * r["clips"] for r in noise.values())) == sum(c["confusion"][i][u] for i in kw)
print(f"evaluate.py: {len(words)} _unknown_ words, {sum(row[i] for i in kw)} clips called a keyword")
PY
if $PY -m mega_kws_tools.augment.make_splices --data "$T/data" --split training --out "$T/half" 2>/dev/null; then
  echo "make_splices.py wrote over an existing folder"; exit 1
fi
# hard examples (mine_hard.py): windows of a training-voice recording, mixed into batches
$PY -m mega_kws_tools.data.make_stream --data "$T/data" --split training --minutes 0.5 --out "$T/tr.wav" \
    --labels-out "$T/tr.csv" --seed 4 >/dev/null
$PY -m mega_kws_tools.training.mine_hard --checkpoint "$T/run/last.pt" --stream "$T/tr.wav" --labels "$T/tr.csv" \
    --data "$T/data" -o "$T/hard.npz" --negative-min 0 --positive-max 1.01 >"$T/mine.log"
$PY - "$T/hard.npz" "$T/tr.csv" <<'PY'
import csv, sys
import numpy as np
z = np.load(sys.argv[1])
rows = list(csv.DictReader(open(sys.argv[2])))
kws = [(float(r["onset_s"]), float(r["offset_s"]), r["label"]) for r in rows if r["kind"] == "keyword"]
labels, times = z["labels"].tolist(), z["times_s"]
assert z["audio"].shape == (len(labels), 32000) and z["audio"].dtype == np.int16
neg = [t for l, t in zip(labels, times) if l == "_unknown_"]
pos = [(l, t) for l, t in zip(labels, times) if l != "_unknown_"]
assert neg and pos, f"{len(neg)} negatives, {len(pos)} positives"
# a negative's window (the last second up to t) holds no part of any keyword
assert all(not (on < t + 0.3 and off > t - 1.0) for t in neg for on, off, _ in kws)
# a positive's window holds its whole keyword
assert all(any(k == l and on >= t - 1.0 and off <= t for on, off, k in kws) for l, t in pos)
print(f"mine_hard: {len(neg)} negatives, {len(pos)} positives")
PY
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
$PY - "$T/played.txt" "$T/once5.csv" "$T/once6.csv" <<'PY'
import csv, sys
played = open(sys.argv[1]).read().split()
words = [r["source"] for p in sys.argv[2:] for r in csv.DictReader(open(p)) if r["kind"] in ("keyword", "unknown")]
assert words and sorted(words) == sorted(played), "the played list is not the recordings' words"
assert len(set(words)) == len(words), "a clip was played twice"
print(f"--once: {len(words)} clips, none twice")
PY
if $PY -m mega_kws_tools.data.make_stream --data "$T/data" --split training --minutes 30 --out "$T/once7.wav" \
    --labels-out "$T/once7.csv" --seed 7 --once "$T/played.txt" 2>"$T/once7.log"; then
  echo "make_stream.py --once played clips again"; exit 1
fi
grep -q "used up" "$T/once7.log"
[ ! -e "$T/once7.wav" ] && [ ! -e "$T/once7.csv" ]
# --only-split: more clips of one split's voices, past an earlier run's indices, that merge into it
$PY -m mega_kws_tools.data.make_sc10 --out "$T/valmore" --per-word 1 --unknown 2 --silence 0 --near-miss 2 \
    --only-split validation --first-index 12 --jobs 2 --seed 3 >/dev/null
$PY - "$T/valmore" <<'PY'
import csv, os, sys
rows = list(csv.DictReader(open(os.path.join(sys.argv[1], "manifest.csv"))))
assert len(rows) == 14 and all(r["split"] == "validation" for r in rows), [(r["path"], r["split"]) for r in rows]
assert all(int(r["path"].split("_")[-3].lstrip("n")) >= 12 for r in rows), [r["path"] for r in rows]
PY
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
$PY -c "import sys, torch; k = torch.load(sys.argv[1])['best_key']; assert len(k) == 3 and k[0] in (0, 1), k" \
    "$T/fts/best.pt"
# tune_detection.py pools several recordings: one recording twice tunes as it does once (offsets line up)
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --max-fa-per-hour 50 -o "$T/det1.json" >/dev/null 2>&1
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --stream "$T/va.wav" --labels "$T/va.csv" --max-fa-per-hour 50 -o "$T/det2.json" >/dev/null 2>&1
$PY - "$T/det1.json" "$T/det2.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["tuned_on"]["stream"] == "va.wav + va.wav", b["tuned_on"]
assert a["thresholds"] == b["thresholds"] and a["smoothing_hops"] == b["smoothing_hops"], (a, b)
ta, tb = a["tuned_on"], b["tuned_on"]
assert abs(ta["recall"] - tb["recall"]) < 1e-9 and tb["false_alarms"] == 2 * ta["false_alarms"], (ta, tb)
assert abs(ta["fa_per_hour_keyword_free"] - tb["fa_per_hour_keyword_free"]) < 1e-6, (ta, tb)
print("tune_detection: recordings pooled")
PY
# --curve: one line per limit, recall never falling as the limit grows; at 50 per hour it is
# what -o tuned there (det1.json)
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --curve >"$T/curve.log" 2>&1
$PY - "$T/curve.log" "$T/det1.json" <<'PY'
import json, re, sys
rows = re.findall(r"<= (\d+) per keyword-free hour: recall ([\d.]+)% at threshold ([\d.]+), smoothing (\d)",
                  open(sys.argv[1]).read())
assert [int(r[0]) for r in rows] == [5, 10, 20, 50, 100], rows
recall = [float(r[1]) for r in rows]
assert recall == sorted(recall), recall
det = json.load(open(sys.argv[2]))
assert abs(recall[3] - 100 * det["tuned_on"]["recall"]) < 0.051 and int(rows[3][3]) == det["smoothing_hops"], (rows, det)
print("tune_detection --curve:", recall)
PY
# --false-alarms: the smoke model raises none (the report on false alarms placed by hand:
# tests/python/test_evaluation.py)
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --max-fa-per-hour 50 --false-alarms >"$T/fa.log" 2>&1
grep -q "^0 false alarms, 0 in keyword-free stretches$" "$T/fa.log"
# --holdout-check tunes on one half and scores on the other: on one recording twice, each half is
# that recording (tests/python/test_evaluation.py), so the shared threshold is det1's and scores as det1 did
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --stream "$T/va.wav" --labels "$T/va.csv" --max-fa-per-hour 50 --holdout-check >"$T/holdout.txt" 2>&1
$PY - "$T/det1.json" "$T/holdout.txt" <<'PY'
import json, re, sys
a = json.load(open(sys.argv[1]))
rows = [l for l in open(sys.argv[2]) if l.startswith("| first half") or l.startswith("| second half")]
assert len(rows) == 2, open(sys.argv[2]).read()
for row in rows:
    m = re.match(r"\| \w+ half \| ([0-9.]+), smoothing (\d); ([0-9.]+)%, ([0-9.]+) \| .*; ([0-9.]+)%, ([0-9.]+) \|$", row.strip())
    assert m, row
    assert abs(float(m[1]) - a["thresholds"][0]) < 1e-9 and int(m[2]) == a["smoothing_hops"], (row, a)
    t = a["tuned_on"]
    assert abs(float(m[3]) - round(100 * t["recall"], 1)) < 0.051, (row, t)
    assert abs(float(m[4]) - round(t["fa_per_hour_keyword_free"], 1)) < 0.051, (row, t)
print("tune_detection: holdout check")
PY
# --preset *-mel (log-mel front end): a run trains, resumes, converts (schema 4), passes the runtime's
# self-test and classifies as PyTorch does
MEL="--data $T/data --classes kws12 --out $T/mel --preset smoke-mel --batch 16 --lr 1e-2 --warmup 5
     --max-per-class 2 --eval-every 20 --threads 1 --warp-prob 0.5 --mask-prob 0.5"
$PY -m mega_kws_tools.training.train $MEL --steps 60 >"$T/mel.log"
grep -q "^log-mel: 16 bands, bias set from" "$T/mel.log"
$PY - "$T/mel/losses.txt" <<'PY'
import sys
loss = [float(l.split()[1]) for l in open(sys.argv[1])]
first, last = sum(loss[:10]) / 10, sum(loss[-10:]) / 10
print(f"log-mel loss {first:.3f} -> {last:.3f}")
assert len(loss) == 60 and last < 0.9 * first, "log-mel: loss did not decrease"
PY
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
$PY - "$T/ls0.0/losses.txt" "$T/ls0.5/losses.txt" <<'PY'
import sys
plain, smoothed = (float(open(p).readline().split()[1]) for p in sys.argv[1:3])
assert smoothed > plain + 0.05, f"--label-smoothing 0.5: first loss {smoothed}, without {plain}"
print(f"--label-smoothing: first loss {plain:.3f} -> {smoothed:.3f} with 0.5")
PY
echo "training smoke test passed"
