// SPDX-License-Identifier: Apache-2.0
// The CPU backend's own layout of the projections for its optimized linear
// (SimdKernels::linear): each one's w transposed, with the bias (or zeros) as
// one more row, (n_in + 1) x ld floats, columns zero-padded to ld (a
// multiple of kLinearPackCols). Made from the model's weight views at engine
// creation (the model keeps one copy of each tensor), and shared by the
// streams of a batch engine. The scalar reference kernels read the model's
// weights directly and need none of it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "weights.h"

namespace mega::cpu {

struct PackedLinear {
  const float* w = nullptr;  // null: not packed (linear_blas, or linear_ref)
  int32_t ld = 0;            // floats per packed row
};

class PackedWeights {
 public:
  struct Layer {
    PackedLinear v_proj, mx_proj, h_proj, fc1, fc2;
  };
  // Packs the embedding's filters and every layer's projections; null if
  // memory cannot be had.
  static std::shared_ptr<const PackedWeights> create(const ModelWeights& w);

  PackedLinear embed_filters;
  std::vector<Layer> layers;
  int64_t bytes() const { return bytes_; }

 private:
  PackedWeights() = default;
  bool add(const LinearWeights& w, PackedLinear* out);
  std::vector<std::unique_ptr<float[]>> storage_;
  int64_t bytes_ = 0;
};

// Floats per packed row of a projection with n_out outputs, and the packing
// itself into (w.n_in + 1) x linear_padded_outputs(w.n_out) floats.
int32_t linear_padded_outputs(int32_t n_out);
void linear_pack(const LinearWeights& w, float* packed);

}  // namespace mega::cpu
