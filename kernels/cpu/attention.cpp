// SPDX-License-Identifier: Apache-2.0
// Single-head chunk attention (mega-spec.md, "Chunked attention").
// laplace / relu2: a = f(q.k / C + bias), not normalized over keys.
// softmax: a = softmax(q.k / sqrt(Z) + bias) over keys.
// bias[i][j] = rel_pos_bias[C - 1 + j - i].
#include <cblas.h>

#include <cmath>

#include "cpu/kernels.h"

namespace mega::cpu {

namespace {

float score_scale(const AttentionParams& p) {
  return p.fn == AttentionFn::softmax ? 1.0f / std::sqrt(float(p.z)) : 1.0f / float(p.c);
}

void softmax_row(float* s, int32_t n) {
  float mx = s[0];
  for (int32_t j = 1; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
  double sum = 0.0;
  for (int32_t j = 0; j < n; ++j) {
    s[j] = std::exp(s[j] - mx);
    sum += s[j];
  }
  const float inv = float(1.0 / sum);
  for (int32_t j = 0; j < n; ++j) s[j] *= inv;
}

}  // namespace

void attention_ref(const AttentionParams& p) {
  const float scale = score_scale(p);
  for (int32_t i = 0; i < p.c; ++i) {
    float* row = p.scores + int64_t(i) * p.c;
    for (int32_t j = 0; j < p.c; ++j) {
      float dot = 0.0f;
      for (int32_t z = 0; z < p.z; ++z) dot += p.q[int64_t(i) * p.z + z] * p.k[int64_t(j) * p.z + z];
      const float s = dot * scale + p.rel_pos_bias[p.chunk - 1 + j - i];
      switch (p.fn) {
        case AttentionFn::laplace:
          row[j] = 0.5f * (1.0f + std::erf((s - kLaplaceMu) / kLaplaceDivisor));
          break;
        case AttentionFn::relu2:
          row[j] = s > 0.0f ? s * s : 0.0f;
          break;
        case AttentionFn::softmax:
          row[j] = s;
          break;
      }
    }
    if (p.fn == AttentionFn::softmax) softmax_row(row, p.c);
    for (int32_t h = 0; h < p.hdim; ++h) {
      float acc = 0.0f;
      for (int32_t j = 0; j < p.c; ++j) acc += row[j] * p.v[int64_t(j) * p.hdim + h];
      p.o[int64_t(i) * p.hdim + h] = acc;
    }
  }
}

void attention_blas(const AttentionParams& p, KernelImpl math) {
  const int32_t c = p.c;
  const float scale = score_scale(p);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, c, p.z, 1.0f, p.q, p.z, p.k, p.z, 0.0f, p.scores, c);
  for (int32_t i = 0; i < c; ++i) {
    float* row = p.scores + int64_t(i) * c;
    const float* bias = p.rel_pos_bias + (p.chunk - 1 - i);  // bias[j] for this row, j = 0..c-1
    switch (p.fn) {
      case AttentionFn::laplace:
        laplace_scaled_bias(math, row, scale, bias, row, c);
        break;
      case AttentionFn::relu2:
        for (int32_t j = 0; j < c; ++j) {
          const float s = row[j] * scale + bias[j];
          row[j] = s > 0.0f ? s * s : 0.0f;
        }
        break;
      case AttentionFn::softmax:
        for (int32_t j = 0; j < c; ++j) row[j] = row[j] * scale + bias[j];
        softmax_row(row, c);
        break;
    }
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c, p.hdim, c, 1.0f, p.scores, c, p.v, p.hdim, 0.0f, p.o,
              p.hdim);
}

}  // namespace mega::cpu
