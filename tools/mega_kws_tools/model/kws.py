# SPDX-License-Identifier: Apache-2.0
"""The keyword spotter: patch embedding, encoder layers, classifier; streaming windows."""

from typing import List, Optional

import torch
import torch.nn as nn

from mega_kws_tools.model.config import MegaConfig
from mega_kws_tools.model.frontend import PatchEmbedding
from mega_kws_tools.model.layers import EncoderLayer, SeqNorm, activation_fn


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
