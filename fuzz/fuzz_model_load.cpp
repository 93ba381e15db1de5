// libFuzzer target: Model::load_from_memory on arbitrary bytes, then, for
// whatever loads, a session and a forward pass (a model the loader accepts
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

#include "mega/mega.hpp"
#include "model_bytes.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mega::set_blas_threads(1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buf(data, data + size);
  if (size >= mega_test::kTrailerBytes && size <= UINT32_MAX &&
      std::memcmp(data + size - mega_test::kTrailerBytes, "MGCK", 4) == 0) {
    mega_test::reseal(&buf);
  }
  std::string err;
  mega::Status st = mega::Status::ok;
  auto model = mega::Model::load_from_memory(buf.data(), buf.size(), &err, &st);
  if (!model) {
    if (st == mega::Status::ok || err.empty()) __builtin_trap();  // a refusal must say why
    return 0;
  }
  // Keep each run short: skip models whose forward pass would take long.
  const mega::HParams& hp = model->hparams();
  const int64_t work = int64_t(hp.n_layers) * hp.chunk_size * (hp.chunk_size + hp.hidden_dim + hp.truncation) *
                       (hp.embed_dim + hp.hidden_dim);
  if (hp.window_samples() > (int64_t(1) << 16) || work > (int64_t(1) << 26)) return 0;
  for (mega::KernelImpl impl : {mega::KernelImpl::reference, mega::KernelImpl::optimized}) {
    mega::SessionOptions opts;
    opts.kernels = impl;
    auto session = mega::Session::create(model, opts, &err);
    if (!session) continue;
    std::vector<float> clip(size_t(hp.window_samples()), 0.25f), logits(size_t(hp.n_classes));
    session->classify_clip(clip.data(), int64_t(clip.size()), logits.data());
    float diff = 0.0f;
    if (!model->self_test_input().empty()) session->self_test(&diff);
    if (model->streamable()) {
      int64_t used = 0;
      bool done = false;
      session->push(clip.data(), int64_t(clip.size()), &used, &done);
    }
  }
  return 0;
}
