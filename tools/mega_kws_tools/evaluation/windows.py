#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""How often a model's keyword score is high at the end of windows that hold no
keyword: the near misses of validation speakers' sentences (data.near_miss
--split validation), or any .npz of two-second `_unknown_` windows in the hard
examples' format, scored by the runtime itself.

  MEGA_KWS_LIBRARY=build/libmega_kws.so python3 -m mega_kws_tools.evaluation.windows \\
      --model models/sc10-demo.mega work/data/nearmiss-so-validation.npz

Each window is streamed from a fresh start; what counts is the last hop, the one
that ends where the window ends: its keyword posteriors averaged over the
model's stored smoothing (streamscore.smoothed, as the detector averages them),
against the model's stored threshold for each keyword ("over its threshold":
what the detector could fire on there), and the highest keyword posterior of
that hop against 0.5. Per word (the .npz's `words`, when it has them) and per
keyword. Only the windows' last hop is read, so a keyword said in a window's
first second (near_miss allows one that far before the end) does not count.
"""

import argparse
import json
import sys
from collections import Counter

import numpy as np

from mega_kws_tools.evaluation.runtime_posteriors import RuntimeModel
from mega_kws_tools.evaluation.streamscore import smoothed


def last_hop(model: RuntimeModel, audio: np.ndarray, smoothing: int):
    """(the last hop's posteriors, their mean over the last `smoothing` hops) of int16 audio from a fresh stream."""
    p = model.stream_posteriors(audio.astype(np.float32) / 32768)
    return p[-1], smoothed(p, smoothing)[-1]


def score(model: RuntimeModel, thresholds, smoothing: int, audio, words=None) -> dict:
    """The counts the module's docstring describes."""
    keywords = [i for i, l in enumerate(model.labels) if not l.startswith("_")]
    over, half, by_word, by_keyword, n_word = 0, 0, Counter(), Counter(), Counter()
    for i, a in enumerate(audio):
        p, sm = last_hop(model, a, smoothing)
        w = str(words[i]) if words is not None else ""
        n_word[w] += 1
        fired = [k for k in keywords if sm[k] >= thresholds[k]]
        if fired:
            over += 1
            best = max(fired, key=lambda k: sm[k])
            by_word[w] += 1
            by_keyword[model.labels[best]] += 1
        half += max(p[k] for k in keywords) >= 0.5
    return {"windows": len(audio), "over_threshold": over, "posterior_over_half": int(half),
            "over_threshold_as": dict(by_keyword.most_common()),
            "over_threshold_by_word": {w: [by_word[w], n_word[w]] for w, _ in by_word.most_common()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a .mega file (its stored thresholds and smoothing are used)")
    ap.add_argument("windows", help="an .npz with audio [N, samples] int16 (and optionally words [N])")
    ap.add_argument("--json-out", help="write the counts here too")
    args = ap.parse_args(argv)
    model = RuntimeModel(args.model)
    thresholds, smoothing = model.stored_detection()
    with np.load(args.windows) as z:  # each z[name] reads the array again: once each
        audio = z["audio"] if "audio" in z.files else None
        words = z["words"] if "words" in z.files else None
    if audio is None or audio.ndim != 2 or audio.dtype != np.int16:
        ap.error(f"{args.windows}: needs `audio`, [N, samples] int16 (data.near_miss, training.mine_hard)")
    out = score(model, thresholds, smoothing, audio, words)
    n = max(1, out["windows"])
    print(f"{args.windows}: {out['windows']} windows; a keyword over its stored threshold at the end: "
          f"{out['over_threshold']} ({100 * out['over_threshold'] / n:.1f}%) {out['over_threshold_as']}; "
          f"a keyword posterior >= 0.5: {out['posterior_over_half']} ({100 * out['posterior_over_half'] / n:.1f}%)")
    if out["over_threshold_by_word"]:
        print("  by word (over / windows): " + ", ".join(f"{w} {a}/{b}" for w, (a, b)
                                                        in out["over_threshold_by_word"].items()))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
