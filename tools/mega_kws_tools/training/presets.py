# SPDX-License-Identifier: Apache-2.0
"""The model presets of --preset."""




_DEMO = dict(embed_dim=64, hidden_dim=128, ffn_hidden_dim=128, z_dim=32, n_dim=16, n_layers=4,
             chunk_size=25, truncation=200, patch_kernel=400, patch_stride=160, window_chunks=4,
             classifier_dim=128)
_WIDE = dict(_DEMO, embed_dim=96, hidden_dim=192, ffn_hidden_dim=192, z_dim=48, classifier_dim=192,
             patch_features="logpower")
_SMOKE = dict(embed_dim=16, hidden_dim=32, ffn_hidden_dim=32, z_dim=8, n_dim=4, n_layers=1,
              chunk_size=25, truncation=200, patch_kernel=400, patch_stride=160, window_chunks=4,
              classifier_dim=32)

PRESETS = {
    # 100 tokens/s through a 25 ms / 10 ms patch embedding with log-power features
    # (a learnable short-time power spectrum).
    "demo": dict(_DEMO, patch_features="logpower"),
    # Wider (D 96, H 192): about twice the parameters and compute of "demo".
    "demo-wide": _WIDE,
    # "demo-wide" with six layers instead of four: about 1.4 times its parameters and compute.
    "demo-deep": dict(_WIDE, n_layers=6),
    # "demo" with linear patch features (the model shipped before; learns far slower).
    "demo-linear": dict(_DEMO),
    # "demo-wide" with fixed 40-band log-mel features mixed into D channels (see
    # mega_torch.PatchEmbedding): PyTorch only so far, the model file has no such front end.
    "demo-wide-mel": dict(_WIDE, patch_features="logmel", patch_bands=40),
    # For the smoke test: trains a few steps in seconds.
    "smoke": dict(_SMOKE, patch_features="logpower"),
    # "smoke" with the log-mel front end of "demo-wide-mel" (16 bands).
    "smoke-mel": dict(_SMOKE, patch_features="logmel", patch_bands=16),
    # The paper's mega_sc_raw_base, unidirectional so it streams (train on a GPU: see docs/lab-log.md).
    "paper-base": dict(embed_dim=60, hidden_dim=120, ffn_hidden_dim=120, z_dim=30, n_dim=16, n_layers=6,
                       chunk_size=1000, truncation=1000, patch_kernel=1, patch_stride=1, window_chunks=16,
                       classifier_dim=120),
}
