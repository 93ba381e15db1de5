// SPDX-License-Identifier: Apache-2.0
// Loading a model, creating an engine and streaming through it inside a
// GoogleTest test.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mega/engine.hpp"
#include "mega/mega.hpp"

namespace mega_test {

// True in a cross build whose tests run under an emulator (qemu-user, 10-30x
// slower). A few long cases then feed less audio or fewer block sizes; each
// says what it leaves to the native build, which runs the whole case.
#ifdef MEGA_TEST_EMULATED
inline constexpr bool kEmulated = true;
#else
inline constexpr bool kEmulated = false;
#endif

// True in a build with AddressSanitizer and UBSan (3-10x slower, most on
// small pushes): the same kind of trim.
#ifdef MEGA_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

inline std::shared_ptr<const mega::Model> load(const std::string& path) {
  std::string err;
  auto m = mega::Model::load(path, &err);
  EXPECT_TRUE(m) << path << ": " << err;
  return m;
}

// A CPU engine with those kernels and threads.
inline std::unique_ptr<mega::Engine> cpu_engine(const std::shared_ptr<const mega::Model>& m,
                                                mega::KernelImpl impl = mega::KernelImpl::optimized,
                                                int32_t n_threads = 1, int64_t max_clip = 0) {
  std::string err;
  mega::EngineOptions o;
  o.kernels = impl;
  o.n_threads = n_threads;
  o.max_clip_samples = max_clip;
  auto e = mega::create_engine("cpu", m, o, &err);
  EXPECT_TRUE(e) << err;
  return e;
}

inline std::unique_ptr<mega::Engine> engine(const std::shared_ptr<const mega::Model>& m, const std::string& backend,
                                            int64_t max_clip = 0, bool fp16 = false) {
  mega::EngineOptions o;
  o.max_clip_samples = max_clip;
  o.fp16 = fp16;
  std::string err;
  auto e = mega::create_engine(backend, m, o, &err);
  EXPECT_TRUE(e) << backend << ": " << err;
  return e;
}

// Every completed chunk's window logits of `in`, pushed in blocks of `block`
// samples through an engine.
inline std::vector<float> window_logits(mega::Engine& s, const std::vector<float>& in, int64_t block) {
  std::vector<float> out;
  const int32_t nc = s.model().hparams().n_classes;
  const int64_t cs = s.model().hparams().chunk_samples();
  for (size_t off = 0; off < in.size(); off += size_t(block)) {
    const int64_t n = std::min<int64_t>(block, int64_t(in.size() - off));
    EXPECT_EQ(s.push_all(in.data() + off, n,
                         [&](const mega::ChunkResult& r) {
                           EXPECT_EQ(r.end_sample, (r.chunk_index + 1) * cs);
                           out.insert(out.end(), r.logits, r.logits + nc);
                         }),
              mega::Status::ok)
        << s.last_error();
  }
  return out;
}

}  // namespace mega_test
