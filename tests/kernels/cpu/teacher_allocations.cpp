// SPDX-License-Identifier: Apache-2.0
// The teacher front end's streaming runner (kernels/cpu/teacher_frontend.h)
// allocates nothing per push after creation. Part of mega_alloc_tests, which
// replaces the process's allocator (bench/alloc_counter.cpp).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "alloc_counter.h"
#include "cpu/teacher_frontend.h"

namespace {

namespace t = mega::teacher;

TEST(Allocations, NoneInTheTeacherFrontEndPush) {
  std::mt19937 rng(83);
  std::normal_distribution<float> d(0.0f, 0.05f);
  // one buffer for every tensor: the weights only need their shapes here
  std::vector<float> weights(size_t(t::kBins) * t::kFft * 2 + 96 * 96 * 9, 0.0f);
  for (auto& v : weights) v = d(rng);
  t::TeacherWeights w;
  w.stft_real = w.stft_imag = w.mel = weights.data();
  for (int32_t i = 0; i < t::kConvLayers; ++i) {
    w.conv_weight[i] = weights.data();
    w.conv_bias[i] = i + 1 < t::kConvLayers ? weights.data() : nullptr;
  }
  std::unique_ptr<t::TeacherFrontEnd> f;
  const char* error = nullptr;
  ASSERT_EQ(t::TeacherFrontEnd::create(w, mega::KernelImpl::optimized, &f, &error), mega::Status::ok);
  mega::set_blas_threads(1);
  std::vector<float> audio(40000), out(size_t(t::kEmbedding) * 32);
  for (auto& v : audio) v = 1000.0f * d(rng);
  int64_t got = 0, made = 0;
  ASSERT_EQ(f->push(audio.data(), 14000, out.data(), 32, &got), mega::Status::ok);  // warm-up
  ASSERT_EQ(got, 1);
  const int64_t blocks[] = {1, 7, 1280, 999, 4093};
  const int64_t counted = mega_alloc::allocations_in([&] {
    int64_t at = 14000;
    for (size_t b = 0; at < int64_t(audio.size()); b = (b + 1) % 5) {
      const int64_t n = std::min<int64_t>(blocks[b], int64_t(audio.size()) - at);
      f->push(audio.data() + at, n, out.data(), 32, &got);
      made += got;
      at += n;
    }
    f->reset();
  });
  EXPECT_EQ(made, (40000 - 13152) / 1280 + 1 - 1);
  EXPECT_EQ(counted, 0);
}

}  // namespace
