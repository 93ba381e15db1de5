// SPDX-License-Identifier: Apache-2.0
// Elementwise float kernels: exp, erf and the activations built on them.
//
// Every function maps in[0..n) to out[0..n). Contract shared by all of them:
//   - n <= 0 is a no-op (pointers are not touched, so they may be null);
//   - pointers need no particular alignment;
//   - out may be the same pointer as in (in place); partial overlap is not supported;
//   - no allocation, no exceptions, no global state.
//
// KernelImpl::reference is a plain scalar loop over libm in float, written the way the
// PyTorch model code spells each formula; it is the yardstick for tests and debugging.
// KernelImpl::optimized uses branch-free polynomial code that the compiler vectorizes; it is
// accurate to a few ulp against double-precision libm and saturates cleanly at extremes
// (no NaN from any non-NaN input). Results that would fall below FLT_MIN (exp of
// x < -87.3365, the far tails of sigmoid/erfc) are flushed to 0 rather than computed as
// denormals, which are very slow on x86.
#pragma once

#include <cstdint>

#include "mega/mega.hpp"

namespace mega::cpu {

// Which kernels: KernelImpl (mega.hpp), reference or optimized.

// Laplace attention constants, as in the PyTorch model (tools/mega_kws_tools/model/).
inline constexpr float kLaplaceMu = 0.707107f;
inline constexpr float kLaplaceSigma = 0.282095f;
// PyTorch evaluates sigma * sqrt(2.0) with Python doubles (sigma = 0.282095 as a double)
// and rounds the product once to float for the tensor division: 0x1.988468p-2.
// (Rounding sigma to float first would give 0x1.988466p-2, one ulp lower.)
inline constexpr float kLaplaceDivisor = static_cast<float>(0.282095 * 1.4142135623730951);

void vec_exp(KernelImpl impl, const float* in, float* out, int64_t n);
void vec_erf(KernelImpl impl, const float* in, float* out, int64_t n);
// 1 / (1 + exp(-x))
void vec_sigmoid(KernelImpl impl, const float* in, float* out, int64_t n);
// x * sigmoid(x)
void vec_silu(KernelImpl impl, const float* in, float* out, int64_t n);
// exact GELU: 0.5 x (1 + erf(x / sqrt(2)))
void vec_gelu(KernelImpl impl, const float* in, float* out, int64_t n);
// tanh GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
void vec_gelu_tanh(KernelImpl impl, const float* in, float* out, int64_t n);
// max(x, 0); NaN stays NaN. Both impls are the same code.
void vec_relu(KernelImpl impl, const float* in, float* out, int64_t n);
// Laplace attention function: 0.5 (1 + erf((x - mu) / (sigma sqrt(2)))).
void vec_laplace(KernelImpl impl, const float* in, float* out, int64_t n);
// Fused row of attention weights: out[i] = laplace(in[i] * scale + bias[i]).
// bias may also be the same pointer as out.
void laplace_scaled_bias(KernelImpl impl, const float* in, float scale, const float* bias,
                         float* out, int64_t n);

}  // namespace mega::cpu
