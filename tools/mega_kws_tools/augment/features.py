# SPDX-License-Identifier: Apache-2.0
"""Augmentation inside the model's front end: frequency-warped filters
(--warp-prob) and SpecAugment-style masks (--mask-prob)."""

import numpy as np
import torch


WARP_RANGE = (0.88, 1.14)  # --warp-prob: frequency-warp factors of the front end's filters
RANGE_LIMITS = (0.5, 2.0)  # what --speed-range and --warp-range accept


def warp_filters(weight: torch.Tensor, factor: float) -> torch.Tensor:
    """The (rows, K) patch filters stretched in frequency by `factor` about the
    window centre: w'[n] = factor * w(c + (n - c) * factor), linearly interpolated,
    zero outside the kernel. A filter at f Hz then responds at f * factor Hz with
    about the same gain: the spectrum the model sees is warped by 1 / factor, as a
    shorter or longer vocal tract (and a higher or lower voice) would warp it."""
    k = weight.shape[1]
    c = (k - 1) / 2.0
    pos = c + (torch.arange(k, dtype=weight.dtype) - c) * factor
    lo = pos.floor().long()
    frac = (pos - lo.to(weight.dtype)).unsqueeze(0)
    inside = ((lo >= 0) & (lo + 1 <= k - 1)).to(weight.dtype).unsqueeze(0)
    lo_c, hi_c = lo.clamp(0, k - 1), (lo + 1).clamp(0, k - 1)
    return factor * inside * (weight[:, lo_c] * (1 - frac) + weight[:, hi_c] * frac)


class SpeakerAugment:
    """On-the-fly speaker and SpecAugment-style changes inside the model's front end,
    in training mode only (evaluation and the converted model are untouched):
      * with probability warp_prob per group of examples, the log-power patch filters
        frequency-warped by a factor in warp_range (default WARP_RANGE; vocal-tract-length warping);
      * with probability mask_prob per example, up to two time spans of up to 10 tokens
        (100 ms at the demo model's rate) and up to two bands of up to 1/8 of the feature
        channels replaced by that example's mean feature value."""

    GROUPS = 4

    def __init__(self, model, warp_prob: float, mask_prob: float, rng: np.random.Generator,
                 warp_range=WARP_RANGE):
        self.emb, self.warp_prob, self.mask_prob, self.rng = model.embed_tokens, warp_prob, mask_prob, rng
        self.warp_range = tuple(warp_range)
        self.plain = self.emb.forward
        if warp_prob > 0 and self.emb.features not in ("logpower", "logmel"):
            raise ValueError("--warp-prob needs the log-power or log-mel front end")
        # log-mel: the masks fall on the mel bands, before they are mixed into channels
        self.mask_bands = self.emb.features == "logmel"
        self.emb.forward = self.forward

    def embed(self, s: torch.Tensor, factor: float) -> torch.Tensor:
        emb = self.emb
        if self.mask_bands:
            return emb.log_power(s, None if factor == 1.0 else warp_filters(emb.weight, factor))
        if factor == 1.0:
            return self.plain(s)
        return emb.finish(emb.log_power(s, warp_filters(emb.weight, factor)))

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        if not self.emb.training:
            return self.plain(s)
        rng = self.rng
        parts = []
        for g in torch.arange(s.shape[0]).chunk(self.GROUPS):
            warp = self.warp_prob > 0 and rng.random() < self.warp_prob
            parts.append(self.embed(s[g], float(rng.uniform(*self.warp_range)) if warp else 1.0))
        x = torch.cat(parts)
        if self.mask_prob > 0:
            x = self.mask(x)
        return self.emb.finish(x) if self.mask_bands else x

    def mask(self, x: torch.Tensor) -> torch.Tensor:
        rng = self.rng
        keep = torch.ones_like(x)
        t, d = x.shape[1], x.shape[2]
        for i in range(x.shape[0]):
            if rng.random() >= self.mask_prob:
                continue
            for _ in range(int(rng.integers(1, 3))):
                w = int(rng.integers(1, 11))
                a = int(rng.integers(0, max(1, t - w)))
                keep[i, a:a + w, :] = 0
            for _ in range(int(rng.integers(1, 3))):
                w = int(rng.integers(1, max(2, d // 8) + 1))
                a = int(rng.integers(0, max(1, d - w)))
                keep[i, :, a:a + w] = 0
        fill = x.detach().mean(dim=(1, 2), keepdim=True)
        return x * keep + fill * (1 - keep)
