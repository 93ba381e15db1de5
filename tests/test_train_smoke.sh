#!/bin/bash
# Training smoke test: a tiny synthetic dataset, a few dozen steps of the small
# preset on it; the loss must go down, and the checkpoint must convert, load
# and pass its self-test in the runtime.
#   test_train_smoke.sh PATH/TO/keyword_spotter REPO_ROOT
set -eu
KS=$1
ROOT=$2
PY=/usr/bin/python3
for tool in espeak-ng flite sox; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
T=$(mktemp -d /tmp/ks_train.XXXXXX)
trap 'rm -rf "$T"' EXIT
$PY "$ROOT/tools/data/make_sc10.py" --out "$T/data" --per-word 4 --unknown 12 --silence 8 --jobs 2 --seed 3 >/dev/null
# overfit a handful of clips: the loss must drop fast if gradients flow everywhere
$PY "$ROOT/tools/train/train.py" --data "$T/data" --classes kws12 --out "$T/run" --preset smoke --steps 100 \
    --batch 16 --lr 1e-2 --warmup 5 --max-per-class 2 --eval-every 100 --threads 1 >"$T/train.log"
# mean loss of the first 10 steps vs the last 10
$PY - "$T/run/losses.txt" <<'PY'
import sys
loss = [float(l.split()[1]) for l in open(sys.argv[1])]
first, last = sum(loss[:10]) / 10, sum(loss[-10:]) / 10
print(f"loss {first:.3f} -> {last:.3f}")
assert len(loss) == 100 and last < 0.9 * first, "loss did not decrease"
PY
$PY "$ROOT/tools/convert/mega_convert.py" "$T/run/last.pt" -o "$T/smoke.mega" >"$T/convert.log"
grep -q "_silence_" "$T/convert.log"
"$KS" selftest -m "$T/smoke.mega"
"$KS" classify -m "$T/smoke.mega" --json "$ROOT/samples/yes.wav" | grep -q '"label"'
# resume continues from the checkpoint
$PY "$ROOT/tools/train/train.py" --data "$T/data" --classes kws12 --out "$T/run" --preset smoke --steps 110 \
    --batch 16 --warmup 5 --max-per-class 2 --eval-every 110 --threads 1 --resume >"$T/resume.log"
grep -q "resumed at step 100" "$T/resume.log"
echo "training smoke test passed"
