// SPDX-License-Identifier: Apache-2.0
// The validated, ready-to-run form of a model: its info, the storage its
// weight views point into (the mapped or copied file, owned float32 copies of
// float16 or misaligned tensors), the weight views themselves
// (core/weights.h) and the converter's self-test.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mega/mega.hpp"
#include "core/weights.h"

namespace mega {

struct ModelData : ModelWeights {
  ModelInfo info;
  // storage
  std::shared_ptr<void> mapping;           // the mapped (or copied) file
  std::vector<std::unique_ptr<float[]>> owned;
  // self-test
  std::vector<float> self_test_input, self_test_logits;
  float self_test_tolerance = 0.0f;
};

// The runtime's access to a Model's insides (Model befriends it).
struct ModelAccess {
  static const ModelData& data(const Model& m);
  static std::shared_ptr<const Model> wrap(std::unique_ptr<ModelData> data);
};

}  // namespace mega
