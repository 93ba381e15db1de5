// Strided patch embedding (mega-spec.md, "Our extension"): a Conv1d from 1 to
// D channels, kernel k, stride s. Each stream's samples are laid out as
// [k - s context samples | n_tok * s new samples], already scaled, so token j
// reads samples [j*s, j*s + k) of its block. k = s = 1 is the official
// per-sample embedding. With g set (PatchFeatures::LogPower) there are 2d
// filters and feature c is g[c] * log(a^2 + b^2 + eps) + b[c], a and b the
// outputs of filters c and d + c.
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
  T* x = nullptr;                  // (n_streams * n_tok, d)
  int32_t n_streams = 0;
  int64_t n_tok = 0;
  int32_t d = 0, k = 1, s = 1;
};

template <typename T>
int64_t embed_size(const EmbedParams<T>& p) { return int64_t(p.n_streams) * p.n_tok * p.d; }

// One output element; idx in [0, embed_size). Same summation order as the CPU.
template <typename T>
MEGA_HD inline void embed_element(const EmbedParams<T>& p, int64_t idx) {
  const int32_t c = int32_t(idx % p.d);
  const int64_t row = idx / p.d;
  const int64_t b = row / p.n_tok, j = row % p.n_tok;
  const float* win = p.samples + b * p.stream_stride + j * p.s;
  const auto dot = [&](const float* w) {
    float acc = 0.0f;
    for (int32_t i = 0; i < p.k; ++i) acc += w[i] * win[i];
    return acc;
  };
  const float a = dot(p.w + int64_t(c) * p.k);
  if (p.g == nullptr) {
    st(p.x + idx, a + p.b[c]);
  } else {
    const float q = dot(p.w + int64_t(p.d + c) * p.k);
    st(p.x + idx, p.g[c] * logf(a * a + q * q + p.eps) + p.b[c]);
  }
}

template <typename T>
int launch_embed(const EmbedParams<T>& p, CUstream_st* stream);

}  // namespace mega::gpu
