// SPDX-License-Identifier: Apache-2.0
// The model's weight views: what every backend reads, and all it may read of
// a model besides the public mega/mega.hpp. Raw pointers into the mapped
// model file (or into float32 copies the loader owns), plus quantities the
// loader derived once (BatchNorm folded to scale/shift, EMA coefficients in
// double). Validated at load; backends read them without further checks.
// The model holds one copy of each tensor: a backend that wants another
// layout makes it itself, at engine creation (kernels/cpu/packed_weights.h,
// kernels/cuda/plan.h).
//
// The core (runtime/src/model.cpp) fills them; backends (kernels/cpu,
// kernels/cuda) get them with model_weights() and include nothing else of
// the core's but its backend interface (runtime/src/core/).
#pragma once

#include <cstdint>
#include <vector>

#include "mega/mega.hpp"
#include "teacher_graph.h"

namespace mega {

struct NormWeights {
  NormType type = NormType::batch_norm;
  float eps = 1e-5f;
  const float* weight = nullptr;  // layer/rms norm gamma (D)
  const float* bias = nullptr;    // layer norm beta (D)
  float scalar = 1.0f;            // scale norm
  std::vector<float> bn_scale;    // batch norm folded: y = x * scale + shift (D)
  std::vector<float> bn_shift;
};

struct LinearWeights {
  const float* w = nullptr;  // (n_out, n_in), row-major as in PyTorch
  const float* b = nullptr;  // (n_out) or null
  int32_t n_out = 0;
  int32_t n_in = 0;
};

// Per (row, n): row = channel for unidirectional EMAs, D + channel for the
// backward half of bidirectional ones.
struct EmaWeights {
  int32_t n_rows = 0;        // D or 2D
  int32_t n_dim = 0;         // N
  int32_t truncation = 0;    // K, 0: untruncated
  std::vector<double> gain;  // p * beta
  std::vector<double> decay; // q
  std::vector<double> decay_k;  // q^K (0 if untruncated)
  std::vector<double> out;   // gamma * sqrt(1/N)
  const float* omega = nullptr;  // (D)
  // Lag kernels used by the reference implementation: (n_rows, K) computed
  // as the official code does conceptually, in double. Empty if untruncated.
  std::vector<double> kernel;
};

struct LayerWeights {
  NormWeights norm;
  EmaWeights ema;
  LinearWeights v_proj, mx_proj, h_proj;
  const float* qk_gamma = nullptr;  // (2, Z)
  const float* qk_beta = nullptr;   // (2, Z)
  const float* rel_pos_bias = nullptr;  // (2C - 1)
  bool has_ffn = false;
  NormWeights ffn_norm;
  LinearWeights fc1, fc2;
};

struct ModelWeights {
  const float* embed_w = nullptr;  // (D, k); log_power: (2D, k); log_mel: (2P, k); teacher: (D, 96)
  const float* embed_g = nullptr;  // (D) log_power scale; null for linear
  const float* embed_b = nullptr;  // (D)
  const float* embed_m0 = nullptr;  // (D) log_power running mean's start; null: no running mean
  const float* embed_bands = nullptr;  // (B, P) log_mel: the bands' weights over the bins (>= 0); null otherwise
  const float* embed_mix = nullptr;    // (D, B) log_mel: the bands' log energies into the channels
  // embed_w as a linear map from a window of k samples to its F filter
  // outputs (F = D, 2D or 2P; no bias); teacher: from a token's embedding
  LinearWeights embed_filters;
  // teacher_embedding: the front end's graphs (has_teacher)
  bool has_teacher = false;
  teacher::TeacherWeights teacher;
  std::vector<LayerWeights> layers;
  bool has_final_norm = false;
  NormWeights final_norm;
  std::vector<LinearWeights> classifier;
  LinearWeights projection;
};

// A loaded model's weights (valid as long as the model).
const ModelWeights& model_weights(const Model& model);

}  // namespace mega
