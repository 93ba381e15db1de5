#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# From a training run to the bundled model: tune the detection defaults on the
# validation stream, convert, then measure with the shipped runtime on the
# test split and the test recordings. Reproduces models/sc10-demo.mega and the
# figures in docs/lab-log.md (the pipeline before continue_real.sh).
#   make_demo_model.sh RUN_DIR DATA_DIR KEYWORD_SPOTTER OUT.mega [REAL_DIR]
# REAL_DIR (tools/mega_kws_tools/data/fetch_real_sc.py's folder): 20-, 40- and 60-minute recordings of its
# validation-split speakers join the tuning, and its validation clips are
# measured too.
set -euo pipefail
RUN=$1 DATA=$2 KS=$3 OUT=$4 REAL=${5:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$(dirname "$HERE")")
PY=/usr/bin/python3
export PYTHONPATH="$ROOT/tools${PYTHONPATH:+:$PYTHONPATH}"  # the mega_kws_tools package
WORK=$(dirname "$DATA")
. "$HERE/recordings.sh"
TUNE=()
validation_recordings "$DATA" "$REAL"
TEST=()
test_recordings "$DATA"
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$RUN/best.pt" "${TUNE[@]}" --max-fa-per-hour 5 \
  -o "$RUN/detection.json" | tail -1
# the step and validation accuracy, where the checkpoint has them (a weight average has neither)
FIGURES=$($PY -c "import torch,sys; c=torch.load(sys.argv[1]); s, v = c.get('step'), c.get('best_val')
print('' if s is None or v is None else f'; step/validation accuracy (held-out voices): {s} {round(v, 4)}')" "$RUN/best.pt")
$PY -m mega_kws_tools.convert.mega_convert "$RUN/best.pt" -o "$OUT" --detection "$RUN/detection.json" \
  --notes "Demo model trained on synthetic speech (tools/mega_kws_tools/data/make_sc10.py: espeak-ng, flite and festival voices, voice-disjoint splits) and real Speech Commands clips of training-split and validation-split speakers (CC BY 4.0)$FIGURES. See docs/models.md."
"$KS" selftest -m "$OUT"
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$OUT" --data "$DATA" --split testing \
  --stream "$WORK/stream-test60.wav" --stream-labels "$WORK/stream-test60.csv" --json-out "$RUN/eval.json"
$PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$OUT" \
  --stream "$WORK/stream-testfree150-21.wav" --stream-labels "$WORK/stream-testfree150-21.csv" \
  --json-out "$RUN/eval-testfree.json" | grep '^stream:'
# the recall within each false-alarm budget on the two test recordings pooled (measured, not tuned)
$PY -m mega_kws_tools.evaluation.tune_detection --checkpoint "$RUN/best.pt" "${TEST[@]}" --curve | tee "$RUN/test-curve.txt"
if [ -n "$REAL" ]; then
  $PY -m mega_kws_tools.evaluation.evaluate --ks "$KS" --model "$OUT" --data "$REAL" --split validation \
    --stream "$WORK/stream-realval20.wav" --stream-labels "$WORK/stream-realval20.csv" --json-out "$RUN/eval-realval.json"
fi
