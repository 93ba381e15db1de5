// SPDX-License-Identifier: Apache-2.0
// Chunk attention between its two GEMMs (scores = q k^T and o = a v, cuBLAS
// strided-batched over chunks): one pass turning the raw dot products into
// weights, f(dot * scale + rel_pos_bias[C - 1 + j - i]) for laplace and
// relu2, the biased score for softmax, which then gets a row pass.
#pragma once

#include <math.h>

#include <cstdint>

#include "common/scalar_math.h"
#include "storage.h"

struct CUstream_st;

namespace mega::gpu {

template <typename T>
struct ScoreParams {
  T* scores = nullptr;              // (n_chunks, c, c), row i = query
  const float* rel_bias = nullptr;  // (2c - 1)
  int64_t n_chunks = 0;
  int32_t c = 0;
  AttentionFn fn = AttentionFn::laplace;
  float scale = 1.0f;               // 1/C (laplace, relu2) or 1/sqrt(Z) (softmax)
};

template <typename T>
int64_t score_size(const ScoreParams<T>& p) { return p.n_chunks * p.c * p.c; }

template <typename T>
MEGA_HD inline void score_element(const ScoreParams<T>& p, int64_t idx) {
  const int64_t j = idx % p.c;
  const int64_t i = (idx / p.c) % p.c;
  const float bias = p.rel_bias[math::rel_bias_index(p.c, i, j)];
  st(p.scores + idx, math::attention_weight(p.fn, ld(p.scores[idx]), p.scale, bias));
}

// Softmax over one row (n_chunks * c rows).
template <typename T>
MEGA_HD inline void softmax_row(const ScoreParams<T>& p, int64_t row) {
  T* s = p.scores + row * p.c;
  float mx = ld(s[0]);
  for (int32_t j = 1; j < p.c; ++j) mx = ld(s[j]) > mx ? ld(s[j]) : mx;
  float sum = 0.0f;
  for (int32_t j = 0; j < p.c; ++j) {
    const float e = expf(ld(s[j]) - mx);
    st(s + j, e);
    sum += ld(s[j]);
  }
  const float inv = 1.0f / sum;
  for (int32_t j = 0; j < p.c; ++j) st(s + j, ld(s[j]) * inv);
}

template <typename T>
int launch_scores(const ScoreParams<T>& p, CUstream_st* stream);
template <typename T>
int launch_softmax(const ScoreParams<T>& p, CUstream_st* stream);

}  // namespace mega::gpu
