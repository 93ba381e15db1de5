// Dense projections: y = x w^T + b, w stored (n_out, n_in) as in PyTorch.
#include <cblas.h>

#include "cpu/kernels.h"

namespace mega::cpu {

void linear_ref(const LinearParams& p) {
  const LinearWeights& w = *p.w;
  for (int64_t t = 0; t < p.n; ++t) {
    const float* x = p.x + t * w.n_in;
    float* y = p.y + t * w.n_out;
    for (int32_t o = 0; o < w.n_out; ++o) {
      const float* row = w.w + int64_t(o) * w.n_in;
      float acc = 0.0f;
      for (int32_t i = 0; i < w.n_in; ++i) acc += x[i] * row[i];
      y[o] = acc + (w.b ? w.b[o] : 0.0f);
    }
  }
}

void linear_blas(const LinearParams& p) {
  const LinearWeights& w = *p.w;
  if (p.n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(p.n), w.n_out, w.n_in, 1.0f, p.x, w.n_in, w.w,
              w.n_in, 0.0f, p.y, w.n_out);
  if (w.b) {
    for (int64_t t = 0; t < p.n; ++t) {
      float* y = p.y + t * w.n_out;
      for (int32_t o = 0; o < w.n_out; ++o) y[o] += w.b[o];
    }
  }
}

}  // namespace mega

namespace mega {

int32_t linear_padded_outputs(int32_t n_out) {
  constexpr int32_t cols = cpu::kLinearPackCols;
  return (n_out + cols - 1) / cols * cols;
}

void linear_pack(const LinearWeights& w, float* packed) {
  const int32_t ld = linear_padded_outputs(w.n_out);
  for (int32_t i = 0; i <= w.n_in; ++i) {
    float* row = packed + int64_t(i) * ld;
    for (int32_t o = 0; o < ld; ++o) {
      const bool in = o < w.n_out;
      if (i < w.n_in) {
        row[o] = in ? w.w[int64_t(o) * w.n_in + i] : 0.0f;
      } else {
        row[o] = in && w.b ? w.b[o] : 0.0f;
      }
    }
  }
}

}  // namespace mega
