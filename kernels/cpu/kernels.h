// SPDX-License-Identifier: Apache-2.0
// CPU kernels for the Mega layer. Each op has a plain scalar reference (never
// optimized; the ground truth the tests hold everything else to) and an
// optimized twin. Kernels trust their params: the loader and the session
// validated every size.
#pragma once

#include <cstdint>

#include "cpu/elementwise.h"
#include "weights.h"

namespace mega::cpu {

// y (n x n_out) = x (n x n_in) . w^T + b
struct LinearParams {
  const float* x = nullptr;
  int64_t n = 0;
  const LinearWeights* w = nullptr;
  float* y = nullptr;
  // SimdKernels::linear only: w packed (packed_weights.h), ld floats a row
  const float* packed = nullptr;
  int32_t ld = 0;
};
void linear_ref(const LinearParams& p);
void linear_blas(const LinearParams& p);
// The packed layout's column tile (linear_padded_outputs, packed_weights.h).
constexpr int32_t kLinearPackCols = 32;

// y (n x d) = EMA of x (n x d), token-major. For the causal form the state
// carries across calls: h (d x N) and ring (K x d, the last K inputs, slot
// t mod K holds token t), tokens_seen = tokens before this span.
struct EmaParams {
  const EmaWeights* w = nullptr;
  int32_t d = 0;
  int64_t n = 0;
  const float* x = nullptr;
  float* y = nullptr;
  double* h = nullptr;
  float* ring = nullptr;
  int64_t tokens_seen = 0;
  const double* ref_kernel = nullptr;  // (n_rows x K): reference only
  double* scratch = nullptr;           // N doubles: bidirectional fast only
};
void ema_causal_ref(const EmaParams& p);  // optimized twin: SimdKernels::ema_causal
// Whole span, no state: forward rows 0..d-1 plus backward rows d..2d-1.
void ema_bidir_ref(const EmaParams& p);
void ema_bidir_fast(const EmaParams& p);
// (n_rows x K) lag kernels for the reference implementation.
void ema_lag_kernel(const EmaWeights& w, double* kernel);

// One chunk: o (c x hdim) = f(q k^T * scale + bias) v, scores: (c x c) scratch.
struct AttentionParams {
  const float* q = nullptr;  // (c x z)
  const float* k = nullptr;  // (c x z)
  const float* v = nullptr;  // (c x hdim)
  const float* rel_pos_bias = nullptr;  // (2C - 1) for the model's chunk length C
  int32_t chunk = 0;         // C, the model's chunk (the bias is indexed by it)
  int32_t c = 0;             // tokens in this chunk (== chunk)
  int32_t z = 0;
  int32_t hdim = 0;
  AttentionFn fn = AttentionFn::laplace;
  float* scores = nullptr;   // reference and blas only
  float* o = nullptr;
  float* partial = nullptr;  // fused only: the split last block's two halves (attention_partial_floats)
};
void attention_ref(const AttentionParams& p);
// Optimized: SimdKernels::attention (laplace, relu2); softmax and the
// reference math run here, through a (c x c) score matrix and two sgemms.
void attention_blas(const AttentionParams& p, KernelImpl math);

// y = norm(x) over each of the n tokens (d channels); y may alias x.
void norm_apply(const NormWeights& w, const float* x, float* y, int64_t n, int32_t d);

// In place over n values.
void activation_apply(KernelImpl math, Activation act, float* x, int64_t n);

}  // namespace mega::cpu
