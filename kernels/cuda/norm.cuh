// SPDX-License-Identifier: Apache-2.0
// Norms over the d channels of each token (batch norm folded to scale/shift at
// load, layer norm, scale norm, RMS norm); y may be x (in place).
// Batch norm is per element; the others are one thread per token, with float
// sums (the CPU reference sums in double; the difference is ~1e-7 relative).
#pragma once

#include <math.h>

#include <cstdint>

#include "mega/mega.hpp"
#include "storage.h"

struct CUstream_st;

namespace mega::gpu {

// Device copy of a NormWeights: batch norm: a = scale, b = shift; layer norm:
// a = weight, b = bias; RMS norm: a = weight; scale norm: scalar.
struct NormDev {
  NormType type = NormType::batch_norm;
  float eps = 1e-5f;
  float scalar = 1.0f;
  const float* a = nullptr;
  const float* b = nullptr;
};

template <typename T>
struct NormParams {
  NormDev w;
  const T* x = nullptr;
  T* y = nullptr;
  int64_t rows = 0;
  int32_t d = 0;
  float xs = 1.0f;  // x and y are stored as value / xs (Dims::x_scale)
};

// Work items: elements for batch norm, tokens otherwise.
template <typename T>
int64_t norm_size(const NormParams<T>& p) {
  return p.w.type == NormType::batch_norm ? p.rows * p.d : p.rows;
}

template <typename T>
MEGA_HD inline void norm_element(const NormParams<T>& p, int64_t idx) {
  if (p.w.type == NormType::batch_norm) {
    const int32_t c = int32_t(idx % p.d);
    st(p.y + idx, (ld(p.x[idx]) * p.xs * p.w.a[c] + p.w.b[c]) / p.xs);
    return;
  }
  const T* xt = p.x + idx * p.d;
  T* y = p.y + idx * p.d;
  const auto x = [&](int32_t i) { return ld(xt[i]) * p.xs; };
  if (p.w.type == NormType::layer_norm) {
    float mean = 0.0f;
    for (int32_t i = 0; i < p.d; ++i) mean += x(i);
    mean /= float(p.d);
    float var = 0.0f;
    for (int32_t i = 0; i < p.d; ++i) var += (x(i) - mean) * (x(i) - mean);
    var /= float(p.d);
    const float inv = 1.0f / sqrtf(var + p.w.eps);
    for (int32_t i = 0; i < p.d; ++i) st(y + i, ((x(i) - mean) * inv * p.w.a[i] + p.w.b[i]) / p.xs);
    return;
  }
  float ms = 0.0f;
  for (int32_t i = 0; i < p.d; ++i) ms += x(i) * x(i);
  const float inv = 1.0f / sqrtf(ms / float(p.d) + p.w.eps);
  if (p.w.type == NormType::scale_norm) {
    for (int32_t i = 0; i < p.d; ++i) st(y + i, p.w.scalar * x(i) * inv / p.xs);
  } else {
    for (int32_t i = 0; i < p.d; ++i) st(y + i, x(i) * p.w.a[i] * inv / p.xs);
  }
}

template <typename T>
int launch_norm(const NormParams<T>& p, CUstream_st* stream);

}  // namespace mega::gpu
