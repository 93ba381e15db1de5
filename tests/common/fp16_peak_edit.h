// SPDX-License-Identifier: Apache-2.0
// A model file's stored float16 peak (schema 5, Model.fp16_range) replaced in
// place, for the tests of the loader's checks and of the CUDA backend's
// refusal (the file must store the peaks: the converter's default).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "mega_model_generated.h"
#include "mega_reseal.h"

namespace mega_test {

inline std::vector<uint8_t> with_fp16_peak(std::vector<uint8_t> b, bool residual, float value) {
  const mega::fb::Fp16Range* r = mega::fb::GetModel(b.data())->fp16_range();
  const auto* peak = reinterpret_cast<const flatbuffers::Table*>(residual ? r->residual() : r->other());
  const uint8_t* at = peak->GetAddressOf(mega::fb::Fp16Peak::VT_VALUE);
  std::memcpy(b.data() + (at - b.data()), &value, sizeof value);
  mega::reseal_trailer(&b);
  return b;
}

}  // namespace mega_test
