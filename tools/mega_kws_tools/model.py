"""PyTorch reference of the Mega-chunk keyword spotter (our own code).

Module and parameter names follow the official fairseq Speech Commands model
(`encoder.encoder.` prefix stripped), so official state dicts load by name.
The math is written out in `docs/../shared/docs/mega-spec.md`; this file is the
executable form the converter, the golden fixtures and training rely on.

Works in any float dtype: float32 for training, float64 for golden data.
"""

import dataclasses
import math
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

ATTENTION_FNS = ("laplace", "softmax", "relu2")
NORM_TYPES = ("batchnorm", "layernorm", "scalenorm", "rmsnorm")
PATCH_FEATURES = ("linear", "logpower", "logmel")
PATCH_NORMS = ("none", "running_mean")
ACTIVATIONS = ("silu", "relu", "gelu", "gelu_accurate", "linear")

LAPLACE_MU = 0.707107
LAPLACE_SIGMA = 0.282095


@dataclasses.dataclass
class MegaConfig:
    embed_dim: int = 60
    hidden_dim: int = 120
    ffn_hidden_dim: int = 120      # 0: no FFN sublayer
    z_dim: int = 30
    n_dim: int = 16
    n_layers: int = 6
    chunk_size: int = 1000         # tokens
    truncation: int = 1000         # EMA taps in tokens; 0: untruncated
    bidirectional: bool = False
    attention_fn: str = "laplace"
    norm_type: str = "batchnorm"
    norm_eps: float = 1e-5
    prenorm: bool = True
    activation: str = "silu"
    classifier_layers: int = 1
    classifier_dim: int = 120
    classifier_activation: str = "gelu"
    n_classes: int = 10
    patch_kernel: int = 1
    patch_stride: int = 1
    patch_features: str = "linear"  # "linear" (official), "logpower" or "logmel" (see PatchEmbedding)
    patch_log_eps: float = 1e-6
    patch_bands: int = 40           # "logmel": mel bands between the power spectrum and the log
    patch_norm: str = "none"        # "running_mean": log-power features less their running mean
    patch_norm_decay: float = 0.01  # weight of each new token in that mean (0.01: about 1 s at 100 tokens/s)
    window_chunks: int = 16
    sample_rate: int = 16000

    def check(self) -> None:
        """Raises ValueError naming the first option we cannot represent."""
        positive = ("embed_dim", "hidden_dim", "z_dim", "n_dim", "n_layers", "chunk_size",
                    "classifier_layers", "classifier_dim", "n_classes", "patch_kernel",
                    "patch_stride", "window_chunks", "sample_rate")
        for name in positive:
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"option {name} = {getattr(self, name)} must be positive")
        if self.ffn_hidden_dim < 0 or self.truncation < 0:
            raise ValueError("options ffn_hidden_dim and truncation must be >= 0")
        if self.patch_kernel < self.patch_stride:
            raise ValueError(f"option patch_kernel = {self.patch_kernel} must be >= patch_stride = {self.patch_stride}")
        if self.patch_features not in PATCH_FEATURES:
            raise ValueError(f"option patch_features = {self.patch_features!r} is not supported (supported: {', '.join(PATCH_FEATURES)})")
        if self.patch_features != "linear" and not self.patch_log_eps > 0:
            raise ValueError(f"option patch_log_eps = {self.patch_log_eps} must be > 0")
        if self.patch_norm not in PATCH_NORMS:
            raise ValueError(f"option patch_norm = {self.patch_norm!r} is not supported (supported: {', '.join(PATCH_NORMS)})")
        if self.patch_features == "logmel":
            bins = len(mel_bins(self.patch_kernel, self.sample_rate))
            if not 1 <= self.patch_bands <= bins:
                raise ValueError(f"option patch_bands = {self.patch_bands} must be between 1 and {bins} "
                                 f"(the spectrum bins of a {self.patch_kernel}-sample patch)")
            if any(float(row.sum()) == 0.0 for row in mel_matrix(self.patch_bands, self.patch_kernel, self.sample_rate)):
                raise ValueError(f"option patch_bands = {self.patch_bands}: some mel bands hold no spectrum bin "
                                 f"of a {self.patch_kernel}-sample patch (use fewer bands)")
        if self.patch_norm != "none" and self.patch_features != "logpower":
            raise ValueError(f"option patch_norm = {self.patch_norm!r} needs patch_features = 'logpower'")
        if self.patch_norm != "none" and not 0 < self.patch_norm_decay < 1:
            raise ValueError(f"option patch_norm_decay = {self.patch_norm_decay} must be between 0 and 1")
        if self.attention_fn not in ATTENTION_FNS:
            raise ValueError(f"option attention_fn = {self.attention_fn!r} is not supported (supported: {', '.join(ATTENTION_FNS)})")
        if self.norm_type not in NORM_TYPES:
            raise ValueError(f"option norm_type = {self.norm_type!r} is not supported (supported: {', '.join(NORM_TYPES)})")
        for name in ("activation", "classifier_activation"):
            if getattr(self, name) not in ACTIVATIONS:
                raise ValueError(f"option {name} = {getattr(self, name)!r} is not supported (supported: {', '.join(ACTIVATIONS)})")

    @property
    def chunk_samples(self) -> int:
        return self.chunk_size * self.patch_stride

    @property
    def window_samples(self) -> int:
        return self.window_chunks * self.chunk_samples


def activation_fn(name: str):
    if name == "silu":
        return F.silu
    if name == "relu":
        return F.relu
    if name == "gelu":
        return lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name == "gelu_accurate":
        c = math.sqrt(2.0 / math.pi)
        return lambda x: 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))
    if name == "linear":
        return lambda x: x
    raise ValueError(f"unknown activation {name!r}")


def laplace(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (1.0 + torch.erf((x - LAPLACE_MU) / (LAPLACE_SIGMA * math.sqrt(2.0))))


class ScaleNorm(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps
        self.scalar = nn.Parameter(torch.ones(1))

    def forward(self, x):
        ms = torch.mean(x * x, dim=-1, keepdim=True)
        return self.scalar * x * torch.rsqrt(ms + self.eps)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        ms = torch.mean(x * x, dim=-1, keepdim=True)
        return x * self.weight * torch.rsqrt(ms + self.eps)


class SeqNorm(nn.Module):
    """Norm over channels of a (B, T, D) tensor; BatchNorm uses running stats in eval."""

    def __init__(self, norm_type: str, dim: int, eps: float):
        super().__init__()
        self.norm_type = norm_type
        if norm_type == "batchnorm":
            self.norm = nn.BatchNorm1d(dim, eps=eps)
        elif norm_type == "layernorm":
            self.norm = nn.LayerNorm(dim, eps=eps)
        elif norm_type == "scalenorm":
            self.norm = ScaleNorm(eps)
        elif norm_type == "rmsnorm":
            self.norm = RMSNorm(dim, eps)
        else:
            raise ValueError(f"unknown norm type {norm_type!r}")

    def forward(self, x):
        if self.norm_type == "batchnorm":
            return self.norm(x.transpose(1, 2)).transpose(1, 2).contiguous()
        return self.norm(x)


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


class MultiHeadEMA(nn.Module):
    """Damped multi-dimensional EMA, truncated to `truncation` taps."""

    def __init__(self, dim: int, ndim: int, bidirectional: bool, truncation: int):
        super().__init__()
        self.dim, self.ndim = dim, ndim
        self.bidirectional = bidirectional
        self.truncation = truncation
        rows = 2 * dim if bidirectional else dim
        self.delta = nn.Parameter(torch.randn(rows, ndim, 1) * 0.2)
        self.alpha = nn.Parameter(torch.randn(rows, ndim, 1) * 0.2)
        sign = torch.tensor([1.0 if n % 2 == 0 else -1.0 for n in range(ndim)]).view(ndim, 1)
        self.beta = nn.Parameter(torch.randn(rows, ndim, 1) * 0.02 + sign)
        self.gamma = nn.Parameter(torch.randn(rows, ndim))
        self.omega = nn.Parameter(torch.randn(dim))

    def kernel(self, length: int) -> torch.Tensor:
        """(rows, length) kernel: sum_n p*beta*q^l*gamma/sqrt(N)."""
        p = torch.sigmoid(self.delta)
        q = 1.0 - p * torch.sigmoid(self.alpha)
        lags = torch.arange(length, dtype=p.dtype, device=p.device).view(1, 1, length)
        vander = torch.exp(lags * torch.log(q))
        k = (p * self.beta) * vander
        return torch.einsum("dnl,dn->dl", k, self.gamma * math.sqrt(1.0 / self.ndim))

    @staticmethod
    def _causal_conv(x: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        # x (B, D, T), k (D, K) -> y[t] = sum_{l<K} k[l] x[t-l]
        t = x.size(-1)
        n = t + k.size(-1)
        y = torch.fft.irfft(torch.fft.rfft(x, n=n) * torch.fft.rfft(k, n=n), n=n)
        return y[..., :t]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, D) -> silu(EMA(x) + omega x)
        t = x.size(1)
        taps = t if self.truncation <= 0 else min(self.truncation, t)
        k = self.kernel(taps)
        xt = x.transpose(1, 2)
        if self.bidirectional:
            k1, k2 = k[: self.dim], k[self.dim:]
            y = self._causal_conv(xt, k1) + self._causal_conv(xt.flip(-1), k2).flip(-1)
        else:
            y = self._causal_conv(xt, k)
        # contiguous, so that mx_proj is one matrix product, not a batched one (4-6 times slower on a CPU)
        return F.silu(y.transpose(1, 2).contiguous() + x * self.omega)


class RelPosBias(nn.Module):
    def __init__(self, chunk: int):
        super().__init__()
        self.chunk = chunk
        self.rel_pos_bias = nn.Parameter(torch.randn(2 * chunk - 1) * 0.02)

    def forward(self) -> torch.Tensor:  # (C, C): bias[i, j] = rel[C - 1 + j - i]
        c = self.chunk
        idx = torch.arange(c).view(1, c) - torch.arange(c).view(c, 1) + (c - 1)
        return self.rel_pos_bias[idx]


class MegaLayer(nn.Module):
    """The Mega sublayer: EMA + single-head gated chunk attention."""

    def __init__(self, cfg: MegaConfig):
        super().__init__()
        d, h, z = cfg.embed_dim, cfg.hidden_dim, cfg.z_dim
        self.cfg = cfg
        self.norm = SeqNorm(cfg.norm_type, d, cfg.norm_eps)
        self.move = MultiHeadEMA(d, cfg.n_dim, cfg.bidirectional, cfg.truncation)
        self.v_proj = nn.Linear(d, h)
        self.mx_proj = nn.Linear(d, z + h + 2 * d)
        self.h_proj = nn.Linear(h, d)
        self.gamma = nn.Parameter(torch.randn(2, z) * 0.02)
        self.beta = nn.Parameter(torch.zeros(2, z))
        self.rel_pos_bias = RelPosBias(cfg.chunk_size)
        self.act = activation_fn(cfg.activation)

    def attention(self, q, k, v):
        cfg = self.cfg
        b, t, _ = q.shape
        c = cfg.chunk_size
        q = q.reshape(b, t // c, c, -1)
        k = k.reshape(b, t // c, c, -1)
        v = v.reshape(b, t // c, c, -1)
        bias = self.rel_pos_bias()
        if cfg.attention_fn == "softmax":
            scores = torch.matmul(q * cfg.z_dim ** -0.5, k.transpose(2, 3)) + bias
            weights = torch.softmax(scores, dim=-1)
        else:
            scores = torch.matmul(q, k.transpose(2, 3)) / c + bias
            weights = laplace(scores) if cfg.attention_fn == "laplace" else torch.square(F.relu(scores))
        return torch.matmul(weights, v).reshape(b, t, -1)

    def forward(self, x):
        cfg = self.cfg
        d, z, h = cfg.embed_dim, cfg.z_dim, cfg.hidden_dim
        residual = x
        if cfg.prenorm:
            x = self.norm(x)
        v = self.act(self.v_proj(x))
        mx = self.move(x)
        base = self.mx_proj(mx)
        u, zr, hx = torch.split(base, [d, z + h, d], dim=-1)
        u = torch.sigmoid(u)
        zz, r = torch.split(F.silu(zr), [z, h], dim=-1)
        qk = zz.unsqueeze(2) * self.gamma + self.beta
        q, k = torch.unbind(qk, dim=2)
        o = self.attention(q, k, v)
        hh = self.act(hx + self.h_proj(o * r))
        out = residual + u * (hh - residual)
        if not cfg.prenorm:
            out = self.norm(out)
        return out


class NormalizedFFN(nn.Module):
    def __init__(self, cfg: MegaConfig):
        super().__init__()
        self.cfg = cfg
        self.norm = SeqNorm(cfg.norm_type, cfg.embed_dim, cfg.norm_eps)
        self.fc1 = nn.Linear(cfg.embed_dim, cfg.ffn_hidden_dim)
        self.fc2 = nn.Linear(cfg.ffn_hidden_dim, cfg.embed_dim)
        self.act = activation_fn(cfg.activation)

    def forward(self, x):
        residual = x
        if self.cfg.prenorm:
            x = self.norm(x)
        x = self.fc2(self.act(self.fc1(x))) + residual
        if not self.cfg.prenorm:
            x = self.norm(x)
        return x


class EncoderLayer(nn.Module):
    def __init__(self, cfg: MegaConfig):
        super().__init__()
        self.mega_layer = MegaLayer(cfg)
        self.nffn = NormalizedFFN(cfg) if cfg.ffn_hidden_dim > 0 else None

    def forward(self, x):
        x = self.mega_layer(x)
        return self.nffn(x) if self.nffn is not None else x


class MegaKWS(nn.Module):
    """Raw audio (B, T) -> logits (B, n_classes). T must be a multiple of C * s."""

    def __init__(self, cfg: MegaConfig, input_mean: Optional[float] = None, input_std: Optional[float] = None):
        super().__init__()
        cfg.check()
        self.cfg = cfg
        self.input_mean, self.input_std = input_mean, input_std
        self.embed_tokens = PatchEmbedding(cfg.embed_dim, cfg.patch_kernel, cfg.patch_stride,
                                           cfg.patch_features, cfg.patch_log_eps, cfg.sample_rate,
                                           cfg.patch_norm, cfg.patch_norm_decay, cfg.patch_bands)
        self.layers = nn.ModuleList([EncoderLayer(cfg) for _ in range(cfg.n_layers)])
        self.final_norm = SeqNorm(cfg.norm_type, cfg.embed_dim, cfg.norm_eps) if cfg.prenorm else None
        dims = [cfg.embed_dim] + [cfg.classifier_dim] * cfg.classifier_layers
        self.classifier = nn.ModuleList(
            [nn.Sequential(nn.Linear(dims[i], dims[i + 1])) for i in range(cfg.classifier_layers)])
        self.classifier_act = activation_fn(cfg.classifier_activation)
        self.sentence_projection_layer = nn.Linear(cfg.classifier_dim, cfg.n_classes, bias=False)

    def scale_input(self, s: torch.Tensor) -> torch.Tensor:
        if self.input_mean is None:
            return s
        return (s - self.input_mean) / (self.input_std + 1e-5)

    def features(self, s: torch.Tensor, trace: Optional[List[torch.Tensor]] = None) -> torch.Tensor:
        """Final-normed token features (B, T/s, D); appends per-layer outputs to `trace`."""
        cfg = self.cfg
        if s.size(1) % cfg.chunk_samples != 0:
            raise ValueError(f"input length {s.size(1)} is not a multiple of the chunk ({cfg.chunk_samples} samples)")
        x = self.embed_tokens(self.scale_input(s))
        if trace is not None:
            trace.append(x)
        for layer in self.layers:
            x = layer(x)
            if trace is not None:
                trace.append(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x

    def head(self, rep: torch.Tensor) -> torch.Tensor:
        for layer in self.classifier:
            rep = self.classifier_act(layer(rep))
        return self.sentence_projection_layer(rep)

    def forward(self, s: torch.Tensor, trace: Optional[List[torch.Tensor]] = None) -> torch.Tensor:
        x = self.features(s, trace)
        return self.head(x.mean(dim=1))

    def chunk_window_logits(self, feats: torch.Tensor) -> torch.Tensor:
        """(n_chunks, n_classes): after each chunk, the logits over the last W
        chunks (fewer at the start), as a streaming session reports them.
        feats: one sequence's features (tokens, D) from features()."""
        cfg = self.cfg
        sums = feats.reshape(-1, cfg.chunk_size, cfg.embed_dim).sum(dim=1)
        rows = []
        for c in range(sums.shape[0]):
            lo = max(0, c - cfg.window_chunks + 1)
            rows.append(sums[lo:c + 1].sum(dim=0) / ((c + 1 - lo) * cfg.chunk_size))
        return self.head(torch.stack(rows))

    def window_embedding(self, s: torch.Tensor) -> torch.Tensor:
        """(B, D): the encoder's output averaged over the last W chunks, what the
        classifier head reads for window_logits."""
        x = self.features(s)
        tokens = self.cfg.window_chunks * self.cfg.chunk_size
        return x[:, -tokens:].mean(dim=1)

    def window_logits(self, s: torch.Tensor) -> torch.Tensor:
        """Logits over the last W chunks only, as a streaming session reports
        them after the last chunk of s (earlier audio still reaches the window
        through the EMA state). Equals forward() when s is exactly one window."""
        return self.head(self.window_embedding(s))


def config_from_fairseq_args(args, state_dict) -> MegaConfig:
    """MegaConfig from an official checkpoint's argparse Namespace (+ shapes)."""
    def arg(name, default=None):
        return getattr(args, name, default)

    sen_rep = arg("sen_rep_type", "mp")
    if sen_rep != "mp":
        raise ValueError(f"option sen_rep_type = {sen_rep!r} is not supported (only 'mp', mean pooling)")
    rel = arg("rel_pos_bias", "simple")
    if rel != "simple":
        raise ValueError(f"option rel_pos_bias = {rel!r} is not supported (only 'simple')")
    layer_type = arg("layer_type", "mega")
    if layer_type != "mega":
        raise ValueError(f"option layer_type = {layer_type!r} is not supported (only 'mega')")
    chunk = int(arg("chunk_size", 1000))
    if chunk <= 0:
        raise ValueError(f"option chunk_size = {chunk} is not supported (unchunked attention cannot stream)")
    norm = arg("norm_type", "batchnorm")
    if norm == "syncbatchnorm":
        norm = "batchnorm"  # identical in eval
    trunc = arg("truncation_length", None)
    delta = state_dict.get("encoder.encoder.layers.0.mega_layer.move.delta")
    d = int(arg("encoder_embed_dim", 60))
    if delta is None:
        raise ValueError("missing tensor encoder.encoder.layers.0.mega_layer.move.delta")
    if delta.shape[0] not in (d, 2 * d):
        raise ValueError(f"tensor encoder.encoder.layers.0.mega_layer.move.delta has shape {tuple(delta.shape)}, "
                         f"expected first dim {d} (uni) or {2 * d} (bi)")
    h = int(arg("encoder_hidden_dim", 120))
    max_pos = int(arg("max_positions", 16000))
    cfg = MegaConfig(
        embed_dim=d, hidden_dim=h,
        ffn_hidden_dim=int(arg("encoder_ffn_embed_dim", h) or 0),
        z_dim=int(arg("z_dim", 30)), n_dim=int(arg("n_dim", 16)),
        n_layers=int(arg("encoder_layers", 6)), chunk_size=chunk,
        truncation=int(trunc) if trunc else 0,
        bidirectional=delta.shape[0] == 2 * d,
        attention_fn=arg("attention_activation_fn", "laplace"), norm_type=norm,
        prenorm=bool(arg("encoder_normalize_before", True)),
        activation=arg("activation_fn", "silu"),
        classifier_layers=int(arg("classifier_layers", 1)),
        classifier_dim=int(arg("classifier_out_dim", 2 * d)),
        classifier_activation=arg("classifier_activation_fn", "gelu"),
        n_classes=int(arg("sentence_class_num", 10)),
        window_chunks=max(1, max_pos // chunk))
    cfg.check()
    return cfg


FAIRSEQ_PREFIX = "encoder.encoder."
IGNORED_SUFFIXES = ("num_batches_tracked", "_float_tensor")


def strip_fairseq_names(state_dict) -> dict:
    """Official state-dict names -> ours (drop the encoder prefix and bookkeeping buffers)."""
    out = {}
    for name, value in state_dict.items():
        if name.endswith(IGNORED_SUFFIXES):
            continue
        if name.startswith(FAIRSEQ_PREFIX):
            name = name[len(FAIRSEQ_PREFIX):]
        out[name] = value
    return out


def load_weights(model: MegaKWS, weights: dict) -> None:
    """Strict load with messages naming the tensor; reshapes the official (D,) embedding."""
    expected = {k: v for k, v in model.state_dict().items() if not k.endswith(IGNORED_SUFFIXES)}
    given = dict(weights)
    emb = given.get("embed_tokens.weight")
    if emb is not None and emb.dim() == 1:
        given["embed_tokens.weight"] = emb.view(-1, 1)
    elif emb is not None and emb.dim() == 3:  # Conv1d (D, 1, k)
        given["embed_tokens.weight"] = emb.reshape(emb.shape[0], emb.shape[2])
    for name, ref in expected.items():
        if name not in given:
            raise ValueError(f"missing tensor {name}")
        if tuple(given[name].shape) != tuple(ref.shape):
            raise ValueError(f"tensor {name} has shape {tuple(given[name].shape)}, expected {tuple(ref.shape)}")
    extra = sorted(set(given) - set(expected))
    if extra:
        raise ValueError(f"unexpected tensor {extra[0]} (not part of this configuration)")
    model.load_state_dict({k: given[k] for k in expected}, strict=False)


def model_from_config_checkpoint(ckpt: dict) -> MegaKWS:
    """The model of one of our checkpoint dicts ({'config', 'model', ...}), in training
    mode; ValueError for an unsupported option or a tensor that does not fit."""
    known = {f.name for f in dataclasses.fields(MegaConfig)}
    unknown = sorted(set(ckpt["config"]) - known)
    if unknown:
        raise ValueError(f"option {unknown[0]} in the checkpoint config is not supported")
    cfg = MegaConfig(**ckpt["config"])
    cfg.check()
    model = MegaKWS(cfg)
    load_weights(model, strip_fairseq_names(ckpt["model"]))
    return model


def load_checkpoint(path: str):
    """Returns (model in eval mode, float32, with weights; source format; extra dict)."""
    try:
        ckpt = torch.load(path, map_location="cpu")
    except Exception as e:  # pickle, zip and torch errors alike: the file is not a usable checkpoint
        raise ValueError(f"{path}: cannot read the checkpoint ({type(e).__name__}: {e})") from None
    if not isinstance(ckpt, dict) or "model" not in ckpt:
        raise ValueError(f"{path}: not a checkpoint (expected a dict with a 'model' state dict)")
    # ours first: training checkpoints also keep their command-line args
    if "config" in ckpt:
        model = model_from_config_checkpoint(ckpt)
        fmt, extra = "mega-kws", ckpt
    elif "args" in ckpt and ckpt["args"] is not None:
        cfg = config_from_fairseq_args(ckpt["args"], ckpt["model"])
        model = MegaKWS(cfg)
        load_weights(model, strip_fairseq_names(ckpt["model"]))
        fmt, extra = "fairseq", {}
    else:
        raise ValueError(f"{path}: unknown checkpoint format (neither fairseq 'args' nor mega-kws 'config')")
    model.eval()
    return model, fmt, extra


def randomize_for_testing(model: MegaKWS, seed: int) -> None:
    """Random weights where every parameter visibly matters (for parity fixtures).

    Unlike the training init: BatchNorm statistics are non-trivial, some EMA
    channels decay slowly enough that the truncation changes the output, and the
    attention scores land where laplace is neither 0 nor 1.
    """
    cfg = model.cfg
    g = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=g) * std + mean

    def uniform(shape, lo, hi):
        return torch.rand(shape, generator=g) * (hi - lo) + lo

    with torch.no_grad():
        for name, p in model.state_dict().items():
            leaf = name.rsplit(".", 1)[-1]
            shape = p.shape
            if name.endswith("num_batches_tracked"):
                continue
            if ".norm." in name or name.startswith("final_norm"):
                new = {"weight": lambda: uniform(shape, 0.5, 1.5), "scalar": lambda: uniform(shape, 0.5, 1.5),
                       "bias": lambda: normal(shape, 0.1), "running_mean": lambda: normal(shape, 0.3),
                       "running_var": lambda: uniform(shape, 0.5, 2.0)}[leaf]()
            elif ".move." in name:
                new = {"delta": lambda: uniform(shape, -3.0, 1.0), "alpha": lambda: uniform(shape, -7.0, 1.0),
                       "beta": lambda: torch.tensor([1.0 if n % 2 == 0 else -1.0 for n in range(shape[1])]
                                                    ).view(1, shape[1], 1) + normal(shape, 0.1),
                       "gamma": lambda: normal(shape, 1.0),
                       "omega": lambda: normal(shape, 1.0)}[leaf]()
            elif name.endswith("mega_layer.gamma") or name.endswith("mega_layer.beta"):
                # q.k / C must vary around the laplace centre, not sit at a constant offset
                std = 0.5 if cfg.attention_fn == "softmax" else 0.3 * math.sqrt(cfg.chunk_size)
                new = normal(shape, std if name.endswith("gamma") else 0.1 * std)
            elif name.endswith("rel_pos_bias"):
                new = uniform(shape, 0.2, 1.2) if cfg.attention_fn == "laplace" else normal(shape, 0.5)
            elif name.endswith("h_proj.weight") and cfg.attention_fn != "softmax":
                # unnormalized attention sums ~C weighted values: keep h in range
                new = normal(shape, 4.0 / (math.sqrt(shape[1]) * cfg.chunk_size))
            elif name in ("embed_tokens.weight", "embed_tokens.bands") and cfg.patch_features == "logmel":
                continue  # the fixed spectrum and bands, as every log-mel model has them
            elif name == "embed_tokens.mix":
                new = normal(shape, 0.3 / math.sqrt(shape[1]))
            elif name == "embed_tokens.scale":
                new = uniform(shape, 0.1, 0.5)
            elif name == "embed_tokens.norm_init":  # about where the log power of a test input sits
                new = normal(shape, 1.0, mean=-2.0)
            elif name == "sentence_projection_layer.weight":
                new = normal(shape, 0.2 / math.sqrt(shape[1]))  # logits of order 10, as trained models have
            elif leaf == "weight" and p.dim() == 2:
                new = normal(shape, 1.0 / math.sqrt(shape[1]))
            elif leaf == "bias":
                new = normal(shape, 0.1)
            else:
                raise AssertionError(f"randomize_for_testing: no rule for {name}")
            p.copy_(new)
        for layer in model.layers:
            # scale each EMA component to unit DC gain: slow channels would otherwise blow up
            ema = layer.mega_layer.move
            gain = torch.sigmoid(ema.delta)[..., 0]
            decay = 1.0 - gain * torch.sigmoid(ema.alpha)[..., 0]
            ema.gamma.mul_((1.0 - decay) / gain * math.sqrt(ema.ndim) * (0.5 if cfg.bidirectional else 1.0))
