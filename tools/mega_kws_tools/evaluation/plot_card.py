#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The model card's pictures, drawn from the evaluation's own output.

  plot_card.py --curve CURVE.json --confusion EVAL.json --out-dir docs/img [--title-suffix TEXT]

CURVE.json: tune_detection.py --curve-json (the best recall at each false-alarm
rate over its sweep of one shared threshold x smoothing, and the setting it
chose, which the model file stores); EVAL.json: evaluate.py --json-out (its
"clips" part: labels and confusion matrix). Writes detection_curve.png (keywords
found against false alarms per keyword-free hour, the stored defaults marked)
and confusion.png (rows: the true label, as percentages of the row, with counts).
Needs Debian's python3-matplotlib.
"""
import argparse
import json
import os
import sys

import numpy as np


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def detection_curve(curve: dict, path: str, title: str) -> None:
    plt = _pyplot()
    fa = [p[0] for p in curve["frontier"]]
    rec = [100 * p[1] for p in curve["frontier"]]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    ax.step(fa, rec, where="post", color="#1f5fa8", label="one threshold for every keyword (best per rate)")
    c = curve["chosen"]
    found = round(c["recall"] * curve["keywords"])  # the recall is a count over the keywords: say it exactly
    ax.plot([c["fa_per_hour"]], [100 * c["recall"]], "o", color="#c0392b", ms=8,
            label=f"stored defaults: {found} of {curve['keywords']} ({100 * found / curve['keywords']:.1f}%) "
                  f"at {c['fa_per_hour']:.1f} per hour")
    ax.set_xscale("symlog", linthresh=1)
    ax.set_xlim(0, max(fa + [c["fa_per_hour"], 10]) * 1.2)
    ax.set_ylim(0, 100)
    ax.set_xlabel("false alarms per keyword-free hour (log scale above 1)")
    ax.set_ylabel("keywords detected (%)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.text(0.01, 0.01, f"{curve['keywords']} keywords, {curve['keyword_free_hours']:.2f} keyword-free hours",
             fontsize=7, color="#555")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def confusion(clips: dict, path: str, title: str) -> None:
    plt = _pyplot()
    labels, m = clips["labels"], np.array(clips["confusion"], dtype=float)
    keep = m.sum(axis=1) > 0  # labels with no clip of their own: columns only
    rows = [lab for lab, k in zip(labels, keep) if k]
    pct = 100 * m[keep] / m[keep].sum(axis=1, keepdims=True)
    fig, ax = plt.subplots(figsize=(7.6, 0.45 * len(rows) + 1.6), dpi=110)
    ax.imshow(pct, cmap="Blues", vmin=0, vmax=100, aspect="auto")
    for i in range(pct.shape[0]):
        for j in range(pct.shape[1]):
            n = int(m[keep][i, j])
            if n:
                ax.text(j, i, f"{pct[i, j]:.0f}\n({n})", ha="center", va="center", fontsize=6,
                        color="white" if pct[i, j] > 60 else "black")
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_xlabel("called")
    ax.set_ylabel("said")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--curve", required=True, help="tune_detection.py --curve-json output")
    ap.add_argument("--confusion", required=True, help="evaluate.py --json-out output")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--title-suffix", default="real validation speakers")
    args = ap.parse_args()
    try:
        with open(args.curve) as f:
            curve = json.load(f)
        with open(args.confusion) as f:
            clips = json.load(f)["clips"]
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_card.py: {e}", file=sys.stderr)
        return 1
    os.makedirs(args.out_dir, exist_ok=True)
    detection_curve(curve, os.path.join(args.out_dir, "detection_curve.png"),
                    f"Detection on continuous recordings: {args.title_suffix}")
    confusion(clips, os.path.join(args.out_dir, "confusion.png"), f"One-second clips: {args.title_suffix}")
    print(f"wrote {args.out_dir}/detection_curve.png and confusion.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
