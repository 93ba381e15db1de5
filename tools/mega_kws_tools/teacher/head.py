# SPDX-License-Identifier: Apache-2.0
"""A classifier head over the teacher's frozen embeddings (issue 83, item 3):
does the teacher know more about real people than the Mega model?

openWakeWord-style: the 16 embedding steps of a clip (embed_cache) flattened
to 1,536 values -> 128 -> 128 -> the demo model's 12 labels, each hidden layer
Linear, LayerNorm, ReLU, dropout. Trained with AdamW on cached embeddings,
batches drawn class-balanced (each label equally often), so the few real
on/off/go clips weigh as much as the thousands of other words (--unknown-share:
_unknown_ a fixed share of each batch instead).

The checkpoint kept (RUN/best.pt) is the one with the best validation key:
the mean, over the labels that have validation clips, of the share of that
label's clips classified right, pooled over every --val cache. Give only
caches of real validation speakers as --val; the speakers of --train never
choose anything.

Usage (from the repository root, PYTHONPATH=tools):
  python3 -m mega_kws_tools.teacher.head train --train CACHE [--train CACHE ...] --val CACHE [...]
         --out RUN [--steps 3000] [--batch 256] [--lr 1e-3] [--seed 83] [--unknown-share P]
  python3 -m mega_kws_tools.teacher.head eval --checkpoint RUN/best.pt --cache CACHE [--cache ...] [--json-out F]
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

from mega_kws_tools.data.layout import KEYWORDS, SILENCE, UNKNOWN, folder_label
from mega_kws_tools.evaluation.evaluate import rejection_tradeoff
from mega_kws_tools.teacher.embed_cache import N_STEPS, load_cache

LABELS = KEYWORDS + [SILENCE, UNKNOWN]  # the order of models/sc10-demo.mega (keyword_spotter info)
N_EMBEDDING = 96


class Head(torch.nn.Module):
    """embeddings [B, 16, 96] -> logits [B, n_labels]."""

    def __init__(self, n_labels: int = len(LABELS), width: int = 128, dropout: float = 0.3):
        super().__init__()
        layers, n_in = [torch.nn.Flatten()], N_STEPS * N_EMBEDDING
        for _ in range(2):
            layers += [torch.nn.Linear(n_in, width), torch.nn.LayerNorm(width), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
            n_in = width
        self.net = torch.nn.Sequential(*layers, torch.nn.Linear(width, n_labels))

    def forward(self, x):
        return self.net(x)


def labelled(emb, folders, labels=LABELS):
    """(embeddings, label indices) of the clips whose folder maps to one of `labels`
    (data.layout.folder_label: a keyword, _silence_, or any other word as _unknown_)."""
    idx = {l: i for i, l in enumerate(labels)}
    keep = [i for i, f in enumerate(folders) if folder_label(str(f), idx) is not None]
    y = np.array([idx[folder_label(str(folders[i]), idx)] for i in keep], dtype=np.int64)
    return emb[keep], y


def load_sets(caches, labels=LABELS):
    """The labelled embeddings of several cache folders, concatenated."""
    parts = [labelled(*load_cache(c)[:2], labels) for c in caches]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def predict(model, x, batch: int = 1024):
    """Logits [N, n_labels] of embeddings x [N, 16, 96] (numpy), in eval mode."""
    model.eval()
    with torch.no_grad():
        out = [model(torch.from_numpy(x[i:i + batch])) for i in range(0, len(x), batch)]
    return torch.cat(out).numpy() if out else np.zeros((0, len(LABELS)), np.float32)


def scores(pred, truth, labels=LABELS):
    """evaluate.py's clip figures from predicted and true label indices: the confusion
    matrix, each label's share right, keywords right, and each non-keyword label's share
    classified as any non-keyword label (rejected)."""
    n = len(labels)
    conf = np.zeros((n, n), dtype=np.int64)
    np.add.at(conf, (np.asarray(truth), np.asarray(pred)), 1)
    kw = [i for i, l in enumerate(labels) if not l.startswith("_")]
    other = [i for i, l in enumerate(labels) if l.startswith("_")]
    rows = conf.sum(axis=1)
    return {"clips": int(conf.sum()), "labels": list(labels), "confusion": conf.tolist(),
            "per_label": {l: float(conf[i, i] / rows[i]) for i, l in enumerate(labels) if rows[i]},
            "label_clips": {l: int(rows[i]) for i, l in enumerate(labels) if rows[i]},
            "keyword_accuracy": float(sum(conf[i, i] for i in kw) / max(1, rows[kw].sum())),
            "keyword_clips": int(rows[kw].sum()),
            "rejected": {labels[i]: float(conf[i, other].sum() / rows[i]) for i in other if rows[i]}}


def selection_key(result):
    """The mean of the per-label shares right: every label with validation clips counts the same."""
    return float(np.mean(list(result["per_label"].values())))


def balanced_draw(y, n_labels, rng, batch, unknown_share=0.0):
    """`batch` indices into y, each label equally likely (labels without clips never drawn); with
    unknown_share > 0, _unknown_ (the last label) that share of the draws and the others the rest."""
    counts = np.bincount(y, minlength=n_labels)
    share = (counts > 0).astype(np.float64)
    if unknown_share > 0 and counts[-1]:
        share[-1] = 0
        share *= (1 - unknown_share) / share.sum()
        share[-1] = unknown_share
    p = share[y] / counts[y]
    return rng.choice(len(y), batch, p=p / p.sum())


def train(x, y, val_x, val_y, out, steps=3000, batch=256, lr=1e-3, weight_decay=1e-2, seed=83, width=128,
          dropout=0.3, eval_every=100, unknown_share=0.0, log=print):
    """Trains a Head; writes out/best.pt (the best validation key) and out/history.json.
    Returns the best checkpoint's dict."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = Head(len(LABELS), width, dropout)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def draw():
        i = torch.from_numpy(balanced_draw(y, len(LABELS), rng, batch, unknown_share))
        return xt[i], yt[i]
    return fit(model, draw, lambda: predict(model, val_x), val_y, out, steps, lr, weight_decay, eval_every, log,
               lambda: {"labels": LABELS, "config": {"width": width, "dropout": dropout, "seed": seed, "steps": steps,
                                                     "lr": lr, "unknown_share": unknown_share}})


def fit(model, draw, val_logits, val_y, out, steps, lr, weight_decay, eval_every, log, checkpoint):
    """The training loop of a classifier over embeddings: AdamW with a one-cycle schedule on batches
    draw() -> (x, labels), cross-entropy; every eval_every steps the validation key of val_logits()
    (keep_best). out/best.pt: the model's state with checkpoint()'s entries. Returns the kept dict."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    best, history, t0 = None, [], time.time()
    os.makedirs(out, exist_ok=True)
    for step in range(1, steps + 1):
        model.train()
        xb, yb = draw()
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % eval_every and step != steps:
            continue
        best = keep_best(val_logits(), val_y, step, float(loss), best, history, out, t0, log, lambda: dict(
            checkpoint(), state={k: v.clone() for k, v in model.state_dict().items()}))
    return finish(best, history, out, log)


def keep_best(val_logits, val_y, step, loss, best, history, out, t0, log, checkpoint):
    """One evaluation during training: the validation key of val_logits logged and added to history;
    checkpoint() (a dict) with its step and key saved as out/best.pt when the key beats best's.
    Returns the best so far."""
    result = scores(val_logits.argmax(axis=1), val_y)
    key = selection_key(result)
    history.append({"step": step, "loss": loss, "key": key, "keyword_accuracy": result["keyword_accuracy"]})
    log(f"step {step}: loss {loss:.3f}, validation key {key:.4f}, keywords "
        f"{result['keyword_accuracy']:.4f}, {time.time() - t0:.0f} s", flush=True)
    if best is None or key > best["key"]:
        best = dict(checkpoint(), step=step, key=key)
        torch.save(best, os.path.join(out, "best.pt"))
    return best


def finish(best, history, out, log):
    """Writes out/history.json at the end of training; returns the kept checkpoint."""
    with open(os.path.join(out, "history.json"), "w") as f:
        json.dump(history, f, indent=1)
    log(f"kept step {best['step']} (validation key {best['key']:.4f})")
    return best


def train_parser(sub, help_text):
    """The `train` subcommand's parser with its caches and output folder."""
    t = sub.add_parser("train", help=help_text)
    t.add_argument("--train", action="append", required=True, help="a cache folder to train on (repeat)")
    t.add_argument("--val", action="append", required=True, help="a cache of real validation speakers (repeat)")
    t.add_argument("--out", required=True)
    return t


def add_options(parser, table):
    """parser options from (name, type, default) rows, each with its default in its help."""
    for name, kind, default in table:
        parser.add_argument(f"--{name}", type=kind, default=default, help=f"default {default}")


def load_head(path):
    ck = torch.load(path, map_location="cpu", weights_only=False)
    model = Head(len(ck["labels"]), ck["config"]["width"], ck["config"]["dropout"])
    model.load_state_dict(ck["state"])
    return model.eval(), ck


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    t = train_parser(sub, "train a head on cached embeddings")
    add_options(t, (("steps", int, 3000), ("batch", int, 256), ("lr", float, 1e-3), ("seed", int, 83),
                    ("width", int, 128), ("dropout", float, 0.3), ("eval-every", int, 100), ("threads", int, 1),
                    ("unknown-share", float, 0.0)))
    e = sub.add_parser("eval", help="a kept head's figures on one cache")
    e.add_argument("--checkpoint", required=True)
    e.add_argument("--cache", action="append", required=True, help="a cache folder; several are pooled")
    e.add_argument("--json-out")
    args = ap.parse_args(argv)
    if args.command == "train":
        torch.set_num_threads(args.threads)
        x, y = load_sets(args.train)
        vx, vy = load_sets(args.val)
        print(f"training on {len(y)} clips ({dict(zip(LABELS, np.bincount(y, minlength=len(LABELS)).tolist()))}), "
              f"validating on {len(vy)}", flush=True)
        train(x, y, vx, vy, args.out, args.steps, args.batch, args.lr, seed=args.seed, width=args.width,
              dropout=args.dropout, eval_every=args.eval_every, unknown_share=args.unknown_share)
        return
    model, ck = load_head(args.checkpoint)
    x, y = load_sets(args.cache, ck["labels"])
    if not len(y):
        sys.exit(f"head eval: {args.cache} has no clips of the head's labels")
    logits = predict(model, x)
    result = scores(logits.argmax(axis=1), y, ck["labels"])
    # evaluate.py's analysis at equal rejection: a bias on the _unknown_ logit, no model change
    result["keywords_at_rejection"] = rejection_tradeoff(logits.tolist(), y.tolist(), list(ck["labels"]))
    print(json.dumps({k: result[k] for k in ("clips", "keyword_accuracy", "per_label", "rejected")}))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
