# SPDX-License-Identifier: Apache-2.0
"""The encoder's layers: EMA, attention, normalization, feed-forward."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from mega_kws_tools.model.config import LAPLACE_MU, LAPLACE_SIGMA, MegaConfig


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
