#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Unlabelled audio for distillation (train.py --unlabeled with --distill;
issue 83 item 4a): two-second windows cut at drawn offsets from recordings,
each with the teacher classifier's logits for it. The student hears the same
two seconds (its context second and its window second) and is taught by the
teacher's answer alone: no label is needed, so any audio of training speakers
or made by the project can teach (keyword-free speech, spliced recordings,
babble, noise beds).

  python3 -m mega_kws_tools.teacher.unlabeled --head RUN/best.pt --wav A.wav [--wav B.wav ...] \\
      --windows N [--seed S] [--teacher work/teacher] -o OUT.npz

Offsets are drawn evenly over every two-second position of every recording
(a longer recording gives more windows). The teacher embeds each window in one
pass (embed_cache.StepEmbedder, as its caches are made) and its head
(teacher.head train's best.pt) gives the logits. Writes OUT.npz: audio [N, 2 s]
int16, logits [N, labels] float32, labels, and source (file index and offset
of each window) with files. Only recordings of training speakers and voices:
the windows train."""

import argparse
import os
import sys

import numpy as np

from mega_kws_tools.audio import SR, read_wav
from mega_kws_tools.teacher.embed_cache import CONTEXT_SAMPLES


def cut_windows(recordings, n: int, rng: np.random.Generator):
    """n windows of CONTEXT_SAMPLES samples at offsets drawn evenly over all positions of
    all recordings (int16 arrays): (audio [n, CONTEXT_SAMPLES] int16, [(recording, offset)])."""
    positions = np.array([max(0, len(r) - CONTEXT_SAMPLES + 1) for r in recordings], dtype=np.int64)
    if positions.sum() == 0:
        raise ValueError(f"no recording is {CONTEXT_SAMPLES / SR:g} s long")
    picks = np.sort(rng.integers(0, positions.sum(), size=n))
    ends = np.cumsum(positions)
    audio, source = np.zeros((n, CONTEXT_SAMPLES), np.int16), []
    for i, p in enumerate(picks):
        k = int(np.searchsorted(ends, p, side="right"))
        offset = int(p - (ends[k] - positions[k]))
        audio[i] = recordings[k][offset:offset + CONTEXT_SAMPLES]
        source.append((k, offset))
    return audio, source


def window_logits(embed, model, audio: np.ndarray, batch: int = 64) -> np.ndarray:
    """The head's logits [N, labels] for windows [N, CONTEXT_SAMPLES] int16; embed: int16-valued
    float audio [B, CONTEXT_SAMPLES] (torch) -> [B, 16, 96]."""
    import torch
    from mega_kws_tools.teacher.head import predict
    parts = []
    for i in range(0, len(audio), batch):
        with torch.no_grad():
            e = embed(torch.from_numpy(audio[i:i + batch].astype(np.float32)))
        parts.append(predict(model, e.numpy().astype(np.float32)))
    return np.concatenate(parts).astype(np.float32)


def write(out: str, audio, logits, labels, source, files):
    tmp = out + ".part.npz"
    np.savez(tmp, audio=audio, logits=logits, labels=np.array(list(labels)),
             source=np.array(source, dtype=np.int64).reshape(-1, 2), files=np.array(files))
    os.replace(tmp, out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head", required=True, help="a kept teacher head (teacher.head train's best.pt)")
    ap.add_argument("--wav", action="append", required=True, help="a 16 kHz recording of training speakers (repeat)")
    ap.add_argument("--windows", type=int, required=True, metavar="N", help="how many windows to cut")
    ap.add_argument("--seed", type=int, default=0, help="the draw of the offsets (default 0)")
    ap.add_argument("--teacher", default=os.path.join("work", "teacher"), help="the ONNX files (teacher.fetch)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("-o", "--out", required=True, help="the .npz to write")
    args = ap.parse_args(argv)
    if args.windows < 1:
        ap.error(f"--windows {args.windows}: need at least 1")
    for p in [args.head] + args.wav:
        if not os.path.isfile(p):
            ap.error(f"{p}: no such file")
    try:
        recordings = [read_wav(p) for p in args.wav]
        audio, source = cut_windows(recordings, args.windows, np.random.default_rng(args.seed))
    except ValueError as e:
        sys.exit(f"unlabeled: {e}")
    import torch
    from mega_kws_tools.teacher.embed_cache import StepEmbedder
    from mega_kws_tools.teacher.features import Teacher
    from mega_kws_tools.teacher.head import load_head
    torch.set_num_threads(args.threads)
    model, ck = load_head(args.head)
    logits = window_logits(StepEmbedder(Teacher.load(args.teacher)), model, audio)
    write(args.out, audio, logits, ck["labels"], source, args.wav)
    top = np.bincount(logits.argmax(axis=1), minlength=len(ck["labels"]))
    print(f"wrote {args.out}: {len(audio)} windows of {len(args.wav)} recording(s); the teacher's answers: "
          + ", ".join(f"{l} {c}" for l, c in zip(ck["labels"], top) if c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
