#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""How much of the voice a model's window embedding still tells: a linear probe.

  voice_probe.py --data DIR [--extra-data REAL_DIR] CKPT [CKPT ...] [--clips N] [--seed S]

For each checkpoint (a training checkpoint or a .mega file), the window embedding
that the keyword head reads (MegaKWS.window_embedding) is computed for N clips of
the *training* split (no augmentation; a clip in silence as its context), drawn
the same for every checkpoint. A linear classifier is fitted on a random half of
the clips to name the voice group (train.py's voice_targets: one class per voice
group, all real speakers one class) and scored on the other half. The same is
done for the keyword: a probe that reads the keyword well and the voice badly is
what --voice-adversary aims at. Chance is printed beside it (the most common
class).

Training voices only, so that the probe meets every voice on both halves: this
measures what the embedding carries, not how the model does on new voices
(evaluate.py does that, on the validation voices).
"""

import argparse
import sys


import numpy as np
import torch
import torch.nn.functional as F

from mega_kws_tools.audio import SR
from mega_kws_tools.augment.batch import make_batch
from mega_kws_tools.convert.loading import load_model
from mega_kws_tools.data.dataset import Dataset, voice_targets
from mega_kws_tools.data.layout import KEYWORDS


def embeddings(model, ds, idx, batch=64):
    model.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(idx), batch):
            x, _ = make_batch(ds, idx[s:s + batch], np.random.default_rng(0), train=False)
            x[:, :SR] = 0.0  # the same silent context for every clip
            out.append(model.window_embedding(x))
    return torch.cat(out)


def probe_accuracy(z: torch.Tensor, target: np.ndarray, steps: int = 300) -> float:
    """A linear classifier (standardized inputs, L2 1e-3) fitted by L-BFGS on a random
    half of the rows (the same half for the same number of rows), its accuracy on the other half."""
    t = torch.from_numpy(target)
    order = torch.from_numpy(np.random.default_rng(0).permutation(len(t)))
    fit, test = order[: len(t) // 2], order[len(t) // 2:]
    mean, std = z[fit].mean(0), z[fit].std(0) + 1e-6
    zs = (z - mean) / std
    n = int(t.max()) + 1
    w = torch.zeros(z.shape[1], n, requires_grad=True)
    b = torch.zeros(n, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(zs[fit] @ w + b, t[fit]) + 1e-3 * (w ** 2).sum()
        loss.backward()
        return loss
    opt.step(closure)
    with torch.no_grad():
        return float(((zs[test] @ w + b).argmax(1) == t[test]).float().mean())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoints", nargs="+", metavar="CKPT")
    ap.add_argument("--data", required=True, help="Speech Commands-layout folder with a manifest.csv")
    ap.add_argument("--extra-data", action="append", default=[], metavar="DIR",
                    help="real clips (their speakers are the one class 'real'), as train.py takes them")
    ap.add_argument("--clips", type=int, default=4000, help="clips drawn (default 4000)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    ds = Dataset(args.data, "kws12", "training")
    for d in args.extra_data:
        ds.extend(Dataset(d, "kws12", "training"))
    names, voice = voice_targets(ds)
    keyword = ds.y < len(KEYWORDS)
    pool = np.nonzero((voice >= 0) & keyword)[0]
    idx = np.sort(np.random.default_rng(args.seed).choice(pool, size=min(args.clips, len(pool)), replace=False))
    v, k = voice[idx], ds.y[idx]
    print(f"{len(idx)} keyword clips of {len(set(v.tolist()))} voice classes (training split); chance: voice "
          f"{np.bincount(v).max() / len(v):.3f}, keyword {np.bincount(k).max() / len(k):.3f}")
    for path in args.checkpoints:
        model, labels = load_model(path)
        if labels != ds.labels:
            print(f"voice_probe.py: {path} has labels {labels}, not {ds.labels}", file=sys.stderr)
            return 1
        z = embeddings(model, ds, idx)
        print(f"{path}: voice {probe_accuracy(z, v):.3f}, keyword {probe_accuracy(z, k):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
