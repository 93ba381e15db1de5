# SPDX-License-Identifier: Apache-2.0
"""The model's configuration (MegaConfig) and the choices of its options."""

import dataclasses

from mega_kws_tools.model.frontend import mel_bins, mel_matrix


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
