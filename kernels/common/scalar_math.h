// SPDX-License-Identifier: Apache-2.0
// Scalar activations as the PyTorch model code spells them, for the CPU's
// reference kernels and the CUDA kernels alike (host and device builds of one
// definition). The CPU's optimized kernels (cpu/elementwise.cpp) are checked
// against these within a few ulp.
#pragma once

#include <math.h>

#include "common/hd.h"
#include "mega/mega.hpp"

namespace mega::math {

// Laplace attention constants (tools/mega_kws_tools/model/). The divisor is
// sigma * sqrt(2) evaluated in double and rounded once, as PyTorch does.
constexpr float kLaplaceMu = 0.707107f;
constexpr float kLaplaceDivisor = static_cast<float>(0.282095 * 1.4142135623730951);
constexpr float kSqrt2 = 1.41421356f;            // x / math.sqrt(2.0)
constexpr float kSqrt2OverPi = 0.797884561f;  // math.sqrt(2.0 / math.pi)
constexpr float kGeluTanhCubic = 0.044715f;

MEGA_HD inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
// PyTorch's CPU kernel form: x / (1 + exp(-x)).
MEGA_HD inline float silu(float x) { return x / (1.0f + expf(-x)); }
MEGA_HD inline float gelu(float x) { return 0.5f * x * (1.0f + erff(x / kSqrt2)); }
MEGA_HD inline float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x)));
}
// NaN stays NaN, -0 becomes +0 (as cpu::vec_relu).
MEGA_HD inline float relu(float x) { return x <= 0.0f ? 0.0f : x; }
MEGA_HD inline float laplace(float x) { return 0.5f * (1.0f + erff((x - kLaplaceMu) / kLaplaceDivisor)); }
MEGA_HD inline float relu2(float x) { return x > 0.0f ? x * x : 0.0f; }

MEGA_HD inline float activation(Activation act, float x) {
  switch (act) {
    case Activation::silu: return silu(x);
    case Activation::relu: return relu(x);
    case Activation::gelu: return gelu(x);
    case Activation::gelu_tanh: return gelu_tanh(x);
    case Activation::linear: break;
  }
  return x;
}

// Attention weight before normalization: f(dot * scale + bias) for laplace
// and relu2; softmax rows keep the biased score (normalized per row later).
MEGA_HD inline float attention_weight(AttentionFn fn, float dot, float scale, float bias) {
  const float s = dot * scale + bias;
  switch (fn) {
    case AttentionFn::laplace: return laplace(s);
    case AttentionFn::relu2: return relu2(s);
    case AttentionFn::softmax: break;
  }
  return s;
}

// Relative position bias of query i and key j in a chunk of length C:
// rel_pos_bias has 2C - 1 entries, lag 0 at C - 1.
MEGA_HD inline int64_t rel_bias_index(int32_t chunk, int64_t i, int64_t j) { return int64_t(chunk) - 1 + j - i; }

}  // namespace mega::math
