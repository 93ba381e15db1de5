// SPDX-License-Identifier: Apache-2.0
// FLOPs of the Mega-chunk model per chunk and per second of audio, from its
// hyper-parameters, for any model file. Counted as the papers count them: 2
// per multiply-add of the matrix products (embedding, projections, the two
// attention products, the classifier head), plus the exact EMA recurrence as
// the runtime computes it (per token, channel and EMA dimension: u = g x +
// b x_old, h = q h + u, y += out h: 3 multiply-adds and a multiply, 7 FLOPs).
// Elementwise work (norms, activations, the attention function) is not
// counted; it is what separates the achieved rate from the sgemm rate.
#pragma once

#include "mega/mega.hpp"

namespace mega_bench {

struct ModelFlops {
  double embed = 0, ema = 0, projections = 0, attention = 0, head = 0;
  double total() const { return embed + ema + projections + attention + head; }
};

// One chunk of C tokens through every layer, plus one window's head.
inline ModelFlops model_flops_per_chunk(const mega::HParams& hp) {
  const double C = hp.chunk_size, D = hp.embed_dim, H = hp.hidden_dim, Z = hp.z_dim, N = hp.n_dim;
  const double F = hp.ffn_hidden_dim, L = hp.n_layers, Cd = hp.classifier_dim;
  const double ema_dirs = hp.ema_direction == mega::EmaDirection::bidirectional ? 2 : 1;
  ModelFlops f;
  if (hp.patch_features == mega::PatchFeatures::log_mel) {  // 2P filters, then the bands and the mix
    const double P = hp.patch_bins, B = hp.patch_bands;
    f.embed = 2 * C * (2 * P * hp.patch_kernel + B * P + D * B);
  } else {
    f.embed = 2 * C * D * hp.patch_kernel * (hp.patch_features == mega::PatchFeatures::log_power ? 2 : 1);
  }
  f.ema = L * 7 * C * D * N * ema_dirs;
  f.projections = L * 2 * C * (D * H + D * (2 * D + Z + H) + H * D + 2 * D * F);
  f.attention = L * 2 * C * C * (Z + H);
  f.head = 2 * (D * Cd + (hp.classifier_layers - 1) * Cd * Cd + Cd * hp.n_classes);
  return f;
}

inline double chunks_per_second(const mega::HParams& hp) {
  return double(hp.sample_rate) / double(hp.chunk_samples());
}

inline double model_flops_per_second(const mega::HParams& hp) {
  return model_flops_per_chunk(hp).total() * chunks_per_second(hp);
}

}  // namespace mega_bench
