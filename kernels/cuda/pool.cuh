// SPDX-License-Identifier: Apache-2.0
// Mean pooling and the classifier head.
// pool: per stream and channel, the sum of the span's final features goes
// into the window ring (slot chunk_index mod W) and the running total (reset
// at chunk 0), in double like the CPU.
// head: per stream, the features averaged over the window (the last
// min(chunk_index + 1, W) chunks, oldest first) or over the whole total, then
// the classifier layers and the projection. One block per stream, its threads
// splitting the channels and then each layer's outputs (head_mean,
// head_unit); the host runs the same functions stream by stream.
#pragma once

#include <cstdint>

#include "common/scalar_math.h"
#include "storage.h"

struct CUstream_st;

namespace mega::gpu {

template <typename T>
struct PoolParams {
  const T* x = nullptr;          // (n_streams * n_tok, d)
  double* pool = nullptr;        // (n_streams, w, d)
  double* total = nullptr;       // (n_streams, d)
  const int64_t* chunk_index = nullptr;
  int32_t n_streams = 0;
  int64_t n_tok = 0;
  int32_t d = 0, w = 1;
  float xs = 1.0f;  // x is stored as value / xs (Dims::x_scale)
};

template <typename T>
MEGA_HD inline void pool_element(const PoolParams<T>& p, int64_t idx) {
  const int32_t b = int32_t(idx / p.d), c = int32_t(idx % p.d);
  const T* x = p.x + int64_t(b) * p.n_tok * p.d + c;
  double s = 0.0;
  for (int64_t t = 0; t < p.n_tok; ++t) s += double(ld(x[t * p.d]));
  s *= double(p.xs);  // a power of two: exact
  const int64_t ci = p.chunk_index[b];
  p.pool[(int64_t(b) * p.w + ci % p.w) * p.d + c] = s;
  double* tot = p.total + int64_t(b) * p.d + c;
  *tot = (ci == 0 ? 0.0 : *tot) + s;
}

struct HeadLayer {
  const float* w = nullptr;  // (n_out, n_in)
  const float* b = nullptr;  // (n_out) or null
  int32_t n_out = 0, n_in = 0;
};

struct HeadParams {
  const double* pool = nullptr;
  const double* total = nullptr;
  const int64_t* chunk_index = nullptr;
  bool window = true;              // false: the total since chunk 0
  int32_t n_streams = 0, d = 0, w = 1;
  int64_t n_tok = 0;               // tokens per pooled span
  const HeadLayer* layers = nullptr;  // classifier layers, then the projection
  int32_t n_layers = 0;
  Activation act = Activation::gelu;  // after each classifier layer
  float* scratch = nullptr;        // (n_streams, 2 * scratch_dim)
  int32_t scratch_dim = 0;
  float* logits = nullptr;         // (n_streams, n_classes)
};

// Stream b's scratch: two vectors of scratch_dim, the layers' input and output in turn.
MEGA_HD inline float* head_scratch(const HeadParams& p, int32_t b, int32_t l) {
  return p.scratch + int64_t(b) * 2 * p.scratch_dim + (l % 2) * p.scratch_dim;
}

// Channel c of stream b's pooled features, into its scratch 0.
MEGA_HD inline void head_mean(const HeadParams& p, int32_t b, int32_t c) {
  const int64_t ci = p.chunk_index[b];
  const int64_t pooled = p.window ? (ci + 1 < p.w ? ci + 1 : p.w) : ci + 1;
  double s = 0.0;
  if (p.window) {
    for (int64_t i = ci - pooled + 1; i <= ci; ++i) s += p.pool[(int64_t(b) * p.w + i % p.w) * p.d + c];
  } else {
    s = p.total[int64_t(b) * p.d + c];
  }
  head_scratch(p, b, 0)[c] = float(s / double(pooled * p.n_tok));
}

// Output o of layer l for stream b, from scratch l % 2 into the other one (or
// the logits after the projection).
MEGA_HD inline void head_unit(const HeadParams& p, int32_t b, int32_t l, int32_t o) {
  const HeadLayer& L = p.layers[l];
  const float* a = head_scratch(p, b, l);
  const float* row = L.w + int64_t(o) * L.n_in;
  float acc = 0.0f;
  for (int32_t i = 0; i < L.n_in; ++i) acc += a[i] * row[i];
  const float v = acc + (L.b ? L.b[o] : 0.0f);
  if (l == p.n_layers - 1) {
    p.logits[int64_t(b) * L.n_out + o] = v;
  } else {
    head_scratch(p, b, l + 1)[o] = math::activation(p.act, v);
  }
}

MEGA_HD inline void head_stream(const HeadParams& p, int32_t b) {
  for (int32_t c = 0; c < p.d; ++c) head_mean(p, b, c);
  for (int32_t l = 0; l < p.n_layers; ++l) {
    for (int32_t o = 0; o < p.layers[l].n_out; ++o) head_unit(p, b, l, o);
  }
}

template <typename T>
int launch_pool(const PoolParams<T>& p, CUstream_st* stream);
int launch_head(const HeadParams& p, CUstream_st* stream);

}  // namespace mega::gpu
