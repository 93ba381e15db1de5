// SPDX-License-Identifier: Apache-2.0
// tiny_patch (no input scaling) with its embedding weights scaled by 1e25:
// loud input overflows the network, silence does not (the file stays valid:
// every weight is finite). The hostile-input tests of every backend use it to
// reach the last line of defence, non-finite logits. Another factor gives
// other magnitudes (the CUDA float16 range check's tests).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "golden.h"
#include "mega_model_generated.h"
#include "mega_reseal.h"

namespace mega_test {

inline std::vector<uint8_t> overflowing_model(float factor = 1e25f) {
  std::ifstream f(fixture_path("tiny_patch.mega"), std::ios::binary);
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), {});
  const mega::fb::Model* m = mega::fb::GetModel(b.data());
  for (const mega::fb::Tensor* t : *m->tensors()) {
    if (t->name()->str() != "embed_tokens.weight") continue;
    uint8_t* data = b.data() + (t->data()->data() - b.data());
    for (size_t i = 0; i + 4 <= t->data()->size(); i += 4) {
      float w;
      std::memcpy(&w, data + i, 4);
      w *= factor;
      std::memcpy(data + i, &w, 4);
    }
  }
  mega::reseal_trailer(&b);
  return b;
}

}  // namespace mega_test
