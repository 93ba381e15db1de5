// SPDX-License-Identifier: Apache-2.0
// Dense projections: y = x w^T + b, w stored (n_out, n_in) as in PyTorch;
// and their packed layout for the SIMD kernel (packed_weights.h).
#include <cblas.h>

#include <new>

#include "cpu/kernels.h"
#include "cpu/packed_weights.h"

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

int32_t linear_padded_outputs(int32_t n_out) {
  constexpr int32_t cols = kLinearPackCols;
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

bool PackedWeights::add(const LinearWeights& w, PackedLinear* out) {
  if (!w.w) return true;  // no FFN
  const int32_t ld = linear_padded_outputs(w.n_out);
  const size_t n = size_t(w.n_in + 1) * size_t(ld);
  std::unique_ptr<float[]> buf(new (std::nothrow) float[n]);
  if (!buf) return false;
  linear_pack(w, buf.get());
  out->w = buf.get();
  out->ld = ld;
  storage_.push_back(std::move(buf));
  bytes_ += int64_t(n * sizeof(float));
  return true;
}

std::shared_ptr<const PackedWeights> PackedWeights::create(const ModelWeights& w) {
  std::shared_ptr<PackedWeights> p(new (std::nothrow) PackedWeights());
  if (!p) return nullptr;
  p->layers.resize(w.layers.size());
  p->storage_.reserve(1 + 5 * w.layers.size());
  bool ok = p->add(w.embed_filters, &p->embed_filters);
  for (size_t l = 0; ok && l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    Layer& P = p->layers[l];
    ok = p->add(L.v_proj, &P.v_proj) && p->add(L.mx_proj, &P.mx_proj) && p->add(L.h_proj, &P.h_proj) &&
         p->add(L.fc1, &P.fc1) && p->add(L.fc2, &P.fc2);
  }
  return ok ? p : nullptr;
}

}  // namespace mega::cpu
