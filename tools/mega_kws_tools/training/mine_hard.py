#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Mine hard examples from a continuous recording of *training* voices: the
streaming windows a checkpoint gets wrong, for train.py --hard-examples.

  mine_hard.py --checkpoint RUN/best.pt --stream train60.wav --labels train60.csv -o hard.npz
               [--negative-min 0.3] [--positive-max 0.9]

The recording must come from the training split only (make_stream.py --split
training, or speechocean.py's keyword_free_training.wav with --data its clips
folder): the validation and test voices stay unseen, and this tool refuses a
recording whose CSV names a validation or test clip of --data's lists, or a
speechocean762 sentence of which those lists hold a window.

Posteriors are the streaming ones (one per hop, each over the last window,
with the EMA state carrying everything before it), from the PyTorch reference
as in tune_detection.py. Two kinds of window are kept, each as the last two
seconds of audio up to the hop's end (the context second + the window second
that train.py's examples have):

  * negatives (label _unknown_): no keyword overlaps the window or the 0.3 s
    after it, yet some keyword's posterior is >= --negative-min: the windows
    that become false alarms at a low threshold;
  * positives (label = the keyword): one keyword lies wholly inside the window
    (at least 50 ms from each edge) and nothing else of a keyword does, yet
    its posterior is < --positive-max: a word the model knows, at a position
    in the window it does not.

Output: an .npz with audio (N, 32000) int16, labels (N,) str, times_s (N,)
(the hop's end in the recording), scores (N,) (the posterior that made the
window hard), and the source recording's name.
"""
import argparse
import collections
import csv
import os
import sys


import numpy as np
import torch

from mega_kws_tools import model as mt
from mega_kws_tools.audio import read_wav, window_before
from mega_kws_tools.data.layout import split_lists
from mega_kws_tools.evaluation import streamscore
from mega_kws_tools.evaluation.tune_detection import stream_posteriors

EDGE_S = 0.05        # a positive's word keeps this far from the window's edges
AFTER_S = 0.3        # a negative's window: no keyword starts this soon after its end


def held_sources(sources, val: set, test: set) -> list:
    """The sources of a recording's rows that belong to validation or test: a clip
    the lists name, or a speechocean762 sentence (source 'speechocean762/UTT: text')
    of which the lists name a window (clips/speech/UTT_K.wav, speechocean.py)."""
    held = val | test
    held_utts = {os.path.basename(h).rsplit("_", 1)[0] for h in held if h.startswith("speech/")}
    bad = []
    for src in sources:
        utt = src.split(":", 1)[0][len("speechocean762/"):] if src.startswith("speechocean762/") else None
        if src in held or (utt is not None and utt in held_utts):
            bad.append(src)
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--stream", required=True, help="a recording of training voices (make_stream.py --split training, "
                    "or speechocean.py's keyword_free_training.wav)")
    ap.add_argument("--labels", required=True, help="its CSV")
    ap.add_argument("--data", required=True, help="the dataset the recording was made from (its split lists)")
    ap.add_argument("-o", "--output", required=True, help="output .npz")
    ap.add_argument("--negative-min", type=float, default=0.3)
    ap.add_argument("--positive-max", type=float, default=0.9)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    with open(args.labels) as f:
        bad = held_sources([r["source"] for r in csv.DictReader(f)], *split_lists(args.data))
    if bad:
        print(f"mine_hard.py: {args.labels} uses {len(bad)} validation or test clips (e.g. {bad[0]}): "
              "mine on a recording of training voices only (make_stream.py --split training, "
              "or speechocean.py's keyword_free_training.wav)", file=sys.stderr)
        return 1

    model, _, extra = mt.load_checkpoint(args.checkpoint)
    labels = extra["labels"]
    if "_unknown_" not in labels:
        print("mine_hard.py: the checkpoint has no _unknown_ class", file=sys.stderr)
        return 1
    cfg = model.cfg
    sr = cfg.sample_rate
    hop_s = cfg.chunk_samples / sr
    win_s = cfg.window_chunks * hop_s
    audio = read_wav(args.stream)
    probs = stream_posteriors(model, audio.astype(np.float32) / 32768.0)
    keywords, _ = streamscore.read_stream_labels(args.labels)
    kw_ids = [i for i, l in enumerate(labels) if not l.startswith("_")]

    keep_audio, keep_labels, keep_t, keep_s = [], [], [], []
    span = 2 * sr
    for h in range(len(probs)):
        t = (h + 1) * hop_s
        a, b = t - win_s, t
        touching = [(on, off, kw) for on, off, kw in keywords if on < b + AFTER_S and off > a]
        if not touching:
            score = float(probs[h, kw_ids].max())
            if score < args.negative_min:
                continue
            label = "_unknown_"
        else:
            inside = [(on, off, kw) for on, off, kw in touching if on >= a + EDGE_S and off <= b - EDGE_S]
            if len(inside) != 1 or len([k for k in touching if k[0] < b and k[1] > a]) != 1:
                continue
            label = inside[0][2]
            score = float(probs[h, labels.index(label)])
            if score >= args.positive_max:
                continue
        end = int(round(t * sr))
        keep_audio.append(window_before(audio, end, span))
        keep_labels.append(label)
        keep_t.append(t)
        keep_s.append(score)
    np.savez_compressed(args.output, audio=np.stack(keep_audio) if keep_audio else np.zeros((0, span), np.int16),
                        labels=np.array(keep_labels), times_s=np.array(keep_t), scores=np.array(keep_s),
                        source=os.path.basename(args.stream))
    by = collections.Counter(keep_labels)
    n_neg = by["_unknown_"]
    n_pos = len(keep_labels) - n_neg
    print(f"{len(probs)} windows: {n_neg} hard negatives (a keyword >= {args.negative_min}), {n_pos} hard "
          f"positives (< {args.positive_max}) -> {args.output}  {dict(sorted(by.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
