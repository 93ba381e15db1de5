# SPDX-License-Identifier: Apache-2.0
"""The new head on the frozen backbone, and its detection defaults.

The head has the bundled model's shape (its classifier layer, started from the
bundled one, and a new projection onto the new labels), trained on the cached
window embeddings with every class drawn equally often. The defaults: per
keyword the lowest threshold (not below 0.5) whose false alarms on the held-out
share of the keyword-free speech stay under the limit, at the smoothing that
finds the most tuning-voice keywords; the rules are the runtime's detector's
(evaluation/streamscore.py).
"""

import copy

import numpy as np
import torch
import torch.nn.functional as F

from mega_kws_tools.evaluation import streamscore
from mega_kws_tools.evaluation.tune_detection import MIN_DEFAULT, THRESHOLDS

REFRACTORY_MS = 1000


def new_model(backbone, n_classes: int):
    """A copy of the backbone with a fresh projection onto n_classes (the
    classifier layer kept as the starting point)."""
    model = copy.deepcopy(backbone)
    model.cfg = copy.deepcopy(backbone.cfg)
    model.cfg.n_classes = n_classes
    model.sentence_projection_layer = torch.nn.Linear(model.cfg.classifier_dim, n_classes, bias=False)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def head_parameters(model):
    params = [p for layer in model.classifier for p in layer.parameters()]
    return params + list(model.sentence_projection_layer.parameters())


def train_head(model, emb: np.ndarray, y: np.ndarray, weights: np.ndarray, steps: int, seed: int,
               progress=None, batch: int = 256, lr: float = 2e-3):
    """Adam on the head only; examples drawn with probability ∝ weights (each
    class's weights sum to the same, so every class is heard equally often)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    params = head_parameters(model)
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=1e-3)
    x_all, y_all = torch.from_numpy(emb), torch.from_numpy(y)
    p_draw = weights / weights.sum()

    def loss():
        idx = rng.choice(len(y), size=batch, p=p_draw)
        x = x_all[idx] + 0.02 * torch.randn(batch, emb.shape[1])  # a little noise on the embedding
        return F.cross_entropy(model.head(x), y_all[idx], label_smoothing=0.05)
    optimize(opt, lr, steps, loss, progress)
    for p in params:
        p.requires_grad_(False)
    return model


def optimize(opt, lr: float, steps: int, loss, progress=None):
    """`steps` steps of opt on loss() (a fresh batch each), the learning rate
    held at lr for the first half, then falling linearly to 0."""
    for step in range(steps):
        value = loss()
        opt.zero_grad()
        value.backward()
        for g in opt.param_groups:
            g["lr"] = lr * min(1.0, 2.0 * (1 - step / steps))
        opt.step()
        if progress and (step % 20 == 0 or step == steps - 1):
            progress(step + 1)


def posteriors(model, emb: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return torch.softmax(model.head(torch.from_numpy(emb)).double(), dim=-1).numpy()


def balanced_weights(y: np.ndarray, n_classes: int, weight=None) -> np.ndarray:
    """Per-example draw weights, each class's summing to 1: within a class in
    proportion to `weight` (per example, positive; default all equal)."""
    weight = np.ones(len(y)) if weight is None else np.asarray(weight, np.float64)
    w = np.zeros(len(y))
    for c in range(n_classes):
        k = y == c
        if k.any():
            w[k] = weight[k] / weight[k].sum()
    return w


def _detections(probs, label, threshold, smoothing, warmup, refractory_hops):
    th = np.full(probs.shape[1], 1.01)
    th[label] = threshold
    can_fire = np.zeros(probs.shape[1], bool)
    can_fire[label] = True
    return streamscore.detect(probs, th, smoothing, refractory_hops, can_fire, warmup)


def keyword_recall(sources, label, threshold, smoothing, warmup, refractory_hops) -> float:
    """The mean over the sources that have any (the tuning voice, the user's
    recordings) of the share of sequences (each a stream with a word of
    `label` at its end) in which the detector fires `label`."""
    shares = [sum(bool(_detections(p, label, threshold, smoothing, warmup, refractory_hops)) for p in seqs)
              / len(seqs) for seqs in sources if seqs]
    return float(np.mean(shares)) if shares else 0.0


def false_alarms(free_probs, label, threshold, smoothing, refractory_hops) -> int:
    """Detections of `label` in keyword-free pieces (each piece a stream past its warm-up)."""
    return sum(len(_detections(p, label, threshold, smoothing, 0, refractory_hops)) for p in free_probs)


def tune(seq_probs, free_probs, free_hours, keyword_ids, hop_s, warmup, max_fa_per_hour):
    """{'thresholds': per label, 'smoothing_hops', 'refractory_ms'} and the
    tuning figures {label: (recall, false alarms per hour)} at that setting."""
    refr = int(np.ceil(REFRACTORY_MS / 1000 / hop_s - 1e-9))
    limit = max_fa_per_hour * free_hours / max(1, len(keyword_ids))  # each keyword its share
    best = None
    candidates = [t for t in THRESHOLDS if t >= MIN_DEFAULT] + [0.999]
    for smoothing in range(1, 7):
        ths, figs = [], []
        for k in keyword_ids:
            chosen = (0.999, None)
            for t in sorted(candidates):  # lowest threshold under the limit: the most recall
                fa = false_alarms(free_probs, k, t, smoothing, refr) if free_hours else 0
                if fa <= limit:
                    chosen = (t, fa)
                    break
            t, fa = chosen
            fa = fa if fa is not None else false_alarms(free_probs, k, t, smoothing, refr)
            ths.append(t)
            figs.append((keyword_recall(seq_probs[k], k, t, smoothing, warmup, refr),
                         fa / free_hours if free_hours else float("nan")))
        score = float(np.mean([r for r, _ in figs]))
        if best is None or score > best[0]:
            best = (score, smoothing, ths, figs)
    _, smoothing, ths, figs = best
    return smoothing, dict(zip(keyword_ids, ths)), dict(zip(keyword_ids, figs))
