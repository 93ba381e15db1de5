# SPDX-License-Identifier: Apache-2.0
"""How much of a new voice's errors its own normalization statistics would undo (analysis only).

The model's BatchNorm layers normalize with statistics of the training batches. This
tool re-estimates them, layer by layer, on the clips of one voice (AdaBN: all of that
voice's clips, whatever their label, so no label is used), blends them with the trained
ones (--alphas: 0 is the model as trained, 1 the voice's own statistics alone) and
classifies that voice's clips with them; real speakers are one group (--real-groups
speaker: one each, as a live session would adapt to its one user); groups without
speech (`_silence_`, by noise type) keep the trained statistics. Clips are read as
train.py's evaluation reads them (a context second, then the clip; the same seed).

It measures an upper bound on what adapting to a voice could give: the runtime
classifies each clip on its own, and the recordings mix voices, so nothing here is
built into a model or the runtime. Only training and validation clips are read.

  voice_norm_check.py CKPT --data DIR [--extra-data REAL_DIR] [--alphas 0,0.5,1] [--layers 0,1]
"""

import argparse
import sys

import numpy as np
import torch

from mega_kws_tools.augment.batch import make_batch
from mega_kws_tools.convert.loading import load_model
from mega_kws_tools.data.dataset import Dataset
from mega_kws_tools.data.layout import KEYWORDS, SILENCE, UNKNOWN
from mega_kws_tools.evaluation.evaluate import rejection_tradeoff


def batchnorms(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm1d)]


def window_logits(model, x, batch=256):
    with torch.no_grad():
        return torch.cat([model.window_logits(x[i:i + batch]) for i in range(0, len(x), batch)])


def adapted_logits(model, x, norms, alpha, batch=128):
    """model.window_logits(x) with each BatchNorm of `norms` normalizing by
    alpha * (statistics of x, estimated layer by layer) + (1 - alpha) * (its trained ones).
    The model is left as it came (eval mode, trained statistics)."""
    model.eval()
    saved = [(m.running_mean.clone(), m.running_var.clone(), m.momentum) for m in norms]
    try:
        if alpha > 0:
            for m in norms:
                m.reset_running_stats()
                m.momentum = None  # a cumulative average over the batches below
                m.train()
            with torch.no_grad():
                for i in range(0, len(x), batch):
                    model.features(x[i:i + batch])
            for m, (mean, var, _) in zip(norms, saved):
                m.running_mean.mul_(alpha).add_((1 - alpha) * mean)
                m.running_var.mul_(alpha).add_((1 - alpha) * var)
                m.eval()
        return window_logits(model, x)
    finally:
        for m, (mean, var, momentum) in zip(norms, saved):
            m.running_mean.copy_(mean)
            m.running_var.copy_(var)
            m.momentum = momentum
            m.eval()


def groups_of(ds, real_groups="pooled"):
    """One group per voice; all real speakers one group ("real:"), or with real_groups "speaker" one
    group each ("real:<speaker>"); "" (no voice: noise)."""
    def group(v):
        if not v.startswith("speaker:"):
            return v
        return "real:" + (v.split(":", 1)[1] if real_groups == "speaker" else "")
    return np.array([group(v) for v in ds.voice], dtype=object)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", metavar="CKPT", help="a training checkpoint or a .mega file")
    ap.add_argument("--data", required=True, help="Speech Commands-layout folder with a manifest.csv")
    ap.add_argument("--extra-data", action="append", default=[], metavar="DIR", help="real clips (one group)")
    ap.add_argument("--split", default="validation", choices=["training", "validation"])
    ap.add_argument("--real-groups", default="pooled", choices=["pooled", "speaker"],
                    help="real clips adapted as one group (default) or speaker by speaker")
    ap.add_argument("--alphas", default="0,0.5,1", help="blends of the voice's own statistics (default 0,0.5,1)")
    ap.add_argument("--layers", default="", help="indices of the BatchNorms adapted (default: all)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    try:
        alphas = [float(a) for a in args.alphas.split(",")]
    except ValueError:
        ap.error(f"--alphas {args.alphas}: expected numbers separated by commas")
    if not all(0 <= a <= 1 for a in alphas):
        ap.error(f"--alphas {args.alphas}: each between 0 and 1")
    torch.set_num_threads(args.threads)
    model = load_model(args.checkpoint)[0].eval()
    norms = batchnorms(model)
    if not norms:
        print(f"voice_norm_check.py: {args.checkpoint}: the model has no BatchNorm", file=sys.stderr)
        return 1
    if args.layers:
        try:
            norms = [norms[int(i)] for i in args.layers.split(",")]
        except (ValueError, IndexError):
            ap.error(f"--layers {args.layers}: indices 0-{len(norms) - 1} separated by commas")
    ds = Dataset(args.data, "kws12", args.split)
    for d in args.extra_data:
        ds.extend(Dataset(d, "kws12", args.split))
    x, y = make_batch(ds, np.arange(len(ds)), np.random.default_rng(123), train=False)
    y = y.numpy()
    group = groups_of(ds, args.real_groups)
    k, unk, silence = len(KEYWORDS), ds.labels.index(UNKNOWN), ds.labels.index(SILENCE)
    keyword = y < k
    real = np.array([g.startswith("real:") for g in group])
    print(f"{len(ds)} clips of {len(set(group[y != silence]) - {''})} voice groups; "
          f"{len(norms)} BatchNorms adapted", flush=True)
    for alpha in alphas:
        z = torch.zeros(len(ds), len(ds.labels))
        for g in sorted(set(group)):
            idx = np.nonzero(group == g)[0]
            speech = g and (y[idx] != silence).any()
            z[idx] = adapted_logits(model, x[idx], norms, alpha if speech else 0.0)
        pred = z.argmax(1).numpy()
        parts = []
        for name, m in (("voices", ~real), ("real", real)):
            if not (m & keyword).any():
                continue
            trade = rejection_tradeoff(z[m].numpy(), y[m], ds.labels)
            parts.append(f"{name}: keywords {np.mean(pred[m & keyword] == y[m & keyword]):.4f}, "
                         f"-> _unknown_ {np.mean(pred[m & keyword] == unk):.4f}, "
                         f"_unknown_ rejected {np.mean(pred[m & (y == unk)] >= k):.4f}; at rejection "
                         + " ".join(f"{lv} {v['keyword_accuracy']:.4f}" for lv, v in trade.items() if v))
        print(f"alpha {alpha:g}\n  " + "\n  ".join(parts), flush=True)
        per = [(g.split(":")[-1], np.mean(pred[(group == g) & keyword] == y[(group == g) & keyword]))
               for g in sorted(set(group)) if g and not g.startswith("real:") and ((group == g) & keyword).any()]
        print("  per voice: " + ", ".join(f"{g} {a:.3f}" for g, a in per), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
