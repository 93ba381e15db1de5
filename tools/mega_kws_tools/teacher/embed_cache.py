# SPDX-License-Identifier: Apache-2.0
"""The teacher's embeddings of a clip folder, computed once and cached, so a
head over them (teacher.head) trains in seconds (issue 83, item 3).

Each one-second clip is placed at the end of CONTEXT_SAMPLES (2 s) of audio,
after a second of digital silence, so the teacher sees it as openWakeWord's
heads see a word: N_STEPS (16) embedding steps, 1.28 s of steps plus the
melspectrogram's 0.775 s window, ending where the clip ends. The second before
is where a streaming student's earlier audio would be; zeros here, the same for
every clip (the melspectrogram floors them 80 dB under the clip's maximum).

The 16 steps come from one pass of the embedding graph over the whole
melspectrogram (StepEmbedder): its convolutions are unpadded in time and its
pools halve time three times, so the graph is a convolution of stride 8
frames and reach 76, and one pass gives exactly the windows that
openWakeWord's loop cuts every 8 frames, for a sixth of the graph's work
(196 frames instead of 16 x 76; a third of the time with the
melspectrogram). The run
checks that on its first clips against Teacher (the windowed loop).

The cache is a folder of shards (shard-00000.npz, ...), each SHARD clips:
their paths relative to the data folder, their folder names and embeddings
[n, 16, 96] as float16 (a part in 2,000: plenty for a head). A shard already on disk is skipped, so a stopped run
resumes. --max-per-folder keeps the first N clips of each folder of the split
in a fixed random order (seeded), to bound the time on big folders.

Usage (from the repository root, PYTHONPATH=tools):
  python3 -m mega_kws_tools.teacher.embed_cache --data DIR --split training --out CACHE
         [--max-per-folder N] [--seed S] [--teacher work/teacher] [--batch 32] [--threads 1]
"""

import argparse
import dataclasses
import glob
import os
import sys
import time

import numpy as np

from mega_kws_tools.audio import SR, read_wav
from mega_kws_tools.data.layout import NOISE, clip_splits

N_STEPS = 16
CONTEXT_SAMPLES = 2 * SR  # (16 - 1) * 1280 + 12512 = 31712 samples give 16 steps; 2 s gives 16 as well
SHARD = 512


class StepEmbedder:
    """audio [B, N] (int16 values as float) -> [B, n_embeddings(N), 96], the embedding
    graph run once over the whole melspectrogram, its input and output reshapes left out."""

    def __init__(self, teacher):
        from mega_kws_tools.teacher import torch_port
        g = teacher.embedding.graph
        first, last = g.nodes[0], g.nodes[-1]
        if first.op != "Reshape" or last.op != "Reshape":
            raise ValueError("the embedding graph does not start and end with a Reshape")
        inner = dataclasses.replace(g, nodes=g.nodes[1:-1], inputs=[first.outputs[0]], outputs=[last.inputs[0]])
        self.teacher, self.convs = teacher, torch_port.PortedGraph(inner)

    def __call__(self, audio):
        out = self.convs(self.teacher.melspectrogram(audio)[:, None])  # [B, 96, K, 1]
        return out[..., 0].transpose(1, 2)


def check_steps(fast, windowed, audio, tolerance=1e-4):
    """Raises unless fast(audio) equals windowed(audio) within tolerance of the largest value."""
    import torch
    with torch.no_grad():
        a, b = fast(audio), windowed(audio)
    err = float((a - b).abs().max()) if a.shape == b.shape else float("inf")
    if err > tolerance * float(b.abs().max()):
        raise ValueError(f"one-pass embeddings differ from the windowed ones by {err} (shapes {list(a.shape)}, "
                         f"{list(b.shape)})")
    return err


def place(clip: np.ndarray) -> np.ndarray:
    """An int16 clip -> CONTEXT_SAMPLES int16 samples: a second of zeros, then the clip's
    first second (shorter clips padded with zeros after it, as fit_second does)."""
    out = np.zeros(CONTEXT_SAMPLES, dtype=np.int16)
    n = min(SR, len(clip))
    out[CONTEXT_SAMPLES - SR:CONTEXT_SAMPLES - SR + n] = clip[:n]
    return out


def split_clips(data: str, split: str, max_per_folder: int = 0, seed: int = 0):
    """The clips (folder/name.wav) of `split` in `data`, noise folder left out, sorted; at most
    max_per_folder (> 0) of each folder, drawn in a seeded random order."""
    by_folder = {}
    for rel, s in clip_splits(data).items():
        if s == split and not rel.startswith(NOISE + "/"):
            by_folder.setdefault(rel.split("/", 1)[0], []).append(rel)
    rng = np.random.default_rng(seed)
    out = []
    for folder, rels in sorted(by_folder.items()):
        if 0 < max_per_folder < len(rels):
            rels = [rels[i] for i in sorted(rng.choice(len(rels), max_per_folder, replace=False))]
        out += rels
    return out


def embed_clips(embed, data: str, rels, out: str, batch: int = 32, log=print):
    """Writes the shards of `rels` that are not yet in `out`; embed: int16-valued float audio
    [B, CONTEXT_SAMPLES] (torch) -> [B, N_STEPS, 96]. Returns the number of shards written."""
    import torch
    os.makedirs(out, exist_ok=True)
    written, t0 = 0, time.time()
    for first in range(0, len(rels), SHARD):
        path = os.path.join(out, f"shard-{first // SHARD:05d}.npz")
        if os.path.exists(path):
            continue
        part = rels[first:first + SHARD]
        rows = []
        for i in range(0, len(part), batch):
            audio = np.stack([place(read_wav(os.path.join(data, r))) for r in part[i:i + batch]])
            with torch.no_grad():
                e = embed(torch.from_numpy(audio.astype(np.float32)))
            if tuple(e.shape[1:]) != (N_STEPS, 96):
                raise ValueError(f"the embedder gave {list(e.shape)}, not [batch, {N_STEPS}, 96]")
            rows.append(e.numpy().astype(np.float16))
        tmp = path[:-4] + ".part.npz"
        np.savez(tmp, rel=np.array(part), folder=np.array([r.split("/", 1)[0] for r in part]),
                 emb=np.concatenate(rows))
        os.replace(tmp, path)  # a shard is on disk whole or not at all
        written += 1
        log(f"{path}: {first + len(part)}/{len(rels)} clips, {time.time() - t0:.0f} s", flush=True)
    return written


def load_cache(folder: str):
    """(embeddings [N, 16, 96] float32, folder names [N], relative paths [N]) of every shard in `folder`."""
    paths = sorted(glob.glob(os.path.join(folder, "shard-*.npz")))
    paths = [p for p in paths if not p.endswith(".part.npz")]
    if not paths:
        raise FileNotFoundError(f"{folder}: no shard-*.npz (run embed_cache first)")
    parts = [np.load(p) for p in paths]
    return (np.concatenate([p["emb"] for p in parts]).astype(np.float32),
            np.concatenate([p["folder"] for p in parts]), np.concatenate([p["rel"] for p in parts]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="a Speech Commands-layout folder")
    ap.add_argument("--split", required=True, choices=["training", "validation", "testing"],
                    help="testing: only a synthetic set's test voices, a judge (make_sc10 --only-split testing)")
    ap.add_argument("--out", required=True, help="the cache folder (resumable)")
    ap.add_argument("--max-per-folder", type=int, default=0, help="at most N clips of each folder (0: all)")
    ap.add_argument("--seed", type=int, default=0, help="the draw of --max-per-folder")
    ap.add_argument("--teacher", default=os.path.join("work", "teacher"), help="the fetched ONNX files (teacher.fetch)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import torch
    from mega_kws_tools.teacher.features import Teacher
    torch.set_num_threads(args.threads)
    rels = split_clips(args.data, args.split, args.max_per_folder, args.seed)
    if not rels:
        sys.exit(f"embed_cache: {args.data} has no {args.split} clips")
    teacher = Teacher.load(args.teacher)
    fast = StepEmbedder(teacher)
    first = np.stack([place(read_wav(os.path.join(args.data, r))) for r in rels[:2]]).astype(np.float32)
    print(f"one pass against the windowed loop on 2 clips: largest difference "
          f"{check_steps(fast, teacher, torch.from_numpy(first)):.2e}", flush=True)
    n = embed_clips(fast, args.data, rels, args.out, args.batch)
    print(f"done: {len(rels)} clips, {n} new shard(s) in {args.out}")


if __name__ == "__main__":
    main()
