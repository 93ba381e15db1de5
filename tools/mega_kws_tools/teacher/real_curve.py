# SPDX-License-Identifier: Apache-2.0
"""The table of tools/scripts/real_curve.sh (issue 83: what the real `on`,
`off` and `go` of training are worth): per share of those words' real
training clips, the clips kept, each word's right answers on the real
validation speakers' clips and sentence cuts, and the sentence cuts again
where the running speech of the same speakers is rejected as often by every
run (a bias on the `_unknown_` logit, chosen by evaluate.rejection_tradeoff:
the runs keep checkpoints that reject it from 73% to 94%).

Usage (from the repository root, PYTHONPATH=tools):
  python3 -m mega_kws_tools.teacher.real_curve --out OUT_DIR --step STEP_CACHES SHARE [SHARE ...]
"""

import argparse
import json
import os
import re

import numpy as np

from mega_kws_tools.evaluation.evaluate import TRADEOFF_REJECTION, rejection_tradeoff
from mega_kws_tools.teacher import head

WORDS = ("on", "off", "go")
LEVEL = 0.95  # running speech rejected, as the bundled model rejects it (96.1%)


def right_at_rejection(kw_logits, kw_truth, free_logits, level=LEVEL, labels=head.LABELS):
    """({label: keyword clips right}, keyword share right, bias) at the bias on the _unknown_ logit that
    evaluate.rejection_tradeoff picks for `level` (one of its TRADEOFF_REJECTION levels): the most
    keyword clips right while rejecting at least that share of the keyword-free clips; None where no
    bias reaches the level."""
    if f"{level:.2f}" not in {f"{r:.2f}" for r in TRADEOFF_REJECTION}:
        raise ValueError(f"level {level}: not one of evaluate.TRADEOFF_REJECTION {TRADEOFF_REJECTION}")
    unk = labels.index("_unknown_")
    truth = np.concatenate([kw_truth, np.full(len(free_logits), unk)])
    at = rejection_tradeoff(np.concatenate([kw_logits, free_logits]), truth, list(labels)).get(f"{level:.2f}")
    if at is None:
        return None
    shifted = np.array(kw_logits, dtype=np.float64)
    shifted[:, unk] += at["unknown_bias"]
    pred = shifted.argmax(axis=1)
    right = {l: int(np.sum((kw_truth == i) & (pred == i))) for i, l in enumerate(labels)}
    return right, at["keyword_accuracy"], at["unknown_bias"]


def kept_counts(train_log):
    """{label: clips kept} of student_run train's "kept of --train:" line."""
    with open(train_log) as f:
        line = f.read().split("kept of --train: ")[1].split("\n")[0]
    return {w: int(n) for w, n in re.findall(r"(\w+) (\d+)", line)}


def rows(out, shares, step):
    from mega_kws_tools.teacher import student
    kx, ky = head.load_sets([os.path.join(step, "sokw-val")])
    fx, _ = head.load_sets([os.path.join(step, "so-val")])
    said = {w: int(np.sum(ky == head.LABELS.index(w))) for w in WORDS}
    yield (f"| share of real {'/'.join(WORDS)} | real training clips: {' / '.join(WORDS)} "
           f"| validation clips right: {' / '.join(WORDS)} | sentence cuts right: {' / '.join(WORDS)} "
           f"| all keyword clips | all sentence cuts | running speech rejected "
           f"| at >= {LEVEL:.0%} of running speech rejected: sentence cuts {' / '.join(WORDS)}, all |")
    yield "|---|---|---|---|---|---|---|---|"
    for s in shares:
        run = os.path.join(out, f"keep-{s}")
        kept = kept_counts(os.path.join(run, "train.log"))
        judged = {}
        for j in ("real-val", "sokw-val", "so-val"):
            with open(os.path.join(run, f"student-{j}.json")) as f:
                judged[j] = json.load(f)
        cells = [" / ".join(f"{round(r['per_label'][w] * r['label_clips'][w])}/{r['label_clips'][w]}" for w in WORDS)
                 for r in (judged["real-val"], judged["sokw-val"])]
        model, _ = student.load_student(os.path.join(run, "best.pt"))
        at = right_at_rejection(student.clip_logits(model, kx), ky, student.clip_logits(model, fx))
        at_cell = "none reaches it" if at is None else \
            " / ".join(f"{at[0][w]}/{said[w]}" for w in WORDS) + f", {at[1]:.1%}"
        yield (f"| {s} | {' / '.join(str(kept[w]) for w in WORDS)} | {cells[0]} | {cells[1]} "
               f"| {judged['real-val']['keyword_accuracy']:.1%} | {judged['sokw-val']['keyword_accuracy']:.1%} "
               f"| {judged['so-val']['rejected']['_unknown_']:.1%} | {at_cell} |")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="real_curve.sh's folder of keep-SHARE runs")
    ap.add_argument("--step", required=True, help="the step-floor caches (sokw-val, so-val)")
    ap.add_argument("shares", nargs="+")
    args = ap.parse_args(argv)
    for row in rows(args.out, args.shares, args.step):
        print(row)


if __name__ == "__main__":
    main()
