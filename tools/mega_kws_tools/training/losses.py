# SPDX-License-Identifier: Apache-2.0
"""Loss terms beyond cross-entropy: mixup (--mixup-prob) and the consistency of
two views (--consistency)."""

import math

import numpy as np
import torch
import torch.nn.functional as F


def js_divergence(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Mean Jensen-Shannon divergence between the softmax of two (B, C) logit
    tensors: KL of each to their mixture, halved; 0 where they agree, at most ln 2."""
    pa, pb = F.log_softmax(a, dim=1), F.log_softmax(b, dim=1)
    mix = torch.logsumexp(torch.stack([pa, pb]), dim=0) - math.log(2.0)
    return 0.5 * ((pa.exp() * (pa - mix)).sum(dim=1) + (pb.exp() * (pb - mix)).sum(dim=1)).mean()


def mixup(x: torch.Tensor, y: torch.Tensor, rng: np.random.Generator, prob: float, alpha: float):
    """--mixup-prob: each clip of the batch, with probability prob, becomes
    lam * itself + (1 - lam) * another clip of the batch (a random pairing;
    rarely itself), lam ~ Beta(alpha, alpha) folded to at least 0.5 so that
    its own label keeps the larger share; the others keep lam = 1. Returns the
    mixed batch, each clip's partner's label and lam (for mixup_loss)."""
    b = len(y)
    partner = torch.from_numpy(rng.permutation(b))
    lam = rng.beta(alpha, alpha, size=b)
    lam = np.where(rng.random(b) < prob, np.maximum(lam, 1.0 - lam), 1.0)
    lam = torch.from_numpy(lam.astype(np.float32))
    mixed = lam[:, None] * x + (1.0 - lam[:, None]) * x[partner]
    return mixed, y[partner], lam


def mixup_loss(logits: torch.Tensor, y: torch.Tensor, partner_y: torch.Tensor, lam: torch.Tensor,
               label_smoothing: float) -> torch.Tensor:
    """Cross-entropy against the mixed targets: lam of the clip's own label and
    1 - lam of its partner's, each smoothed as in the unmixed loss."""
    own = F.cross_entropy(logits, y, label_smoothing=label_smoothing, reduction="none")
    other = F.cross_entropy(logits, partner_y, label_smoothing=label_smoothing, reduction="none")
    return (lam * own + (1.0 - lam) * other).mean()


def keyword_js_divergence(a: torch.Tensor, b: torch.Tensor, y: torch.Tensor, keywords: torch.Tensor) -> torch.Tensor:
    """js_divergence over the keyword clips of y only (y holds one label per row;
    keywords is a bool mask over the classes), of the two views' softmax over the
    keyword columns alone, renormalized: the views must agree on which keyword it
    is, while how sure they are that it is a keyword at all is left to the
    cross-entropy. 0 if the batch has no keyword clip."""
    rows = keywords[y]
    if not bool(rows.any()):
        return a.new_zeros(())
    return js_divergence(a[rows][:, keywords], b[rows][:, keywords])
