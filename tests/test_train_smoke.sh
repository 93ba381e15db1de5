#!/bin/bash
# Training smoke test: a tiny synthetic dataset, a few dozen steps of the small
# preset on it; the loss must go down, and the checkpoint must convert, load
# and pass its self-test in the runtime.
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
# a worker whose drawing fails hands its traceback to the trainer: the batches before it arrive, then
# next() raises with the worker's own error in the message
timeout 60 $PY - <<'PY'
import numpy as np
import torch
from mega_kws_tools.training.worker import BatchWorker

def draw(rng):
    v = rng.integers(1000)
    if draw.calls == 2:
        raise ValueError(f"clip {v} is broken")
    draw.calls += 1
    return torch.full((2, 3), float(v)), torch.tensor([0, 1])
draw.calls = 0

rng = np.random.default_rng(5)
worker = BatchWorker(2, draw)
worker.start(rng, 5)
got = []
try:
    for _ in range(5):
        got.append(float(worker.next(rng)[0][0, 0]))
    raise AssertionError("no error after the worker failed")
except RuntimeError as e:
    assert "the batch worker failed" in str(e) and "ValueError: clip " in str(e) and "Traceback" in str(e), e
finally:
    worker.close()
assert len(got) == 2, got
# the batches that arrived are the ones drawing in this process gives
check = np.random.default_rng(5)
assert got == [float(check.integers(1000)) for _ in got], got

# a worker killed halfway through sending a batch (4 MB through a 64 KB pipe) leaves half a batch
# behind; reading it must end with the worker's death, not wait for the rest (timeout 60 above)
import os, signal, time
def big(rng):
    return torch.full((64, 16000), float(rng.integers(1000))), torch.zeros(64, dtype=torch.long)
worker = BatchWorker(2, big)
worker.start(rng, 10)
time.sleep(1.0)
os.kill(worker.proc.pid, signal.SIGKILL)
try:
    worker.next(rng)
    raise AssertionError("a batch from a worker killed while sending it")
except RuntimeError as e:
    assert "died, exit code -9" in str(e), e
finally:
    worker.close()
PY
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
if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/pfbad" $AUG --prefetch -1 \
    >"$T/pfbad.log" 2>&1; then echo "--prefetch -1 was accepted"; exit 1; fi
grep -q "prefetch -1: must be 0 (off) or more batches" "$T/pfbad.log"
# --consistency: each drawn clip augmented twice and the two views' predictions pulled together;
# it resumes as exactly, and the divergence is 0 for equal predictions, ln 2 for sure and different
# ones, symmetric, and never negative
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
if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/codd" $AUG --batch 15 \
    --consistency 1 >"$T/codd.log" 2>&1; then echo "--consistency with an odd batch was accepted"; exit 1; fi
grep -q "consistency needs an even --batch (two views of each clip), not 15" "$T/codd.log"
$PY - <<'PY'
import math
import torch
from mega_kws_tools.training.losses import js_divergence, keyword_js_divergence
from mega_kws_tools.training.sampling import sampling_probabilities
torch.manual_seed(0)
a, b = torch.randn(64, 12) * 3, torch.randn(64, 12) * 3
assert abs(float(js_divergence(a, a))) < 1e-6
sure = torch.full((2, 3), -1e4)
sure[0, 0] = sure[1, 1] = 1e4
assert abs(float(js_divergence(sure[:1], sure[1:])) - math.log(2)) < 1e-6
assert abs(float(js_divergence(a, b) - js_divergence(b, a))) < 1e-6
assert 0 < float(js_divergence(a, b)) < math.log(2)
# --consistency-scope keywords: keyword clips only, keyword columns only (renormalized)
keywords = torch.tensor([True] * 10 + [False] * 2)
y = torch.randint(0, 12, (64,))
y[:2] = torch.tensor([3, 10])
rows = keywords[y]
kjs = keyword_js_divergence(a, b, y, keywords)
assert abs(float(kjs - js_divergence(a[rows][:, :10], b[rows][:, :10]))) < 1e-6
assert float(kjs) > 0
shifted = a.clone()
shifted[:, 10:] += 7.0  # only _unknown_ and _silence_ differ: nothing to pull together
shifted[:, :10] += 2.0  # a shift of all keyword logits leaves their renormalized softmax alone
assert abs(float(keyword_js_divergence(a, shifted, y, keywords))) < 1e-5
assert float(keyword_js_divergence(a, b, torch.tensor([10, 11] * 32), keywords)) == 0.0
# --class-boost: the boosted class is drawn F times as often, relative to the others
class Fake:
    labels = ["go", "no", "_unknown_"]
    y = torch.tensor([0] * 5 + [1] * 20 + [2] * 50).numpy()
    source = y * 0
plain = sampling_probabilities(Fake, 0.5)
boosted = sampling_probabilities(Fake, 0.5, boost={"go": 2.0})
share = lambda p: [float(p[Fake.y == c].sum()) for c in range(3)]
(g0, n0, u0), (g1, n1, u1) = share(plain), share(boosted)
assert abs(g0 - 0.25) < 1e-9 and abs(n0 - 0.25) < 1e-9 and abs(u0 - 0.5) < 1e-9
assert abs(g1 / n1 - 2.0) < 1e-9 and abs(u1 / n1 - 2.0) < 1e-9 and abs(g1 + n1 + u1 - 1.0) < 1e-9
PY
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/ckw" $AUG --consistency 4 \
    --consistency-scope keywords --stop-at 5 >/dev/null
if [ "$(head -n 5 "$T/cwhole/losses.txt")" = "$(cat "$T/ckw/losses.txt")" ]; then echo "--consistency-scope keywords changed no loss"; exit 1; fi
$PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/boost" $AUG --class-boost go=3 --stop-at 5 \
    >/dev/null
if [ "$(head -n 5 "$T/whole/losses.txt")" = "$(cat "$T/boost/losses.txt")" ]; then echo "--class-boost changed no loss"; exit 1; fi
if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/bad" $AUG --consistency-scope keywords \
    >"$T/bad.log" 2>&1; then echo "--consistency-scope without --consistency was accepted"; exit 1; fi
grep -q -- "--consistency-scope keywords needs --consistency W" "$T/bad.log"
for bad in go=0 go=x zebra=2; do
  if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/bad" $AUG --class-boost $bad \
      >"$T/bad.log" 2>&1; then echo "--class-boost $bad was accepted"; exit 1; fi
  grep -q -- "--class-boost" "$T/bad.log"
done
grep -q "zebra: not a class of this run" "$T/bad.log"
# --mixup-prob: a mixed clip is lam of itself and 1 - lam of its partner, lam in [0.5, 1], unmixed ones
# lam 1; the loss is the same mix of the two labels' cross-entropies; the run resumes exactly (also
# with --prefetch), and the mix reaches the loss
$PY - <<'PY'
import numpy as np
import torch
import torch.nn.functional as F
from mega_kws_tools.training.losses import mixup, mixup_loss

x, y = torch.eye(64), torch.arange(64) % 12  # clip i is the unit vector i: a mix shows its two parts
same, py, lam = mixup(x, y, np.random.default_rng(0), 0.0, 0.4)
assert torch.equal(same, x) and torch.all(lam == 1), "probability 0 mixed clips"
mixed, py, lam = mixup(x, y, np.random.default_rng(1), 1.0, 0.4)
assert torch.all((lam >= 0.5) & (lam <= 1)) and (lam < 0.999).sum() > 40, lam
partners = set()
for i in range(64):  # row i: lam of clip i, 1 - lam of one partner j, whose label is py[i]
    rest = mixed[i].clone()
    rest[i] -= lam[i]
    j = int(torch.argmax(rest)) if rest.abs().sum() > 1e-6 else i
    partners.add(j)
    assert torch.allclose(mixed[i], lam[i] * x[i] + (1 - lam[i]) * x[j], atol=1e-6) and py[i] == y[j], i
assert len(partners) == 64, "the pairing is not a permutation"
half, _, lam_half = mixup(x, y, np.random.default_rng(2), 0.5, 0.4)
share = float((lam_half < 1).float().mean())
assert 0.25 < share < 0.75, share
logits = torch.randn(64, 12)
ce = F.cross_entropy(logits, y, reduction="none")
assert torch.allclose(mixup_loss(logits, y, py, torch.ones(64), 0.0), ce.mean())
both = 0.5 * ce + 0.5 * F.cross_entropy(logits, py, reduction="none")
assert torch.allclose(mixup_loss(logits, y, py, torch.full((64,), 0.5), 0.0), both.mean())
assert mixup_loss(logits, y, py, torch.ones(64), 0.1) != mixup_loss(logits, y, py, torch.ones(64), 0.0)
print("mixup ok")
PY
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
augmentation_run m "--mixup-prob 0.5 --mixup-alpha 0.4" "^mixup: 0.5 of the clips"
for bad in "--mixup-prob 1.5" "--mixup-prob 0.5 --mixup-alpha 0" "--mixup-prob 0.5 --consistency 4"; do
  if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/bad" $AUG $bad \
      >"$T/bad.log" 2>&1; then echo "$bad was accepted"; exit 1; fi
  grep -q -- "--mixup-" "$T/bad.log"
done
# --babble-prob: babble is the sum of 3-7 rolled _unknown_ clips at -3..12 dB over the second; the run
# resumes exactly (also with --prefetch), the babble reaches the loss, and it needs --noise-prob
$PY - <<'PY'
import numpy as np
from mega_kws_tools.augment.noise import add_babble, BABBLE_WORDS, BABBLE_SNR_DB

class Fake:  # clip c is a unit impulse at sample 100 * c: the babble shows which clips it holds
    audio = np.zeros((50, 16000), np.int16)
    for c in range(50):
        audio[c, 100 * c] = 16384
ids = np.arange(10, 50)
for seed in range(20):
    target = np.full(16000, 0.01, np.float32)
    add_babble(target, Fake, ids, np.random.default_rng(seed))
    noise = target - np.float32(0.01)
    hits = np.nonzero(np.abs(noise) > 1e-7)[0]
    assert BABBLE_WORDS[0] <= len(hits) <= BABBLE_WORDS[1], (seed, len(hits))  # rolls may coincide: rarely
    snr = 20 * np.log10(0.01 / np.sqrt(np.mean(noise.astype(np.float64) ** 2)))
    assert BABBLE_SNR_DB[0] - 0.01 <= snr <= BABBLE_SNR_DB[1] + 0.01, (seed, snr)
    peaks = np.sort(np.abs(noise[hits]))
    assert peaks[0] >= peaks[-1] * 10 ** (-6 / 20) - 1e-6, peaks  # each word within 6 dB of the others
print("babble ok")
PY
augmentation_run b "--babble-prob 0.8" "^babble: 0.8 of the noise"
if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/bad" ${AUG/--noise-prob 0.5/} \
    --babble-prob 0.5 >"$T/bad.log" 2>&1; then echo "--babble-prob without --noise-prob was accepted"; exit 1; fi
grep -q -- "--babble-prob needs --noise-prob" "$T/bad.log"
# --voice-adversary: the voice classes are the voice groups (one recorded speaker's voices together), all
# real speakers one class, no voice for _silence_; the encoder gets the adversary's gradient reversed and
# scaled; the run resumes exactly and the adversary reaches the loss; bad values and combinations refused
$PY - "$T/data" <<'PY'
import sys
import numpy as np
import torch
import torch.nn.functional as F
from mega_kws_tools.data.dataset import Dataset, voice_targets
from mega_kws_tools.training.adversary import adversary_scale, VoiceAdversary

class Fake:  # voice_targets reads the labels, the label and the voice of each clip
    labels = Dataset(sys.argv[1], "kws12", "training").labels
    voice = np.array(["flite:kal", "flite:kal16", "festival:kal_diphone", "espeak-ng:en-us", "speaker:0a1b2c3d",
                      "speaker:99aa88bb", "", "espeak-ng:en-us"], dtype=object)
    y = np.array([0, 1, 2, 3, 4, 5, 10, 10])  # label 10: _silence_
assert Fake.labels[10] == "_silence_", Fake.labels
names, cls = voice_targets(Fake)
assert names == ["espeak-ng:en-us", "kal", "real"], names
assert cls.tolist() == [1, 1, 1, 0, 2, 2, -1, -1], cls
ds = Dataset(sys.argv[1], "kws12", "training")
names, cls = voice_targets(ds)
silence = ds.labels.index("_silence_")
assert (cls[ds.y == silence] == -1).all() and (cls[ds.y != silence] >= 0).all() and len(names) > 1, names
assert [adversary_scale(0.5, 4, s) for s in range(6)] == [0, 0.125, 0.25, 0.375, 0.5, 0.5]
assert adversary_scale(0.5, 0, 0) == 0.5
# the reversal: the adversary's own weights get the plain gradient, the embedding minus scale times it
torch.manual_seed(0)
adv = VoiceAdversary(8, ["a", "b", "c"])
emb, target = torch.randn(5, 8, requires_grad=True), torch.tensor([0, 1, 2, 1, 0])
F.cross_entropy(adv(emb, 0.3), target).backward()
reversed_grad, weight_grad = emb.grad.clone(), adv.net[0].weight.grad.clone()
emb.grad = None
adv.zero_grad()
F.cross_entropy(adv.net(emb), target).backward()
assert torch.allclose(reversed_grad, -0.3 * emb.grad), "the embedding's gradient is not reversed and scaled"
assert torch.allclose(weight_grad, adv.net[0].weight.grad), "the adversary's own gradient changed"
# voice_probe.py's linear probe reads a class that the embedding holds, and not one it does not
from mega_kws_tools.training.voice_probe import probe_accuracy
g = torch.Generator().manual_seed(1)
target = np.arange(400) % 4
held = torch.randn(400, 6, generator=g) + 5.0 * F.one_hot(torch.from_numpy(target), 6).float()
assert probe_accuracy(held, target) > 0.95, probe_accuracy(held, target)
assert probe_accuracy(torch.randn(400, 6, generator=g), target) < 0.45
print("voice adversary ok")
PY
augmentation_run va "--voice-adversary 0.5 --voice-adversary-ramp 5 --steps 25" "^voice adversary: weight 0.5 (reached at step 5), [0-9]* voice classes"
grep -q "voice adversary 0\.[0-9]* right" "$T/va.log" || { echo "no voice adversary accuracy logged"; exit 1; }
"$PY" -m mega_kws_tools.training.voice_probe --data "$T/data" "$T/vawhole/last.pt" "$T/whole/last.pt" --clips 40 \
    >"$T/probe.log"
grep -q "^$T/vawhole/last.pt: voice 0\.[0-9]*, keyword 0\.[0-9]*$" "$T/probe.log"
# voice_norm_check.py: alpha 0 is the model as trained, alpha 1 normalizes by the clips' own statistics
# (for the first BatchNorm: the mean and variance of its input over them), and the model is left as it came
$PY - "$T/data" "$T/whole/last.pt" <<'PY'
import sys
import numpy as np
import torch
from mega_kws_tools import model as mt
from mega_kws_tools.augment.batch import make_batch
from mega_kws_tools.data.dataset import Dataset
from mega_kws_tools.training.voice_norm_check import adapted_logits, batchnorms
model = mt.model_from_config_checkpoint(torch.load(sys.argv[2], map_location="cpu")).eval()
ds = Dataset(sys.argv[1], "kws12", "training")
idx = np.arange(min(len(ds), 100))  # one batch of adapted_logits: its statistics are those of all these clips
x, _ = make_batch(ds, idx, np.random.default_rng(0), train=False)
norms = batchnorms(model)
trained = [(m.running_mean.clone(), m.running_var.clone()) for m in norms]
with torch.no_grad():
    plain = model.window_logits(x)
assert torch.equal(adapted_logits(model, x, norms, 0.0), plain)
assert not torch.allclose(adapted_logits(model, x, norms, 1.0), plain), "the clips' own statistics changed nothing"
assert all(torch.equal(m.running_mean, a) and torch.equal(m.running_var, b) and not m.training
           for m, (a, b) in zip(norms, trained)), "the model was not left as it came"
first, seen = norms[0], []
hook = first.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].detach()))
with torch.no_grad():
    model.window_logits(x)
hook.remove()
inp = seen[0]  # (clips, channels, tokens)
adapted = adapted_logits(model, x, [first], 1.0)
first.running_mean.copy_(inp.mean(dim=(0, 2)))
first.running_var.copy_(inp.transpose(0, 1).reshape(inp.shape[1], -1).var(dim=1, unbiased=True))
with torch.no_grad():
    by_hand = model.window_logits(x)
assert torch.allclose(adapted, by_hand, atol=1e-4), (adapted - by_hand).abs().max()
from mega_kws_tools.training.voice_norm_check import groups_of

class Fake:  # the real speakers one group, or one each; a voice its own; no voice left alone
    voice = np.array(["espeak-ng:en-us", "speaker:ab12cd34", "speaker:0f0f0f0f", ""], dtype=object)
assert list(groups_of(Fake)) == ["espeak-ng:en-us", "real:", "real:", ""], groups_of(Fake)
assert list(groups_of(Fake, "speaker")) == ["espeak-ng:en-us", "real:ab12cd34", "real:0f0f0f0f", ""]
print("voice_norm_check: the clips' own statistics, the model left as it came")
PY
"$PY" -m mega_kws_tools.training.voice_norm_check --data "$T/data" --split training --alphas 0,1 "$T/whole/last.pt" \
    >"$T/norm.log"
[ "$(grep -c "^  voices: keywords 0\.[0-9]*, -> _unknown_ 0\.[0-9]*, _unknown_ rejected" "$T/norm.log")" = 2 ]
if "$PY" -m mega_kws_tools.training.voice_norm_check --data "$T/data" --alphas 2 "$T/whole/last.pt" >"$T/bad.log" 2>&1; then
  echo "voice_norm_check.py --alphas 2 was accepted"; exit 1
fi
grep -q -- "--alphas 2: each between 0 and 1" "$T/bad.log"
if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/vasplit" $AUG --resume \
    >"$T/bad.log" 2>&1; then echo "a voice-adversary run resumed without the flag"; exit 1; fi
grep -q "was made with --voice-adversary" "$T/bad.log"
for bad in "--voice-adversary -1" "--voice-adversary 0.5 --voice-adversary-ramp -1" \
    "--voice-adversary 0.5 --mixup-prob 0.5"; do
  if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/bad" $AUG $bad \
      >"$T/bad.log" 2>&1; then echo "$bad was accepted"; exit 1; fi
  grep -q -- "--voice-adversary" "$T/bad.log"
done
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
# --noise-prob: the mixed-in noise or babble sits 0-20 dB below the clip
$PY - "$T/data" <<'PY'
import sys
import numpy as np
from mega_kws_tools.augment.noise import add_noise, noise_pools
from mega_kws_tools.data.dataset import Dataset
ds = Dataset(sys.argv[1], "kws12", "training", 0, 1)
rng = np.random.default_rng(0)
pools = noise_pools(ds)
clean = ds.audio[np.nonzero(ds.y < 10)[0][0]].astype(np.float32) / 32768.0
snrs = []
for _ in range(60):
    x = clean.copy()
    add_noise(x, ds, pools, rng)
    p_noise = float(np.mean((x - clean) ** 2))
    if p_noise > 0:
        snrs.append(10 * np.log10(float(np.mean(clean ** 2)) / p_noise))
assert len(snrs) > 30, f"noise added to only {len(snrs)} of 60 clips"
assert -0.01 <= min(snrs) and max(snrs) <= 20.01, f"SNR {min(snrs):.1f} .. {max(snrs):.1f} dB"
print(f"add_noise: SNR {min(snrs):.1f} .. {max(snrs):.1f} dB")
PY
# --patch-norm running_mean from a checkpoint without it: the running mean starts at the
# training inputs' mean log power and the bias absorbs it, so while the mean stays at its
# start (decay ~0) the model computes what the checkpoint did; it trains, resumes, and
# evaluate.py --checkpoint measures it
$PY - "$T/data" "$T/run/last.pt" <<'PY'
import dataclasses, sys
import numpy as np
import torch
from mega_kws_tools import model as mt
from mega_kws_tools.augment.batch import make_batch
from mega_kws_tools.data.dataset import Dataset
from mega_kws_tools.training.frontend_init import init_running_mean
ck = torch.load(sys.argv[2], map_location="cpu")
plain = mt.model_from_config_checkpoint(ck).eval()
normed = mt.MegaKWS(dataclasses.replace(plain.cfg, patch_norm="running_mean"))
normed.load_state_dict(dict(ck["model"], **{"embed_tokens.norm_init": torch.zeros(plain.cfg.embed_dim)}))
ds = Dataset(sys.argv[1], "kws12", "training", 0, 1)
init_running_mean(normed, ds, np.random.default_rng(0), keep_function=True)
x, _ = make_batch(ds, np.arange(8), np.random.default_rng(1), train=False)
normed.eval()
normed.embed_tokens.norm_decay = 1e-12
with torch.no_grad():
    a, b = plain.window_logits(x), normed.window_logits(x)
torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
normed.embed_tokens.norm_decay = 0.01
with torch.no_grad():
    assert float((normed.window_logits(x) - a).abs().max()) > 1e-3, "the running mean changed nothing"
PY
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
# evaluate.py's trade-off: keyword accuracy at each rejection level, read off a bias on
# the _unknown_ logit; a level no bias reaches is None; the runtime's logits give the
# checkpoint's figures
$PY - "$T/pt.json" "$T/ks.json" <<'PY'
import json, sys
from mega_kws_tools.evaluation import evaluate
labels = ["yes", "no", "_silence_", "_unknown_"]
YES, NO, SIL, UNK = range(4)
rows = [(YES, [2.0, 0, 0, 0.5]),   # right until the bias passes 1.5
        (YES, [1.0, 0, 0, 0.8]),   # right until 0.2
        (NO, [0, 3.0, 0, 0]),      # right until 3
        (NO, [0, 0, 0, 1.0]),      # called _unknown_ from -1
        (UNK, [0, 1.0, 0, 0]),     # rejected from 1
        (UNK, [0.5, 0, 0, 0]),     # from 0.5
        (UNK, [20.0, 0, 0, 0]),    # never (the bias stops at 8)
        (SIL, [0, 0, 1.0, 0])]     # _silence_, then _unknown_: always rejected
t = evaluate.rejection_tradeoff([z for _, z in rows], [y for y, _ in rows], labels)
assert evaluate.rejection_tradeoff([[1.0, 0, 0]], [0], labels[:3]) == {}  # no _unknown_: nothing to bias
assert list(t) == ["0.70", "0.80", "0.90", "0.95"], t
assert t["0.80"] is None and t["0.90"] is None and t["0.95"] is None, t
# 3 of 4 rejected (e, f, h) needs a bias above 1; below 1.5 a and c are still right, b and d lost
assert t["0.70"]["keyword_accuracy"] == 0.5 and t["0.70"]["rejected"] == 0.75 and 1.0 < t["0.70"]["unknown_bias"] < 1.5, t
a, b = (json.load(open(p))["clips"]["keywords_at_rejection"] for p in sys.argv[1:3])
assert a.keys() == b.keys() and all((a[k] is None) == (b[k] is None) for k in a), (a, b)
print("evaluate.py: keyword accuracy at each rejection level")
PY
# --init from a .mega model file (mega_unpack.py): the converted weights are loaded
FTM="--data $T/data --classes kws12 --preset smoke --steps 10 --batch 16 --lr 1e-3 --warmup 1 --max-per-class 2
     --eval-every 10 --threads 1"
$PY -m mega_kws_tools.training.train $FTM --init "$T/smoke.mega" --out "$T/ftm" >"$T/ftm.log"
grep -q "initialized from .*smoke.mega (its step None, validation accuracy unknown)" "$T/ftm.log"
$PY -m mega_kws_tools.training.train $FTM --out "$T/ftm0" >/dev/null
expect_weights_loaded ftm ftm0 "--init .mega"
# --weight-average: WeightAverage follows its formula and applied() puts the model's own
# weights back; a run validates and keeps (best.pt) the average, and last.pt carries it
# across --resume
$PY - <<'PY'
import torch
from mega_kws_tools.training.average import WeightAverage
m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
wa = WeightAverage(m, 0.5)
expect = m[0].weight.detach().clone()
for n, c in enumerate([1.0, 2.0, 3.0, 4.0], start=1):
    with torch.no_grad():
        m[0].weight.fill_(c)
    m[1].num_batches_tracked.fill_(n)
    wa.update(m)
    d = min(0.5, (1 + n) / (10 + n))
    expect = d * expect + (1 - d) * c
assert torch.allclose(wa.avg["0.weight"], expect), (wa.avg["0.weight"], expect)
assert int(wa.avg["1.num_batches_tracked"]) == 4
with wa.applied(m):
    assert torch.allclose(m[0].weight, expect)
assert torch.all(m[0].weight == 4.0), "applied() did not restore the model's weights"
print("WeightAverage: formula and restore")
PY
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
if $PY -m mega_kws_tools.training.train --data "$T/data" --out "$T/wa3" --preset smoke --steps 1 \
    --weight-average 1 2>"$T/wa3.err"; then
  echo "--weight-average 1 accepted"; exit 1
fi
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
grep -q "must be between 0 and 1" "$T/wa3.err"
# --speed-prob: change_speed keeps the length and the word's centre, and scales
# its duration and pitch by the factor
$PY - <<'PY'
import numpy as np
from mega_kws_tools.augment.speaker import change_speed, SPEED_RANGE
x = np.zeros(16000, np.float32)
x[7000:9000] = np.sin(np.arange(2000) * 2 * np.pi * 440 / 16000)
for f in SPEED_RANGE + (1.0,):
    y = change_speed(x, f)
    on = np.nonzero(np.abs(y) > 1e-3)[0]
    dur, mid = on[-1] - on[0] + 1, (on[-1] + on[0]) / 2
    pitch = np.argmax(np.abs(np.fft.rfft(y))) * 16000 / len(y)
    assert len(y) == 16000 and y.dtype == np.float32
    assert abs(dur - 2000 / f) < 12 and abs(mid - 8000) < 8, (f, dur, mid)
    assert abs(pitch - 440 * f) < 2, (f, pitch)
print("change_speed: duration and pitch scale with the factor")
PY
# --color-prob: recolor moves the formants of a vowel by the factor and keeps its
# pitch, timing and RMS; a tilt moves energy between low and high bands; 1, 0 is
# the identity
$PY - <<'PY'
import numpy as np
from mega_kws_tools.augment.speaker import FORMANT_RANGE, recolor, TILT_RANGE
sr, f0 = 16000, 120
hz = np.fft.rfftfreq(sr, 1 / sr)
pulses = np.zeros(sr)
pulses[(np.arange(0, sr, sr / f0)).astype(int)] = 1
formants = (700, 1200, 2600)
x = np.fft.irfft(np.fft.rfft(pulses) * sum(1 / (1 + ((hz - f) / 80) ** 2) for f in formants), sr).astype(np.float32)
x *= 0.3 / np.abs(x).max()
x[:2000] = x[-2000:] = 0
def band_db(v, lo, hi):
    p = np.abs(np.fft.rfft(v)) ** 2
    return 10 * np.log10(p[(hz >= lo) & (hz < hi)].sum() + 1e-12)
def pitch(v):
    ac = np.correlate(v[4000:12000], v[4000:12000], "full")[7999:]
    return sr / (np.argmax(ac[40:400]) + 40)
y = recolor(x, 1.0, 0.0)
assert y.dtype == np.float32 and len(y) == sr and np.abs(y - x).max() < 1e-5, "recolor(1, 0) is not the identity"
for a in FORMANT_RANGE:
    y = recolor(x, a, 0.0)
    assert len(y) == sr and abs(np.sqrt(np.mean(y * y)) / np.sqrt(np.mean(x * x)) - 1) < 1e-3
    assert abs(pitch(y) - pitch(x)) < 1, (a, pitch(x), pitch(y))
    assert np.abs(y[:1500]).max() < 1e-3 * np.abs(y).max(), "recolor smeared sound into the silence"
    for f in formants:
        # the energy near f now sits near a * f: the band around a * f gains, and
        # against the band around f by far more
        at_new = band_db(y, a * f - 60, a * f + 60) - band_db(x, a * f - 60, a * f + 60)
        at_old = band_db(y, f - 60, f + 60) - band_db(x, f - 60, f + 60)
        assert at_new > 5 and at_new - at_old > 10, (a, f, at_new, at_old)
def f1_to_f3_db(v):
    return band_db(v, 2540, 2660) - band_db(v, 640, 760)
for t in TILT_RANGE:
    y = recolor(x, 1.0, t)
    change = f1_to_f3_db(y) - f1_to_f3_db(x)
    assert abs(change - t * np.log2(2600 / 700)) < 1, (t, change)
print("recolor: formants move by the factor, pitch and level stay; tilt as asked")
PY
# --vowel-prob: a formant track moves each stretch of a clip by its own factor; a
# constant track is the single factor; the track stays in range and varies
$PY - <<'PY'
import numpy as np
from mega_kws_tools.augment.speaker import color_frames, FORMANT_RANGE, formant_track, recolor
sr, f0 = 16000, 120
hz = np.fft.rfftfreq(8000, 1 / sr)
pulses = np.zeros(sr)
pulses[(np.arange(0, sr, sr / f0)).astype(int)] = 1
hz_full = np.fft.rfftfreq(sr, 1 / sr)
x = np.fft.irfft(np.fft.rfft(pulses) * (1 / (1 + ((hz_full - 1200) / 80) ** 2)), sr).astype(np.float32)
x *= 0.3 / np.abs(x).max()
count = color_frames(sr)
assert np.array_equal(recolor(x, np.full(count, 1.1), 1.0), recolor(x, 1.1, 1.0)), "a constant track is not the factor"
track = np.where(np.arange(count) < count // 2, 0.9, 1.15)  # the first half down, the second up
y = recolor(x, track, 0.0)
def same_shape(a, b):  # equal up to a gain (recolor keeps the whole clip's RMS)
    g = np.dot(a, b) / np.dot(b, b)
    return np.abs(a - g * b).max() < 1e-3 * np.abs(a).max()
# frames 8 ms apart, each 32 ms: samples before 7000 come from frames of the
# first half only, samples after 9000 from the second half's
assert same_shape(y[1000:7000], recolor(x, 0.9, 0.0)[1000:7000]), "the first half is not moved by 0.9"
assert same_shape(y[9000:15000], recolor(x, 1.15, 0.0)[9000:15000]), "the second half is not moved by 1.15"
assert not same_shape(y[9000:15000], recolor(x, 0.9, 0.0)[9000:15000])
def peak(v):  # the formant: where the power, summed over one harmonic spacing, is highest
    p = np.abs(np.fft.rfft(v * np.hanning(len(v)), 8000)) ** 2
    band = (hz > 900) & (hz < 1500)
    return hz[band][np.argmax(np.convolve(p[band], np.ones(61), "same"))]
first, second = peak(y[1000:7000]), peak(y[9000:15000])
assert second - first > 200, (first, second)
rng = np.random.default_rng(3)
for _ in range(20):
    t = formant_track(sr, rng)
    assert len(t) == count and t.min() >= FORMANT_RANGE[0] - 1e-9 and t.max() <= FORMANT_RANGE[1] + 1e-9
    assert t.max() / t.min() > 1.02, "the track does not move"
print(f"recolor with a formant track: each half moved by its factor (formant near {first:.0f} and {second:.0f} Hz)")
PY
# --pitch-prob: shift_pitch moves the pitch of a vowel by the factor and keeps its
# formants (which plain speed change moves), timing and level
$PY - <<'PY'
import numpy as np
from mega_kws_tools.augment.speaker import change_speed, PITCH_RANGE, shift_pitch
sr, f0 = 16000, 120
hz = np.fft.rfftfreq(sr, 1 / sr)
pulses = np.zeros(sr)
pulses[(np.arange(0, sr, sr / f0)).astype(int)] = 1
x = np.fft.irfft(np.fft.rfft(pulses) * sum(1 / (1 + ((hz - f) / 80) ** 2) for f in (700, 1200, 2600)), sr).astype(np.float32)
x *= 0.3 / np.abs(x).max()
x[:2000] = x[-2000:] = 0
def pitch(v):
    ac = np.correlate(v[5000:11000], v[5000:11000], "full")[5999:]
    return sr / (np.argmax(ac[25:400]) + 25)
def envelope_db(v):  # mean power in 200 Hz bands centred 200-3900 Hz, middle of the clip
    p = np.abs(np.fft.rfft(v[5000:11000] * np.hanning(6000))) ** 2
    f = np.fft.rfftfreq(6000, 1 / sr)
    return np.array([10 * np.log10(p[(f >= c - 100) & (f < c + 100)].mean() + 1e-12) for c in range(200, 4000, 100)])
y = shift_pitch(x, 1.0)
assert y.dtype == np.float32 and len(y) == sr and np.abs(y - x).max() < 1e-4, "shift_pitch(1) is not the identity"
for a in PITCH_RANGE + (1.3,):
    y = shift_pitch(x, a)
    assert len(y) == sr and abs(np.sqrt(np.mean(y * y)) / np.sqrt(np.mean(x * x)) - 1) < 1e-3
    assert abs(pitch(y) / (a * pitch(x)) - 1) < 0.03, (a, pitch(x), pitch(y))
    on = np.nonzero(np.abs(y) > 1e-3 * np.abs(y).max())[0]
    assert abs(on[0] - 2000) < 480 and abs(on[-1] - 14000) < 480, (a, on[0], on[-1])
    kept = np.abs(envelope_db(y) - envelope_db(x)).mean()
    moved = np.abs(envelope_db(change_speed(x, a)) - envelope_db(x)).mean()
    assert kept < 6 and kept < moved / 2, (a, kept, moved)
print("shift_pitch: pitch moves by the factor; formants, timing and level stay")
PY
# stretch does every frame at once but the phase recursion: to the bit what the plain loop over
# output frames (below) gives, on speech, noise, silence (no spectral peaks) and a short clip
$PY - "$T/data" <<'PY'
import glob, sys
import numpy as np
from mega_kws_tools.audio import read_wav
from mega_kws_tools.augment.speaker import framed, overlap_add, PITCH_RANGE, stretch
from mega_kws_tools.augment.speaker import PV_FRAME as frame, PV_HOP as hop

def stretch_loop(clip, factor):
    padded = np.concatenate([np.zeros(frame), clip.astype(np.float64), np.zeros(frame + hop)])
    count = (len(padded) - frame) // hop + 1
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(frame) / frame)
    spec = np.fft.rfft(framed(padded, count, frame, hop) * win, axis=1)
    advance = 2 * np.pi * hop * np.arange(frame // 2 + 1) / frame
    steps = np.arange(int(np.ceil((count - 1) * factor)) + 1) / factor
    steps = steps[steps < count - 1]
    phase = np.angle(spec[0])
    out_frames = np.empty((len(steps), frame))
    bins = np.arange(frame // 2 + 1)
    for k, t in enumerate(steps):
        i, a = int(t), t - int(t)
        mag = (1 - a) * np.abs(spec[i]) + a * np.abs(spec[i + 1])
        inner = mag[1:-1]
        peaks = np.nonzero((inner > mag[:-2]) & (inner >= mag[2:]))[0] + 1
        if len(peaks):
            owner = peaks[np.searchsorted((peaks[:-1] + peaks[1:]) / 2, bins)]
            locked = phase[owner] + np.angle(spec[i]) - np.angle(spec[i])[owner]
        else:
            locked = phase
        out_frames[k] = np.fft.irfft(mag * np.exp(1j * locked), frame) * win
        d = np.angle(spec[i + 1]) - np.angle(spec[i]) - advance
        phase = locked + advance + d - 2 * np.pi * np.round(d / (2 * np.pi))
    out = overlap_add(out_frames) / 1.5
    start, m = int(round(frame * factor)), int(round(len(clip) * factor))
    return out[start:start + m]

rng = np.random.default_rng(5)
clips = [read_wav(p).astype(np.float32) / 32768 for p in sorted(glob.glob(sys.argv[1] + "/*/*.wav"))[::7]]
clips += [(rng.standard_normal(16000) * 0.1).astype(np.float32), np.zeros(16000, np.float32), np.zeros(300, np.float32)]
for c in clips:
    for f in (PITCH_RANGE[0], 1.0, 1.37, PITCH_RANGE[1]):
        a, b = stretch(c, f), stretch_loop(c, f)
        assert a.shape == b.shape and np.array_equal(a, b), (len(c), f)
print(f"stretch: as the loop over frames on {len(clips)} clips, 4 factors each")
PY
# --warp-prob / --mask-prob: a warped filter responds at factor x its frequency; the
# augmentation leaves evaluation (and so the converted model) untouched
$PY - <<'PY'
import numpy as np
import torch
from mega_kws_tools import model as mt
from mega_kws_tools.augment.features import SpeakerAugment, warp_filters, WARP_RANGE
from mega_kws_tools.training.presets import PRESETS
cfg = mt.MegaConfig(**PRESETS["smoke"], n_classes=12, bidirectional=False)
m = mt.MegaKWS(cfg)
x = torch.randn(8, 16000) * 0.1
m.eval()
ref = m.embed_tokens(x)
SpeakerAugment(m, 1.0, 1.0, np.random.default_rng(0))
assert torch.equal(m.embed_tokens(x), ref), "augmentation changed evaluation"
m.train()
assert not torch.allclose(m.embed_tokens(x), ref), "augmentation did nothing in training"
w = m.embed_tokens.weight.detach()
def peak_hz(v):
    return np.argmax(np.abs(np.fft.rfft(v.numpy(), 16000)))
for f in WARP_RANGE:
    j = w.shape[0] // 4
    assert abs(peak_hz(warp_filters(w, f)[j]) - f * peak_hz(w[j])) <= 0.02 * f * peak_hz(w[j]) + 5, f
print("warp_filters: filters move by the factor; evaluation unchanged")
PY
# --speed-range / --warp-range: the factors are drawn from the range given (the defaults otherwise); the run
# logs them, resumes exactly and changes the losses; an empty, reversed or out-of-bounds range is refused,
# and so is a range without its --speed-prob / --warp-prob
$PY - "$T/data" <<'PY'
import sys
import numpy as np
import torch
from mega_kws_tools import model as mt
from mega_kws_tools.augment import batch
from mega_kws_tools.augment.batch import make_batch
from mega_kws_tools.augment.features import SpeakerAugment, WARP_RANGE
from mega_kws_tools.augment.speaker import SPEED_RANGE
from mega_kws_tools.data.dataset import Dataset
from mega_kws_tools.training.presets import PRESETS
ds = Dataset(sys.argv[1], "kws12", "training")
seen = []
plain = batch.change_speed  # make_batch's, watched
batch.change_speed = lambda clip, f: (seen.append(f), plain(clip, f))[1]
for rng_range in [None, (0.6, 0.7), (1.5, 1.9)]:
    seen.clear()
    kw = {} if rng_range is None else {"speed_range": rng_range}
    make_batch(ds, np.arange(min(len(ds), 40)), np.random.default_rng(3), train=True, speed_prob=1.0, **kw)
    lo, hi = rng_range or SPEED_RANGE
    assert len(seen) >= 20 and lo <= min(seen) and max(seen) <= hi, (rng_range, seen)
    assert max(seen) - min(seen) > 0.5 * (hi - lo), (rng_range, seen)  # spread over the range
batch.change_speed = plain
cfg = mt.MegaConfig(**PRESETS["smoke"], n_classes=12, bidirectional=False)
m = mt.MegaKWS(cfg).train()
for rng_range in [None, (0.6, 0.7), (1.5, 1.9)]:
    aug = SpeakerAugment(m, 1.0, 0.0, np.random.default_rng(1), *([rng_range] if rng_range else []))
    factors = []
    aug.embed = lambda s, f, aug=aug: (factors.append(f), aug.plain(s))[1]
    for _ in range(10):
        m.embed_tokens(torch.randn(8, 16000) * 0.1)
    lo, hi = rng_range or WARP_RANGE
    assert len(factors) == 10 * aug.GROUPS and lo <= min(factors) and max(factors) <= hi, (rng_range, factors)
    m.embed_tokens.forward = aug.plain
print("speed and warp ranges: factors drawn within the range given")
PY
augmentation_run sr "--speed-range 0.6 1.6" "^speed factors 0.6-1.6 (p 0.5), warp factors 0.88-1.14 (p 0.5)"
augmentation_run wr "--warp-range 0.7 1.3" "^speed factors 0.88-1.12 (p 0.5), warp factors 0.7-1.3 (p 0.5)"
for bad in "--speed-range 1.2 0.9" "--warp-range 1 1" "--warp-range 0.3 1.2" "--speed-range 1 2.5" \
    "--speed-range nan 1.2" "--speed-range 0.9"; do
  if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/bad" $AUG $bad \
      >"$T/bad.log" 2>&1; then echo "$bad was accepted"; exit 1; fi
  grep -q -- "-range" "$T/bad.log"
done
for bad in "--speed-range 0.8 1.2:--speed-prob" "--warp-range 0.8 1.2:--warp-prob"; do
  if $PY -m mega_kws_tools.training.train --data "$T/data" --classes kws12 --out "$T/bad" \
      ${AUG/${bad#*:} 0.5/} ${bad%:*} >"$T/bad.log" 2>&1; then echo "${bad%:*} without ${bad#*:} was accepted"; exit 1; fi
  grep -q -- "needs ${bad#*:} P > 0" "$T/bad.log"
done
# --unknown-share: class shares of the sampling distribution
$PY - "$T/data" <<'PY'
import sys
import numpy as np
from mega_kws_tools.data.dataset import Dataset
from mega_kws_tools.training.sampling import sampling_probabilities
ds = Dataset(sys.argv[1], "kws12", "training", 0, 1)
u = ds.labels.index("_unknown_")
for share in (0.0, 0.3):
    p = sampling_probabilities(ds, share)
    mass = np.array([p[ds.y == c].sum() for c in range(len(ds.labels))])
    want = np.full(len(ds.labels), 1 / len(ds.labels)) if share == 0 else np.full(len(ds.labels), 0.7 / 11)
    if share:
        want[u] = share
    assert abs(p.sum() - 1) < 1e-9 and np.allclose(mass, want), (share, mass)
    # within a class, clips are equally likely
    assert np.allclose(p[ds.y == u], p[ds.y == u][0])
print("sampling: class shares as asked")
PY
# --extra-share: within a class with both kinds of clips, the extra ones get that share;
# a class without extra clips keeps its share, all of it from --data
$PY - "$T/data" <<'PY'
import sys
import numpy as np
from mega_kws_tools.data.dataset import Dataset
from mega_kws_tools.training.sampling import sampling_probabilities
ds = Dataset(sys.argv[1], "kws12", "training", 0, 1)
extra = Dataset(sys.argv[1], "kws12", "training", 0, 1)
on = ds.labels.index("on")
keep = extra.y != on
extra.audio, extra.y = extra.audio[keep], extra.y[keep]
ds.extend(extra)
n = len(ds.labels)
for share in (None, 0.0, 0.3, 1.0):
    p = sampling_probabilities(ds, 0.0, share)
    assert abs(p.sum() - 1) < 1e-9
    for c in range(n):
        cls, ext = p[ds.y == c].sum(), p[(ds.y == c) & (ds.source == 1)].sum()
        want = 0.0 if c == on else 0.5 if share is None else share
        assert abs(cls - 1 / n) < 1e-9 and abs(ext - want / n) < 1e-9, (share, ds.labels[c], cls, ext)
print("sampling: --extra-share as asked")
PY
# --splice-prob: half a keyword joined to half of another word, labelled _unknown_; the
# keyword's onset (or coda) is kept sample for sample up to the cross-fade; words that
# could make the keyword again are never spliced to it; probability 0 changes nothing
$PY - "$T/data" <<'PY'
import os, sys
import numpy as np
from mega_kws_tools.augment.batch import make_batch
from mega_kws_tools.augment.splice import SPLICE_AVOID, splice_pair, splice_pool
from mega_kws_tools.data.dataset import clip_voices, Dataset
from mega_kws_tools.data.layout import KEYWORDS
t = np.arange(16000) / 16000
kw = np.zeros(16000, np.float32)
kw[4000:10000] = 0.5 * np.sin(2 * np.pi * 300 * t[:6000])
other = np.zeros(16000, np.float32)
other[2000:12000] = 0.05 * np.sin(2 * np.pi * 900 * t[:10000])
rng = np.random.default_rng(0)
for keep_onset in (True, False):
    y = splice_pair(kw, other, keep_onset, rng)
    on = np.nonzero(np.abs(y) > 1e-6)[0]
    part = y[on[0]:on[-1] + 1]
    n = len(part)
    assert len(y) == 16000 and 0.35 * 6000 + 0.35 * 10000 - 200 <= n <= 0.65 * 6000 + 0.65 * 10000 + 200, n
    spec = np.abs(np.fft.rfft(part[:n // 4] if keep_onset else part[-n // 4:], 16000))
    assert np.argmax(spec) in range(295, 306), "the keyword's part is not where it belongs"
    a, b = (part[:n // 3], part[-n // 3:]) if keep_onset else (part[-n // 3:], part[:n // 3])
    assert abs(np.sqrt(np.mean(b * b)) / np.sqrt(np.mean(a * a)) - 1) < 0.1, "levels not matched"
assert splice_pair(kw, np.zeros(16000, np.float32), True, rng) is None
ds = Dataset(sys.argv[1], "kws12", "training", 0, 1)
u = ds.labels.index("_unknown_")
words = {os.path.basename(os.path.dirname(p)) for p in ds.paths}
assert all(v.count(":") == 1 for v in ds.voice[:len(ds.paths)]), "voices not read from manifest.csv"
same = 0
for k, keyword in enumerate(KEYWORDS):
    for j in np.nonzero(ds.y == k)[0]:
        pool = splice_pool(ds, keyword, j)
        got = {os.path.basename(os.path.dirname(ds.paths[i])) for i in pool}
        assert len(pool) and all(ds.y[i] == u for i in pool) and not got & SPLICE_AVOID[keyword], keyword
        # the same voice (and variant) when it has other words, else anything of the source
        mine = [i for i in np.nonzero(ds.y == u)[0] if ds.voice[i] == ds.voice[j]
                and os.path.basename(os.path.dirname(ds.paths[i])) not in SPLICE_AVOID[keyword]]
        if mine:
            assert all(ds.voice[i] == ds.voice[j] for i in pool), (keyword, j)
            same += 1
        else:
            assert got == words - set(KEYWORDS) - {"_silence_"} - SPLICE_AVOID[keyword], keyword
assert same, "no keyword clip was spliced within its voice"
# the pools follow extend(): the added copy's clips of the same voice join them
kw, j = next((KEYWORDS[ds.y[i]], int(i)) for i in np.nonzero(ds.y < 10)[0]  # a pool of its voice
             if all(ds.voice[o] == ds.voice[i] for o in splice_pool(ds, KEYWORDS[ds.y[i]], i)))
before = len(splice_pool(ds, kw, j))
ds.extend(Dataset(sys.argv[1], "kws12", "training", 0, 1))
assert len(splice_pool(ds, kw, j)) == 2 * before, "stale splice pools after extend()"
ds = Dataset(sys.argv[1], "kws12", "training", 0, 1)
speaker = clip_voices("/x", ["/x/yes/0a1b2c3d_nohash_2.wav", "/x/bed/other.wav"])
assert list(speaker[0]) == ["speaker:0a1b2c3d", ""] and list(speaker[1]) == ["speaker:0a1b2c3d", ""], speaker
idx = np.nonzero(ds.y < 10)[0][:16]
x0, y0 = make_batch(ds, idx, np.random.default_rng(1), True)
x1, y1 = make_batch(ds, idx, np.random.default_rng(1), True, splice_prob=0.0)
assert (x0 == x1).all() and (y0 == y1).all()
_, ys = make_batch(ds, idx, np.random.default_rng(1), True, splice_prob=1.0)
assert (ys == u).all() and (y0 < 10).all(), ys
print("--splice-prob: halves joined, levels matched, avoided words kept out")
PY
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
# --false-alarms: the smoke model raises none, so the report is checked on false alarms placed by hand in
# one recording pooled twice: after the same _unknown_ word in each copy, and at the start before any
# word; each names its recording, its keyword-free stretch and the clip heard before it, and the
# repeated clip is counted
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --max-fa-per-hour 50 --false-alarms >"$T/fa.log" 2>&1
grep -q "^0 false alarms, 0 in keyword-free stretches$" "$T/fa.log"
$PY - "$T/va.wav" "$T/va.csv" <<'PY'
import csv, sys, wave
from mega_kws_tools.evaluation import streamscore, tune_detection as td
wav, lab = sys.argv[1:3]
rows = list(csv.DictReader(open(lab)))
free = [(float(r["onset_s"]), float(r["offset_s"])) for r in rows if r["kind"] == "keyword_free"]
u = next(r for r in rows if r["kind"] == "unknown")
with wave.open(wav) as w:
    length = w.getnframes() // 4000 * 0.25
t, quiet = float(u["offset_s"]) + 0.3, 0.1
assert not any(float(r["onset_s"]) < quiet for r in rows if r["kind"] != "keyword_free")
mark = lambda x: ", keyword-free" if any(a <= x <= b for a, b in free) else ""
_, free2 = streamscore.read_stream_labels(lab)
free2 = free2 + [(a + length, b + length) for a, b in free2]
lines = td.false_alarm_report([(t, "yes"), (t + length, "no"), (quiet, "up")], [(wav, lab)] * 2, 0.25, 4000, free2)
heard = f"heard before it: {u['detail']} ({u['source']})"
assert lines[0].startswith(f"false alarm yes at {t:.2f} s (va.wav {t:.2f} s){mark(t)}: ") and heard in lines[0], lines
assert lines[1].startswith(f"false alarm no at {t + length:.2f} s (va.wav {t:.2f} s){mark(t)}: ") and heard in lines[1], lines
assert lines[2] == f"false alarm up at 0.10 s (va.wav 0.10 s){mark(quiet)}: heard before it: no labelled word", lines
n_free = 2 * bool(mark(t)) + bool(mark(quiet))
assert lines[3] == f"3 false alarms, {n_free} in keyword-free stretches", lines
if mark(t):
    assert lines[4] == f"  2 of those after the same clip: {u['detail']} ({u['source']})" and len(lines) == 5, lines
else:
    assert len(lines) == 4, lines
print(f"tune_detection --false-alarms: report as placed ({n_free} keyword-free)")
PY
# --holdout-check tunes on one half and scores on the other: on one recording twice, each half must be
# that recording (posteriors and labels), so the shared threshold is det1's and scores as det1 did
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$T/fts/best.pt" --stream "$T/va.wav" --labels "$T/va.csv" \
    --stream "$T/va.wav" --labels "$T/va.csv" --max-fa-per-hour 50 --holdout-check >"$T/holdout.txt" 2>&1
$PY - "$T/det1.json" "$T/holdout.txt" "$T/fts/best.pt" "$T/va.wav" "$T/va.csv" <<'PY'
import json, re, sys
import numpy as np
from mega_kws_tools import model as mt
from mega_kws_tools.evaluation import tune_detection as td
det, report, ckpt, wav, csv_path = sys.argv[1:6]
model, _, _ = mt.load_checkpoint(ckpt)
hop = model.cfg.chunk_samples / model.cfg.sample_rate
once = td.pooled_posteriors(model, [(wav, csv_path)], hop)
twice = td.pooled_posteriors(model, [(wav, csv_path)] * 2, hop)
def rounded(spans):  # (onset, offset[, label]) with the times to the microsecond
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in span) for span in spans]
for half in td.split_recording(*twice, hop, len(twice[0]) // 2):
    assert np.array_equal(half[0], once[0]), "posteriors of a half differ"
    assert rounded(half[1]) == rounded(once[1]), half[1]
    assert rounded(half[2]) == rounded(once[2]), half[2]
a = json.load(open(det))
rows = [l for l in open(report) if l.startswith("| first half") or l.startswith("| second half")]
assert len(rows) == 2, open(report).read()
for row in rows:
    m = re.match(r"\| \w+ half \| ([0-9.]+), smoothing (\d); ([0-9.]+)%, ([0-9.]+) \| .*; ([0-9.]+)%, ([0-9.]+) \|$", row.strip())
    assert m, row
    assert abs(float(m[1]) - a["thresholds"][0]) < 1e-9 and int(m[2]) == a["smoothing_hops"], (row, a)
    t = a["tuned_on"]
    assert abs(float(m[3]) - round(100 * t["recall"], 1)) < 0.051, (row, t)
    assert abs(float(m[4]) - round(t["fa_per_hour_keyword_free"], 1)) < 0.051, (row, t)
print("tune_detection: holdout check")
PY
# HardExamples.replace: at share 1 every row is a hard example, at share 0 none
$PY - "$T/hard.npz" <<'PY'
import sys
import numpy as np
import torch
from mega_kws_tools.data.layout import KEYWORDS
from mega_kws_tools.training.mining import HardExamples
labels = KEYWORDS + ["_silence_", "_unknown_"]
h = HardExamples([sys.argv[1]], labels)
rng = np.random.default_rng(0)
x, y = torch.zeros(8, 32000), torch.full((8,), 10)
h.replace(x, y, rng, 0.0)
assert (y == 10).all() and (x == 0).all()
h.replace(x, y, rng, 1.0)
rows = h.audio.astype(np.float32)
for i in range(8):
    # each row is one of the mined windows at some level (their correlation is 1)
    c = rows @ x[i].numpy() / (np.linalg.norm(rows, axis=1) * np.linalg.norm(x[i].numpy()) + 1e-9)
    j = int(np.argmax(c))
    assert c[j] > 0.999 and y[i] == h.y[j], (i, c[j])
print("hard examples: mixed in as asked")
PY
# --preset *-mel (log-mel front end): a tone lands in the mel band around its frequency and nowhere
# far off; a warped spectrum moves it by the factor; SpecAugment masks fall on the bands; a run
# trains, resumes, converts (schema 4), passes the runtime's self-test and classifies as PyTorch does
$PY - <<'PY'
import math
import numpy as np
import torch
from mega_kws_tools import model as mt
from mega_kws_tools.augment.features import SpeakerAugment, warp_filters
from mega_kws_tools.training.presets import PRESETS
cfg = mt.MegaConfig(**PRESETS["demo-wide-mel"], n_classes=12, bidirectional=False)
emb = mt.MegaKWS(cfg).embed_tokens
bands = emb.bands
assert bands.shape[0] == 40 and bool((bands.sum(1) > 0).all()) and float(bands.min()) >= 0
hz = torch.tensor([f for _, f in mt.mel_bins(400)])
centre = [float(hz[int(torch.argmax(r))]) for r in bands]
assert centre == sorted(centre) and centre[0] < 150 and centre[-1] > 6500, centre
t = torch.arange(16000) / 16000.0
for f in (300.0, 1000.0, 2500.0, 6000.0):
    for factor in (1.0, 0.9, 1.12):
        w = emb.weight if factor == 1.0 else warp_filters(emb.weight, factor)
        lm = emb.log_power(0.1 * torch.sin(2 * math.pi * f * t).unsqueeze(0), w)[0, 10:-10].mean(0)
        top = centre[int(torch.argmax(lm))]
        # the warped front end sees the tone at f / factor
        assert abs(math.log(top / (f / factor))) < 0.12, (f, factor, top)
        assert float(lm.max() - lm.min()) > 6, (f, factor)  # far bands are far below the tone's
m = mt.MegaKWS(mt.MegaConfig(**PRESETS["smoke-mel"], n_classes=12, bidirectional=False))
x = torch.randn(8, 16000) * 0.1
m.eval()
ref = m.embed_tokens(x)
aug = SpeakerAugment(m, 0.0, 1.0, np.random.default_rng(0))
assert torch.equal(m.embed_tokens(x), ref), "augmentation changed evaluation"
masked = aug.mask(m.embed_tokens.log_power(x))
assert masked.shape == (8, 100, 16) and not torch.equal(masked, m.embed_tokens.log_power(x))
m.train()
assert not torch.allclose(m.embed_tokens(x), ref), "augmentation did nothing in training"
print("log-mel: tones in their bands, warped by the factor; masks on the bands")
PY
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
# is above the one without (the trained model is surer of a clip's class than of the others); 1 is refused
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
if $PY -m mega_kws_tools.training.train --data "$T/data" --out "$T/bad" --preset smoke --steps 1 --label-smoothing 1 \
    >"$T/bad_ls.log" 2>&1; then
  echo "--label-smoothing 1 was accepted"; exit 1
fi
grep -q "must be at least 0 and below 1" "$T/bad_ls.log"
echo "training smoke test passed"
