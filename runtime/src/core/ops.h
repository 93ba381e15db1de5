// SPDX-License-Identifier: Apache-2.0
// The ops interface: the Mega layer's steps as a backend provides them. The
// one forward pass is written against it (forward(), forward_pass.h). The CPU
// backend (kernels/cpu/cpu_ops.h), the CUDA backend and its host emulation
// (kernels/cuda/forward.h) each implement Ops; they all run that one sequence.
// Part of the core's backend interface (runtime/src/core/): backends include
// it, the core includes no backend.
//
// An Ops object owns (or points at) its activations and its streams' state,
// sized at creation. What a step reads and writes is named by Act (the span's
// token activations) and, after the EMA, by the backend's own scratch (v, the
// gate's u, z, r and hx, q, k, o), which the steps of one pass share. How a
// step runs (fused, packed, threaded, batched) is the backend's business.
#pragma once

#include <cstdint>

#include "mega/mega.hpp"
#include "weights.h"

// Returns from the enclosing function with expr's status unless it is ok.
#define MEGA_TRY(expr)                         \
  do {                                         \
    const ::mega::Status s_ = (expr);          \
    if (s_ != ::mega::Status::ok) return s_;   \
  } while (0)

namespace mega {

// The model's input scaling (ModelInfo::input_scaling), the one place it is
// written: every backend applies it to each sample after the input hygiene
// (clean_sample, mega.hpp) and before the patch embedding reads it
// (Span::samples).
inline float scale_input(const ModelInfo& info, float s) {
  return info.input_scaling ? (s - info.input_mean) / (info.input_std + 1e-5f) : s;
}

// What one forward covers: n_streams spans of n_tok tokens (a multiple of C).
struct Span {
  int32_t n_streams = 1;
  int64_t n_tok = 0;
  bool streaming = true;           // causal with state (a step) or a whole clip
  const float* samples = nullptr;  // n_streams blocks of sample_stride: [ctx | n_tok * s] (scale_input)
  int64_t sample_stride = 0;
  const int64_t* chunk_index = nullptr;  // per stream (zeros for clips)
  int64_t rows() const { return int64_t(n_streams) * n_tok; }
};

// The span's activations, rows x D: x (the residual stream), xn (normalized),
// mx (the EMA's output).
enum class Act : int32_t { x = 0, xn = 1, mx = 2 };
// Which norm: a layer's (before or after its attention), its FFN's, the final one.
enum class NormSite : int32_t { layer = 0, ffn = 1, final = 2 };

class Ops {
 public:
  virtual ~Ops() = default;
  // Rows per pass of the steps after the EMA (gate_inputs .. ffn): a multiple
  // of C dividing span.rows(); e.g. one chunk (CPU) or the whole span (CUDA).
  virtual int64_t pass_rows(const Span& span) const = 0;

  // x = patch embedding of the span's samples
  virtual Status embed(const Span& span) = 0;
  // out = norm(in) over rows [r0, r0 + rows); out may be in
  virtual Status norm(NormSite site, int32_t layer, Act in, Act out, int64_t r0, int64_t rows) = 0;
  // mx = silu(EMA(in) + omega * in) over the span; causal spans carry the
  // stream's EMA state on, bidirectional ones add the backward half
  virtual Status ema(int32_t layer, Act in, const Span& span) = 0;
  // rows of a pass: v = act(v_proj in); (u, z, r, hx) = mx_proj mx with
  // u = sigmoid, z, r = silu; q, k = z * gamma + beta
  virtual Status gate_inputs(int32_t layer, Act in, int64_t r0, int64_t rows) = 0;
  // o = f(q k^T scale + rel_pos_bias) v, chunk by chunk over the pass
  virtual Status attention(int32_t layer, int64_t r0, int64_t rows) = 0;
  // x = x + u * (act(h_proj(o * r) + hx) - x)
  virtual Status gate_output(int32_t layer, int64_t r0, int64_t rows) = 0;
  // x = x + fc2(act(fc1(in)))
  virtual Status ffn(int32_t layer, Act in, int64_t r0, int64_t rows) = 0;
  // after the last layer: each chunk's sum of x into the pooling window
  virtual Status pool(const Span& span) = 0;
  // Tests: x after the embedding (slot 0) and after layer l (slot l + 1)
  virtual void trace(int32_t slot, const Span& span) {}
};

}  // namespace mega
