// SPDX-License-Identifier: Apache-2.0
// Strided patch embedding (mega-spec.md, "Our extension"): a Conv1d from 1 to
// D channels, kernel k, stride s. Each stream's samples are laid out as
// [k - s context samples | n_tok * s new samples], already scaled, so token j
// reads samples [j*s, j*s + k) of its block. k = s = 1 is the official
// per-sample embedding. With g set (PatchFeatures::LogPower) there are 2d
// filters and feature c is g[c] * log(a^2 + b^2 + eps) + b[c], a and b the
// outputs of filters c and d + c. With m0 set (PatchNorm::RunningMean) the log
// power p first loses its running mean, m += decay * (p - m); p -= m, which
// each stream carries in `mean` from step to step: the log powers go to a
// float scratch (one work item per element, as without it), then one work item
// per (stream, channel) walks its tokens in order, as the CPU does.
// With bands set (PatchFeatures::LogMel) there are 2P filters (P bins): one
// work item per (token, band) writes log(sum_i M[band, i] p_i + eps) to the
// `power` scratch, p_i = a_i^2 + b_i^2 of filters i and P + i, computed only
// where M is not zero (most bins fall in two bands); then one work item per
// output element mixes the bands, x = mix . e + b.
#pragma once

#include <math.h>

#include <cstdint>

#include "storage.h"

struct CUstream_st;

namespace mega::gpu {

template <typename T>
struct EmbedParams {
  const float* samples = nullptr;  // n_streams blocks of stream_stride floats
  int64_t stream_stride = 0;
  const float* w = nullptr;        // (d, k); log power: (2d, k)
  const float* g = nullptr;        // (d) log-power scale; null: linear
  const float* b = nullptr;        // (d)
  float eps = 0.0f;                // log power
  const float* m0 = nullptr;       // (d) running mean's start; null: no running mean
  float* mean = nullptr;           // (n_streams, d) each stream's running mean
  float* power = nullptr;          // (n_streams * n_tok, d) scratch: the log powers; log mel: (.., n_bands)
  const float* bands = nullptr;    // (n_bands, n_bins) log mel's band weights; null: other features
  const float* mix = nullptr;      // (d, n_bands)
  int32_t n_bins = 0, n_bands = 0;
  const int64_t* chunk_index = nullptr;  // per stream: chunk 0 starts the mean afresh
  bool streaming = true;           // false: a clip, started afresh
  float decay = 0.0f;
  T* x = nullptr;                  // (n_streams * n_tok, d)
  float xs = 1.0f;                 // x is stored as value / xs (Dims::x_scale)
  int32_t n_streams = 0;
  int64_t n_tok = 0;
  int32_t d = 0, k = 1, s = 1;
};

// Work items: output elements (with a running mean: log powers into p.power) ...
template <typename T>
int64_t embed_size(const EmbedParams<T>& p) { return int64_t(p.n_streams) * p.n_tok * (p.bands ? p.n_bands : p.d); }

// ... then, with a running mean, (stream, channel) columns (embed_column).
template <typename T>
int64_t embed_column_size(const EmbedParams<T>& p) { return p.m0 ? int64_t(p.n_streams) * p.d : 0; }

// ... and, with log mel, output elements again (embed_mix).
template <typename T>
int64_t embed_mix_size(const EmbedParams<T>& p) { return p.bands ? int64_t(p.n_streams) * p.n_tok * p.d : 0; }

// Filter row w against the k samples at win. Same summation order as the CPU.
MEGA_HD inline float embed_dot(const float* w, const float* win, int32_t k) {
  float acc = 0.0f;
  for (int32_t i = 0; i < k; ++i) acc += w[i] * win[i];
  return acc;
}

// Log power of filter pair (c, d + c) over the window of token j of stream b.
template <typename T>
MEGA_HD inline float embed_log_power(const EmbedParams<T>& p, int64_t b, int64_t j, int32_t c) {
  const float* win = p.samples + b * p.stream_stride + j * p.s;
  const float a = embed_dot(p.w + int64_t(c) * p.k, win, p.k);
  const float q = embed_dot(p.w + int64_t(p.d + c) * p.k, win, p.k);
  return logf(a * a + q * q + p.eps);
}

// Log energy of band c over the window of token j of stream b. Same sums, in
// the same order, as the CPU: the skipped terms are M's zeros, which add +0.
template <typename T>
MEGA_HD inline float embed_log_band(const EmbedParams<T>& p, int64_t b, int64_t j, int32_t c) {
  const float* win = p.samples + b * p.stream_stride + j * p.s;
  const float* m = p.bands + int64_t(c) * p.n_bins;
  float acc = 0.0f;
  for (int32_t i = 0; i < p.n_bins; ++i) {
    if (m[i] == 0.0f) continue;
    const float a = embed_dot(p.w + int64_t(i) * p.k, win, p.k);
    const float q = embed_dot(p.w + int64_t(p.n_bins + i) * p.k, win, p.k);
    acc += m[i] * (a * a + q * q);
  }
  return logf(acc + p.eps);
}

// Work item idx in [0, embed_size).
template <typename T>
MEGA_HD inline void embed_element(const EmbedParams<T>& p, int64_t idx) {
  if (p.bands) {
    const int32_t c = int32_t(idx % p.n_bands);
    const int64_t row = idx / p.n_bands;
    p.power[idx] = embed_log_band(p, row / p.n_tok, row % p.n_tok, c);
    return;
  }
  const int32_t c = int32_t(idx % p.d);
  const int64_t row = idx / p.d;
  const int64_t b = row / p.n_tok, j = row % p.n_tok;
  if (p.m0) {
    p.power[idx] = embed_log_power(p, b, j, c);
  } else if (p.g == nullptr) {
    st(p.x + idx, (embed_dot(p.w + int64_t(c) * p.k, p.samples + b * p.stream_stride + j * p.s, p.k) + p.b[c]) / p.xs);
  } else {
    st(p.x + idx, (p.g[c] * embed_log_power(p, b, j, c) + p.b[c]) / p.xs);
  }
}

// Work item idx in [0, embed_column_size): channel c of stream b over its
// tokens' log powers, with the running mean.
template <typename T>
MEGA_HD inline void embed_column(const EmbedParams<T>& p, int64_t idx) {
  const int32_t c = int32_t(idx % p.d);
  const int64_t b = idx / p.d;
  const bool fresh = !p.streaming || p.chunk_index[b] == 0;
  float m = fresh ? p.m0[c] : p.mean[idx];
  for (int64_t j = 0; j < p.n_tok; ++j) {
    const int64_t at = (b * p.n_tok + j) * p.d + c;
    const float lp = p.power[at];
    m += p.decay * (lp - m);
    st(p.x + at, (p.g[c] * (lp - m) + p.b[c]) / p.xs);
  }
  p.mean[idx] = m;
}

// Work item idx in [0, embed_mix_size): output element idx from its token's
// band log energies.
template <typename T>
MEGA_HD inline void embed_mix(const EmbedParams<T>& p, int64_t idx) {
  const int32_t c = int32_t(idx % p.d);
  const int64_t row = idx / p.d;
  const float* e = p.power + row * p.n_bands;
  const float* mix = p.mix + int64_t(c) * p.n_bands;
  float acc = 0.0f;
  for (int32_t j = 0; j < p.n_bands; ++j) acc += mix[j] * e[j];
  st(p.x + idx, (acc + p.b[c]) / p.xs);
}

template <typename T>
int launch_embed(const EmbedParams<T>& p, CUstream_st* stream);

}  // namespace mega::gpu
