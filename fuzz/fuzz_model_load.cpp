// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: Model::load_from_memory on arbitrary bytes, then, for
// whatever loads, a CPU engine and a forward pass (a model the loader accepts
// must run without touching memory it does not own).
//
// Every .mega file ends with a 12-byte trailer ("MGCK", size, CRC-32) that a
// mutation almost always breaks; when the input carries the "MGCK" marker
// the trailer is resealed, so mutations reach the FlatBuffers verifier and
// the semantic checks. Inputs without the marker test the trailer checks.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mega/engine.hpp"
#include "mega/mega.hpp"
#include "mega_reseal.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mega::set_blas_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buf(data, data + size);
  if (size >= mega::kTrailerBytes && size <= UINT32_MAX &&
      std::memcmp(data + size - mega::kTrailerBytes, mega::kTrailerMagic, sizeof mega::kTrailerMagic) == 0) {
    mega::reseal_trailer(&buf);
  }
  std::string err;
  mega::Status st = mega::Status::ok;
  auto model = mega::Model::load_from_memory(buf.data(), buf.size(), &err, &st);
  if (!model) {
    if (st == mega::Status::ok || err.empty()) __builtin_trap();  // a refusal must say why
    return 0;
  }
  // Keep each run short (a slow input reads as a timeout): skip big models,
  // and run the reference kernels on small ones only.
  const mega::HParams& hp = model->hparams();
  const int64_t per_token = int64_t(hp.chunk_size + hp.hidden_dim + hp.truncation + hp.ffn_hidden_dim) *
                            (hp.embed_dim + hp.hidden_dim) * hp.n_layers;
  const int64_t tokens = hp.window_samples() / hp.patch_stride;
  if (tokens * per_token > (int64_t(1) << 24)) return 0;
  for (mega::KernelImpl impl : {mega::KernelImpl::optimized, mega::KernelImpl::reference}) {
    if (impl == mega::KernelImpl::reference && tokens * per_token > (int64_t(1) << 20)) break;
    mega::EngineOptions opts;
    opts.kernels = impl;
    auto engine = mega::create_engine("cpu", model, opts, &err);
    if (!engine) continue;
    float diff = 0.0f;
    if (!model->self_test_input().empty() && int64_t(model->self_test_input().size()) <= hp.window_samples()) {
      engine->self_test(&diff);
    } else {
      std::vector<float> clip(size_t(hp.chunk_samples()), 0.25f), logits(size_t(hp.n_classes));
      engine->classify_clip(clip.data(), int64_t(clip.size()), logits.data());
    }
    if (model->streamable()) {
      std::vector<float> block(size_t(hp.chunk_samples()) + 1, -0.5f);
      int64_t used = 0;
      bool done = false;
      engine->push(block.data(), int64_t(block.size()), &used, &done);
    }
  }
  return 0;
}
