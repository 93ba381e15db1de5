# SPDX-License-Identifier: Apache-2.0
"""The patch embedding (linear, log-power or log-mel features) and its filterbanks."""

import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


def running_mean(x: torch.Tensor, decay: float, init: torch.Tensor, block: int = 128) -> torch.Tensor:
    """m(t) = m(t-1) + decay * (x(t) - m(t-1)) along dim 1 of x (B, T, D), m(-1) = init (D):
    in blocks of `block` tokens, each one matrix product with the recursion's weights
    (a Python loop over tokens would be far too slow for hour-long recordings)."""
    n = min(block, x.shape[1])
    k = torch.arange(n, dtype=torch.float64)
    lag = k[:, None] - k[None, :]
    keep = 1.0 - decay
    weights = torch.where(lag >= 0, decay * keep ** lag.clamp(min=0), torch.zeros(())).to(x.dtype)  # (n, n)
    carry = (keep ** (k + 1)).to(x.dtype)[:, None]                                                  # (n, 1)
    prev = init.to(x.dtype).expand(x.shape[0], x.shape[2])
    out = []
    for a in range(0, x.shape[1], n):
        t = min(n, x.shape[1] - a)
        m = torch.matmul(weights[:t, :t], x[:, a:a + t]) + carry[:t] * prev[:, None, :]
        out.append(m)
        prev = m[:, -1]
    return torch.cat(out, dim=1)


class PatchEmbedding(nn.Module):
    """Strided causal patch embedding; k = s = 1 is the official x * w + b.

    features "linear": y = conv(x) + bias, D filters of k taps.
    features "logpower": 2D filters; y_j = scale_j * log(a_j^2 + b_j^2 + eps) + bias_j,
    with a_j, b_j the outputs of filters j and D + j (a learnable, quadrature-initialized
    short-time power spectrum, so the level of the input is a shift, not a factor).
    features "logmel": fixed filters at the spectrum bins of a `kernel`-point DFT
    (Hann window), pooled into `bands` triangular mel bands (M, bands x bins) before
    the log, then mixed: y = mix . log(M (a^2 + b^2) + eps) + bias. The bands are
    wide enough to hold several harmonics, so the features follow the spectral
    envelope (the vocal tract) more than the pitch.
    norm "running_mean" (logpower only): the log power less its running mean,
    y_j(t) = scale_j * (p_j(t) - m_j(t)) + bias_j, m_j(t) = m_j(t-1) + decay * (p_j(t) - m_j(t-1)),
    m_j(-1) = norm_init_j (learned): a causal per-channel mean normalization of the
    spectrum (the channel's and, over a word or two, the voice's average colour)."""

    def __init__(self, dim: int, kernel: int, stride: int, features: str = "linear", eps: float = 1e-6,
                 sample_rate: int = 16000, norm: str = "none", norm_decay: float = 0.01, bands: int = 40):
        super().__init__()
        self.kernel, self.stride, self.features, self.eps = kernel, stride, features, eps
        self.norm, self.norm_decay = norm, norm_decay
        if features == "logmel":
            bins = mel_bins(kernel, sample_rate)
            self.register_buffer("weight", quadrature_rows([f for _, f in bins], kernel, sample_rate))
            self.register_buffer("bands", mel_matrix(bands, kernel, sample_rate))
            self.mix = nn.Parameter(torch.randn(dim, bands) / math.sqrt(bands))
            self.bias = nn.Parameter(torch.zeros(dim))
        elif features == "logpower":
            self.weight = nn.Parameter(quadrature_filterbank(dim, kernel, sample_rate))
            self.scale = nn.Parameter(torch.full((dim,), 0.2))
            self.bias = nn.Parameter(torch.zeros(dim))
            if norm == "running_mean":
                self.norm_init = nn.Parameter(torch.zeros(dim))
        else:
            self.weight = nn.Parameter(torch.randn(dim, kernel) / math.sqrt(kernel))
            self.bias = nn.Parameter(torch.randn(dim) * 0.1)

    def log_power(self, s: torch.Tensor, weight: Optional[torch.Tensor] = None) -> torch.Tensor:
        """(B, T) -> (B, T/stride, D): log(a^2 + b^2 + eps) of the 2D filters `weight`
        (default: this embedding's own)."""
        padded = F.pad(s, (self.kernel - self.stride, 0)).unsqueeze(1)  # (B, 1, T + k - s)
        y = F.conv1d(padded, (self.weight if weight is None else weight).unsqueeze(1), None, stride=self.stride)
        a, b = y.chunk(2, dim=1)
        power = (a * a + b * b).transpose(1, 2)
        if self.features == "logmel":
            return torch.log(torch.matmul(power, self.bands.t()) + self.eps)
        return torch.log(power + self.eps)

    def finish(self, power: torch.Tensor) -> torch.Tensor:
        """Log power (B, T, D; logmel: B, T, bands) -> embedding: less its running mean if
        normalized, then scale and bias (logmel: mixed, plus bias)."""
        if self.features == "logmel":
            return (torch.matmul(power, self.mix.t()) + self.bias).contiguous()
        if self.norm == "running_mean":
            power = power - running_mean(power, self.norm_decay, self.norm_init)
        return (power * self.scale + self.bias).contiguous()

    def forward(self, s: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T/stride, D)
        if self.features == "linear" and self.kernel == 1 and self.stride == 1:
            return s.unsqueeze(-1) * self.weight[:, 0] + self.bias
        if self.features == "linear":
            padded = F.pad(s, (self.kernel - self.stride, 0)).unsqueeze(1)  # (B, 1, T + k - s)
            y = F.conv1d(padded, self.weight.unsqueeze(1), self.bias, stride=self.stride)  # (B, D, T/s)
            return y.transpose(1, 2).contiguous()
        return self.finish(self.log_power(s))


def _mel(f: float) -> float:
    return 2595.0 * math.log10(1.0 + f / 700.0)


def _mel_hz(m: float) -> float:
    return 700.0 * (10 ** (m / 2595.0) - 1.0)


def _mel_range(sample_rate: int):
    """The front ends' frequency range in mel: 60 Hz to 7.6 kHz (or 0.475 of the rate)."""
    return _mel(60.0), _mel(min(7600.0, 0.475 * sample_rate))


def quadrature_filterbank(dim: int, kernel: int, sample_rate: int = 16000) -> torch.Tensor:
    """(2 dim, kernel): Hann-windowed cosines (rows 0..dim-1) and sines (dim..2dim-1)
    at mel-spaced centre frequencies from 60 Hz to 7.6 kHz, unit gain at the centre."""
    lo, hi = _mel_range(sample_rate)
    return quadrature_rows([_mel_hz(lo + (hi - lo) * i / max(1, dim - 1)) for i in range(dim)], kernel, sample_rate)


def mel_bins(kernel: int, sample_rate: int = 16000):
    """(index, Hz) of the kernel-point DFT's bins inside the front ends' range (60 Hz to 7.6 kHz):
    the spectrum a "logmel" patch embedding computes."""
    lo, hi = (_mel_hz(m) for m in _mel_range(sample_rate))
    return [(k, k * sample_rate / kernel) for k in range(kernel // 2 + 1) if lo <= k * sample_rate / kernel <= hi]


def mel_matrix(bands: int, kernel: int, sample_rate: int = 16000) -> torch.Tensor:
    """(bands, bins) triangular mel filters over mel_bins(kernel): band i rises from edge i
    to 1 at edge i + 1 and falls to 0 at edge i + 2, the bands + 2 edges evenly spaced in
    mel over 60 Hz to 7.6 kHz."""
    lo, hi = _mel_range(sample_rate)
    edges = [lo + (hi - lo) * i / (bands + 1) for i in range(bands + 2)]
    mels = [_mel(f) for _, f in mel_bins(kernel, sample_rate)]
    rows = []
    for a, c, b in zip(edges, edges[1:], edges[2:]):
        rows.append([max(0.0, min((m - a) / (c - a), (b - m) / (b - c))) for m in mels])
    return torch.tensor(rows, dtype=torch.float32)


def quadrature_rows(freqs, kernel: int, sample_rate: int = 16000) -> torch.Tensor:
    """(2 len(freqs), kernel): Hann-windowed cosines, then sines, at `freqs` Hz, unit gain at each."""
    n = torch.arange(kernel, dtype=torch.float64)
    window = 0.5 - 0.5 * torch.cos(2 * math.pi * (n + 0.5) / kernel)
    gain = 2.0 / window.sum()
    rows = [window * torch.cos(2 * math.pi * f * n / sample_rate) * gain for f in freqs]
    rows += [window * torch.sin(2 * math.pi * f * n / sample_rate) * gain for f in freqs]
    return torch.stack(rows).float()
