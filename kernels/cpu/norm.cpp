// SPDX-License-Identifier: Apache-2.0
// Norms over the channels of each token, and activations by model enum.
#include <cmath>

#include "cpu/kernels.h"

namespace mega::cpu {

void norm_apply(const NormWeights& w, const float* x, float* y, int64_t n, int32_t d) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xt = x + t * d;
    float* yt = y + t * d;
    switch (w.type) {
      case NormType::batch_norm:
        for (int32_t i = 0; i < d; ++i) yt[i] = xt[i] * w.bn_scale[size_t(i)] + w.bn_shift[size_t(i)];
        break;
      case NormType::layer_norm: {
        double mean = 0.0, var = 0.0;
        for (int32_t i = 0; i < d; ++i) mean += xt[i];
        mean /= d;
        for (int32_t i = 0; i < d; ++i) var += (xt[i] - mean) * (xt[i] - mean);
        var /= d;
        const double inv = 1.0 / std::sqrt(var + double(w.eps));
        for (int32_t i = 0; i < d; ++i) yt[i] = float((xt[i] - mean) * inv) * w.weight[i] + w.bias[i];
        break;
      }
      case NormType::scale_norm:
      case NormType::rms_norm: {
        double ms = 0.0;
        for (int32_t i = 0; i < d; ++i) ms += double(xt[i]) * xt[i];
        const float inv = float(1.0 / std::sqrt(ms / d + double(w.eps)));
        if (w.type == NormType::scale_norm) {
          for (int32_t i = 0; i < d; ++i) yt[i] = w.scalar * xt[i] * inv;
        } else {
          for (int32_t i = 0; i < d; ++i) yt[i] = xt[i] * w.weight[i] * inv;
        }
        break;
      }
    }
  }
}

void activation_apply(KernelImpl math, Activation act, float* x, int64_t n) {
  switch (act) {
    case Activation::silu: vec_silu(math, x, x, n); break;
    case Activation::relu: vec_relu(math, x, x, n); break;
    case Activation::gelu: vec_gelu(math, x, x, n); break;
    case Activation::gelu_tanh: vec_gelu_tanh(math, x, x, n); break;
    case Activation::linear: break;
  }
}

}  // namespace mega::cpu
