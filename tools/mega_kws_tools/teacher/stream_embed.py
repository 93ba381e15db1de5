# SPDX-License-Identifier: Apache-2.0
"""The teacher's embeddings as a stream gets them (candidate (b) of issue 83
item 4: the embedding as the model's front end; teacher.student on top).

The melspectrogram graph floors its dB values 80 under the maximum of
whatever audio it is given. A stream cannot see its future, so the runtime's
front end (kernels/cpu/teacher_frontend.h) floors each step's 8 new frames
under their own maximum, as openWakeWord's streaming loop does (it runs the
graph on each 80 ms chunk). StepFloorEmbedder does the same in PyTorch: group
g is frames [8g, 8g + 8), samples [1280 g, 1280 g + 1632), floored alone; an
embedding is the embedding graph over 76 frames every 8 (StepEmbedder's one
pass), so embedding k needs groups k..k + 9 whole: it comes out once
EMIT_SAMPLES + 1280 k samples are in. The floor matters: on the real
recordings a third of the mel values sit on it, and a floor taken over 8 s
instead moved embeddings by 3.5 of their range of 73.

Clip caches (`clips`, embed_cache's format and clips, written anew): each
clip placed as embed_cache places it (after a second of zeros, ending at
2 s), with zeros after it so that the 16 steps ending at 2 s come out
(the stream after a clip that ends in silence).

Usage (from the repository root, PYTHONPATH=tools):
  python3 -m mega_kws_tools.teacher.stream_embed recordings --out FOLDER REC.wav [...] [--teacher DIR]
      FOLDER/REC.npy: [K, 96] float32, one per 80 ms step
  python3 -m mega_kws_tools.teacher.stream_embed clips --like CACHE --data DIR --out CACHE2 [--teacher DIR]
      the clips of an embed_cache cache (same paths), embedded with the step floor
  python3 -m mega_kws_tools.teacher.stream_embed clips --split SPLIT [--max-per-folder N --seed S] --data DIR
      --out CACHE2
      the clips embed_cache would choose with the same options, without making its cache first
"""

import argparse
import glob
import os
import time

import numpy as np

from mega_kws_tools.teacher.features import HOP, N_FFT, STEP_FRAMES, WINDOW_FRAMES

SAMPLES_PER_STEP = STEP_FRAMES * HOP  # 1280
GROUP_SPAN = (STEP_FRAMES - 1) * HOP + N_FFT  # 1632: the samples one group of 8 frames reads
HISTORY_GROUPS = -(-WINDOW_FRAMES // STEP_FRAMES)  # 10 groups hold a 76-frame window
EMIT_SAMPLES = (HISTORY_GROUPS - 1) * SAMPLES_PER_STEP + GROUP_SPAN  # 13152: embedding 0 is out
BLOCK_STEPS = 250  # 20 s of steps per pass over a recording


def n_groups(n_samples: int) -> int:
    return max(0, (n_samples - GROUP_SPAN) // SAMPLES_PER_STEP + 1)


def n_steps(n_samples: int) -> int:
    """Embeddings a stream of n_samples gives (teacher_frontend's offline_embeddings, step floor)."""
    return max(0, n_groups(n_samples) - (HISTORY_GROUPS - 1))


class StepFloorEmbedder:
    """audio [B, N] (int16 values as float, torch) -> [B, n_steps(N), 96], each step's frames floored alone."""

    def __init__(self, teacher):
        from mega_kws_tools.teacher.embed_cache import StepEmbedder
        self.teacher, self.convs = teacher, StepEmbedder(teacher).convs

    def mel(self, audio):
        """[B, N] -> scaled mel frames [B, 8 n_groups(N), 32]."""
        b, g = audio.shape[0], n_groups(audio.shape[1])
        groups = audio.unfold(1, GROUP_SPAN, SAMPLES_PER_STEP)[:, :g]  # [B, G, 1632]
        mel = self.teacher.melspectrogram(groups.reshape(b * g, GROUP_SPAN))  # each group its own floor
        return mel.reshape(b, g * STEP_FRAMES, -1)

    def embed_frames(self, mel):
        """Scaled mel frames [B, T, 32] -> [B, (T - 76) // 8 + 1, 96] (the embedding graph, one pass)."""
        return self.convs(mel[:, None])[..., 0].transpose(1, 2)

    def __call__(self, audio):
        return self.embed_frames(self.mel(audio))


def recording_embeddings(embedder, samples: np.ndarray, block_steps: int = BLOCK_STEPS, log=None):
    """A whole recording (int16 [N]) -> [n_steps(N), 96] float32, in blocks of steps (bounded memory;
    the same values as one pass: each group's floor is its own)."""
    import torch
    total, parts, t0 = n_steps(len(samples)), [], time.time()
    for k0 in range(0, total, block_steps):
        k1 = min(total, k0 + block_steps)
        a, b = k0 * SAMPLES_PER_STEP, (k1 - 1) * SAMPLES_PER_STEP + EMIT_SAMPLES
        with torch.no_grad():
            e = embedder(torch.from_numpy(samples[a:b].astype(np.float32))[None])[0]
        if e.shape[0] != k1 - k0:
            raise ValueError(f"steps {k0}-{k1}: the embedder gave {e.shape[0]}")
        parts.append(e.numpy().astype(np.float32))
        if log and (k1 == total or len(parts) % 40 == 0):
            log(f"  {k1}/{total} steps, {time.time() - t0:.0f} s", flush=True)
    return np.concatenate(parts) if parts else np.zeros((0, 96), np.float32)


def embed_recordings(embedder, wavs, out, log=print):
    from mega_kws_tools.audio import read_wav
    os.makedirs(out, exist_ok=True)
    for wav in wavs:
        path = os.path.join(out, os.path.splitext(os.path.basename(wav))[0] + ".npy")
        if os.path.exists(path):
            continue
        log(f"{wav} -> {path}", flush=True)
        emb = recording_embeddings(embedder, read_wav(wav), log=log)
        np.save(path[:-4] + ".part.npy", emb)
        os.replace(path[:-4] + ".part.npy", path)


def clip_embed(embedder):
    """embed_cache's embed function (placed clips [B, 2 s] -> [B, 16, 96]) with the step floor."""
    import torch
    from mega_kws_tools.teacher.embed_cache import CONTEXT_SAMPLES, N_STEPS
    pad = (N_STEPS - 1) * SAMPLES_PER_STEP + EMIT_SAMPLES - CONTEXT_SAMPLES  # 352: zeros for the last step

    def embed(audio):
        return embedder(torch.nn.functional.pad(audio, (0, pad)))
    return embed


def cached_rels(cache):
    """The clips of an embed_cache cache, in its order."""
    paths = sorted(p for p in glob.glob(os.path.join(cache, "shard-*.npz")) if not p.endswith(".part.npz"))
    return [str(r) for p in paths for r in np.load(p)["rel"]]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("recordings", help="a whole recording's embeddings")
    r.add_argument("wavs", nargs="+", help="16 kHz mono WAV files")
    c = sub.add_parser("clips", help="an embed_cache cache's clips, with the step floor")
    which = c.add_mutually_exclusive_group(required=True)
    which.add_argument("--like", help="the cache whose clips to embed")
    which.add_argument("--split", choices=["training", "validation", "testing"],
                       help="or the clips of a split, chosen as embed_cache chooses them")
    c.add_argument("--max-per-folder", type=int, default=0,
                   help="with --split: at most N clips of each folder (0: all)")
    c.add_argument("--seed", type=int, default=0, help="with --split: the draw of --max-per-folder")
    c.add_argument("--data", required=True, help="the data folder its paths are relative to")
    c.add_argument("--batch", type=int, default=32)
    for p in (r, c):
        p.add_argument("--out", required=True)
        p.add_argument("--teacher", default=os.path.join("work", "teacher"), help="the ONNX files (teacher.fetch)")
        p.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import torch
    from mega_kws_tools.teacher.features import Teacher
    torch.set_num_threads(args.threads)
    embedder = StepFloorEmbedder(Teacher.load(args.teacher))
    if args.command == "recordings":
        embed_recordings(embedder, args.wavs, args.out)
        return
    from mega_kws_tools.teacher.embed_cache import embed_clips, split_clips
    rels = cached_rels(args.like) if args.like else split_clips(args.data, args.split, args.max_per_folder, args.seed)
    if not rels:
        raise SystemExit(f"stream_embed: no clips to embed ({args.like or args.data + ' ' + args.split})")
    n = embed_clips(clip_embed(embedder), args.data, rels, args.out, args.batch)
    print(f"done: {len(rels)} clips, {n} new shard(s) in {args.out}")


if __name__ == "__main__":
    main()
