// SPDX-License-Identifier: Apache-2.0
// The Mega layer's elementwise steps around its GEMMs, each one pass:
//   bias_act:     y = act(y + bias)                   (v, FFN hidden)
//   split:        base = mx Wmx^T + bmx split into u = sigmoid, z and r = silu,
//                 hx; q and k = z * gamma + beta       (mega-spec.md step 3)
//   out_gate:     o *= r
//   residual:     x = x + u * (act(hb + bh + hx) - x)
//   add_residual: x = x + (y + bias)                   (FFN output)
// base rows hold [u (d) | z (z) | r (h) | hx (d)]. The attention output o and
// the h_proj / FFN outputs (hb, y) are float32 in either storage type: o sums
// over a whole chunk of values (1000 on the base model) and o * r reaches
// 1e5-1e7 there, past float16's 65504 (kernels/cuda/README.md, FP16).
#pragma once

#include <cstdint>

#include "common/scalar_math.h"
#include "storage.h"

struct CUstream_st;

namespace mega::gpu {

template <typename T>
struct BiasActParams {
  T* y = nullptr;  // (rows, cols)
  const float* bias = nullptr;
  int64_t rows = 0;
  int32_t cols = 0;
  Activation act = Activation::linear;
  float in_scale = 1.0f, out_scale = 1.0f;  // y is read as value / in_scale, written as value / out_scale
};

template <typename T>
MEGA_HD inline void bias_act_element(const BiasActParams<T>& p, int64_t idx) {
  st(p.y + idx, math::activation(p.act, ld(p.y[idx]) * p.in_scale + p.bias[idx % p.cols]) / p.out_scale);
}

// Widths shared by the gating steps.
struct GateDims {
  int32_t d = 0, z = 0, h = 0;
  MEGA_HD int32_t cols() const { return 2 * d + z + h; }
};

template <typename T>
struct SplitParams {
  T* base = nullptr;              // (rows, 2d + z + h), in place
  const float* bias = nullptr;    // (2d + z + h)
  const float* gamma = nullptr;   // (2, z)
  const float* beta = nullptr;    // (2, z)
  T* q = nullptr;                 // (rows, z)
  T* k = nullptr;                 // (rows, z)
  int64_t rows = 0;
  GateDims g;
};

template <typename T>
MEGA_HD inline void split_element(const SplitParams<T>& p, int64_t idx) {
  const int32_t w = p.g.cols();
  const int32_t col = int32_t(idx % w);
  const int64_t row = idx / w;
  const float v = ld(p.base[idx]) + p.bias[col];
  if (col < p.g.d) {
    st(p.base + idx, math::sigmoid(v));
  } else if (col < p.g.d + p.g.z + p.g.h) {
    const float s = math::silu(v);
    st(p.base + idx, s);
    const int32_t i = col - p.g.d;
    if (i < p.g.z) {
      st(p.q + row * p.g.z + i, s * p.gamma[i] + p.beta[i]);
      st(p.k + row * p.g.z + i, s * p.gamma[p.g.z + i] + p.beta[p.g.z + i]);
    }
  } else {
    st(p.base + idx, v);
  }
}

template <typename T>
struct OutGateParams {
  float* o = nullptr;       // (rows, h), float32 whatever T
  const T* base = nullptr;  // r at column d + z
  int64_t rows = 0;
  GateDims g;
};

template <typename T>
MEGA_HD inline void out_gate_element(const OutGateParams<T>& p, int64_t idx) {
  const int64_t row = idx / p.g.h;
  const int32_t i = int32_t(idx % p.g.h);
  st(p.o + idx, ld(p.o[idx]) * ld(p.base[row * p.g.cols() + p.g.d + p.g.z + i]));
}

template <typename T>
struct ResidualParams {
  T* x = nullptr;            // (rows, d), the layer input, updated
  const float* hb = nullptr; // (rows, d): (o * r) Wh^T, float32 whatever T
  const float* bh = nullptr; // (d)
  const T* base = nullptr;   // u at column 0, hx at column d + z + h
  int64_t rows = 0;
  GateDims g;
  Activation act = Activation::silu;
  float xs = 1.0f;           // x is stored as value / xs (Dims::x_scale)
};

template <typename T>
MEGA_HD inline void residual_element(const ResidualParams<T>& p, int64_t idx) {
  const int64_t row = idx / p.g.d;
  const int32_t i = int32_t(idx % p.g.d);
  const T* b = p.base + row * p.g.cols();
  const float h = math::activation(p.act, (ld(p.hb[idx]) + p.bh[i]) + ld(b[p.g.d + p.g.z + p.g.h + i]));
  const float res = ld(p.x[idx]) * p.xs;
  st(p.x + idx, (res + ld(b[i]) * (h - res)) / p.xs);
}

template <typename T>
struct AddResidualParams {
  T* x = nullptr;            // (rows, cols)
  const float* y = nullptr;  // (rows, cols), float32 whatever T
  const float* bias = nullptr;
  int64_t rows = 0;
  int32_t cols = 0;
  float xs = 1.0f;  // x and y are stored as value / xs (y: fc2 of the scaled FFN hidden layer)
};

template <typename T>
MEGA_HD inline void add_residual_element(const AddResidualParams<T>& p, int64_t idx) {
  st(p.x + idx, (ld(p.x[idx]) * p.xs + (ld(p.y[idx]) * p.xs + p.bias[idx % p.cols])) / p.xs);
}

template <typename T>
int launch_bias_act(const BiasActParams<T>& p, CUstream_st* stream);
template <typename T>
int launch_split(const SplitParams<T>& p, CUstream_st* stream);
template <typename T>
int launch_out_gate(const OutGateParams<T>& p, CUstream_st* stream);
template <typename T>
int launch_residual(const ResidualParams<T>& p, CUstream_st* stream);
template <typename T>
int launch_add_residual(const AddResidualParams<T>& p, CUstream_st* stream);

}  // namespace mega::gpu
