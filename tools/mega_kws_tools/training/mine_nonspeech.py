#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Mine hard non-speech negatives: the streaming windows of music and generated
sounds that a checkpoint reads as a keyword, for train.py --hard-examples.

  mine_nonspeech.py --checkpoint RUN/best.pt --audio work/data/music --generated 2000 --seed 7001 -o hard-ns.npz
                    [--min 0.4]

Training's --nonspeech-negatives draws random slices and random sounds, and
rarely the moment a model fires on: a bar of one music track, one beep pattern.
This tool finds those moments. It streams each source through the PyTorch
reference (tune_detection's posteriors: one per hop, the EMA state carrying
everything before) and keeps, as a _silence_ example, the two seconds of audio
ending at each hop where some keyword's posterior is >= --min, at most one per
SPACING_HOPS hops of a source. It skips the model's warm-up hops at each
source's start, where the runtime neither fires nor smooths.

Sources: the 16 kHz WAVs of --audio (a file or a folder; training music, e.g.
tools/scripts/music_negatives.sh's folder) and --generated ten-second sounds
of augment.nonspeech (every other one beeps, every kind in turn between them,
drawn with --seed). It refuses the music that tests/apps/test_nonspeech.py scans
(chromium-bsu-data's and frozen-bubble-data's): the check must hear music no
run trained on. Its fixed signals are not made here either; the generated
sounds are random draws.

Output: as mine_hard.py's, audio (N, 32000) int16, labels (N,) all _silence_,
times_s (N,) (the hop's end in its source), scores (N,), sources (N,) (the
file's name, or gen<i>-<kind>), and source (a line naming what was mined).
"""
import argparse
import collections
import itertools
import os
import sys

import numpy as np
import torch

from mega_kws_tools import model as mt
from mega_kws_tools.audio import SR, window_before
from mega_kws_tools.augment import nonspeech
from mega_kws_tools.evaluation.tune_detection import stream_posteriors

SPACING_HOPS = 2        # at most one window per two hops (half a second) of a source
GENERATED_S = 10        # each generated sound's length
HELD_OUT_MUSIC = ("chromium-bsu", "frozen-bubble")  # tests/apps/test_nonspeech.py's music


def held_out(path: str) -> bool:
    """Whether path is music the non-speech check scans (by its package's name in the path)."""
    return any(name in os.path.abspath(path) for name in HELD_OUT_MUSIC)


def generated_sources(n: int, seed: int):
    """n (name, int16 samples) of GENERATED_S seconds each: beeps every other one, every kind
    of augment.nonspeech in turn between them."""
    rng = np.random.default_rng(seed)
    for i in range(n):
        kind = "beeps" if i % 2 == 0 else nonspeech.KINDS[(i // 2) % len(nonspeech.KINDS)]
        x = nonspeech.random_nonspeech(GENERATED_S * SR, rng, kind)
        yield f"gen{i}-{kind}", np.round(x * 32767).astype(np.int16)


def hard_hops(probs: np.ndarray, keyword_ids, warmup: int, minimum: float) -> list:
    """The hops (after the first `warmup`) where some keyword's posterior is >= minimum,
    at most one per SPACING_HOPS hops: [(hop, its highest keyword posterior)]."""
    top = probs[:, keyword_ids].max(axis=1)
    out, last = [], -SPACING_HOPS
    for h in np.nonzero(top >= minimum)[0]:
        if h < warmup or h - last < SPACING_HOPS:
            continue
        out.append((int(h), float(top[h])))
        last = h
    return out


def mine(posteriors, sources, keyword_ids, warmup: int, chunk_samples: int, minimum: float):
    """posteriors(float samples) -> [hops, classes]; sources: (name, int16 samples). Returns
    (audio [N, 2 s] int16, times_s, scores, the source of each)."""
    audio, times, scores, names = [], [], [], []
    for name, x in sources:
        for h, score in hard_hops(posteriors(x.astype(np.float32) / 32768.0), keyword_ids, warmup, minimum):
            end = (h + 1) * chunk_samples
            audio.append(window_before(x, end, 2 * SR))
            times.append(end / SR)
            scores.append(score)
            names.append(name)
    audio = np.stack(audio) if audio else np.zeros((0, 2 * SR), np.int16)
    return audio, np.array(times), np.array(scores), np.array(names)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--audio", action="append", default=[],
                    help="recorded non-speech: a 16 kHz WAV or a folder of them (repeatable)")
    ap.add_argument("--generated", type=int, default=0, help="how many generated sounds to mine (default 0)")
    ap.add_argument("--seed", type=int, default=0, help="the generated sounds' seed (default 0)")
    ap.add_argument("--min", type=float, default=0.4, help="a keyword posterior that makes a window hard (default 0.4)")
    ap.add_argument("-o", "--output", required=True, help="output .npz")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if not args.audio and args.generated <= 0:
        ap.error("give --audio or --generated")
    if args.generated < 0 or not 0 < args.min <= 1:
        ap.error("--generated >= 0 and --min in (0, 1]")
    bad = [p for p in args.audio if held_out(p)]
    if bad:
        print(f"mine_nonspeech.py: {bad[0]} is music the non-speech check scans "
              f"({', '.join(HELD_OUT_MUSIC)}): mine training music only", file=sys.stderr)
        return 1
    try:
        files = nonspeech.recording_files(args.audio)
        recordings = nonspeech.load_recordings(files)
    except ValueError as e:
        print(f"mine_nonspeech.py: {e}", file=sys.stderr)
        return 1
    torch.set_num_threads(args.threads)
    model, _, extra = mt.load_checkpoint(args.checkpoint)
    labels = extra["labels"]
    if "_silence_" not in labels:
        print("mine_nonspeech.py: the checkpoint has no _silence_ class", file=sys.stderr)
        return 1
    keyword_ids = [i for i, l in enumerate(labels) if not l.startswith("_")]
    # the generated sounds one at a time, as mine() reaches them (2,000 of them are 640 MB)
    sources = itertools.chain(zip((os.path.basename(f) for f in files), recordings),
                              generated_sources(args.generated, args.seed))
    audio, times, scores, names = mine(lambda x: stream_posteriors(model, x), sources, keyword_ids,
                                       model.cfg.window_chunks, model.cfg.chunk_samples, args.min)
    np.savez_compressed(args.output, audio=audio, labels=np.array(["_silence_"] * len(audio)), times_s=times,
                        scores=scores, sources=names,
                        source=f"non-speech: {' '.join(args.audio) or 'no recordings'} + {args.generated} "
                               f"generated (seed {args.seed}), keyword >= {args.min}")
    kinds = collections.Counter("generated" if n.startswith("gen") else "recorded" for n in names)
    print(f"{len(files) + args.generated} sources: {len(audio)} windows with a keyword >= {args.min} "
          f"({kinds['recorded']} recorded, {kinds['generated']} generated) from {len(set(names))} sources "
          f"-> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
