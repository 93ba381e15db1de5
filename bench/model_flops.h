// SPDX-License-Identifier: Apache-2.0
// FLOPs of the Mega-chunk model per chunk and per second of audio, from its
// hyper-parameters, for any model file. Counted as the papers count them: 2
// per multiply-add of the matrix products (embedding, projections, the two
// attention products, the classifier head), plus the exact EMA recurrence as
// the runtime computes it (per token, channel and EMA dimension: u = g x +
// b x_old, h = q h + u, y += out h: 3 multiply-adds and a multiply, 7 FLOPs).
// Elementwise work (norms, activations, the attention function) is not
// counted; it is what separates the achieved rate from the sgemm rate.
// The teacher's front end (PatchFeatures::teacher_embedding) per token: its
// 8 new mel frames (the STFT's two products, in double, and the mel matrix)
// and the rows of each convolution a stream computes anew per 80 ms step.
#pragma once

#include "mega/mega.hpp"
#include "teacher_graph.h"

namespace mega_bench {

struct ModelFlops {
  double embed = 0, ema = 0, projections = 0, attention = 0, head = 0;
  double total() const { return embed + ema + projections + attention + head; }
};

// One token of the teacher's front end, as the streaming runner computes it.
inline double teacher_flops_per_token() {
  namespace t = mega::teacher;
  double f = 2.0 * t::kStepFrames * (double(t::kFft) * 2 * t::kBins + double(t::kBins) * t::kMel);
  double rows = t::kStepFrames, width = t::kMel;  // new rows per step, and their width, entering layer i
  for (const t::ConvSpec& s : t::kConvSpecs) {
    const double out_width = width + 2.0 * s.pad_w - s.kw + 1;
    f += 2.0 * rows * out_width * s.c_out * s.c_in * s.kh * s.kw;
    if (s.pool_h) rows /= s.pool_h;
    width = s.pool_w ? out_width / s.pool_w : out_width;
  }
  return f;
}

// One chunk of C tokens through every layer, plus one window's head.
inline ModelFlops model_flops_per_chunk(const mega::HParams& hp) {
  const double C = hp.chunk_size, D = hp.embed_dim, H = hp.hidden_dim, Z = hp.z_dim, N = hp.n_dim;
  const double F = hp.ffn_hidden_dim, L = hp.n_layers, Cd = hp.classifier_dim;
  const double ema_dirs = hp.ema_direction == mega::EmaDirection::bidirectional ? 2 : 1;
  ModelFlops f;
  if (hp.patch_features == mega::PatchFeatures::log_mel) {  // 2P filters, then the bands and the mix
    const double P = hp.patch_bins, B = hp.patch_bands;
    f.embed = 2 * C * (2 * P * hp.patch_kernel + B * P + D * B);
  } else if (hp.patch_features == mega::PatchFeatures::teacher_embedding) {  // the front end, then W e + b
    f.embed = C * (teacher_flops_per_token() + 2.0 * D * mega::teacher::kEmbedding);
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
