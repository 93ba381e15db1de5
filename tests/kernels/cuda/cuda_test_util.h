// SPDX-License-Identifier: Apache-2.0
// Helpers for the CUDA tests: skip without a GPU, device copies of host
// arrays, and a comparison that reports the worst element.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "mega/engine.hpp"

// Every CUDA test starts with this: reported as skipped (not passed) by
// ctest when no device is present.
#define MEGA_REQUIRE_GPU()                                      \
  do {                                                          \
    std::string mega_why_;                                      \
    if (!mega::backend_available("cuda", &mega_why_)) {         \
      GTEST_SKIP() << "no CUDA device: " << mega_why_;          \
    }                                                           \
  } while (0)

namespace mega_test {

// On the CPU stand-in (tests/kernels/cuda/standin/) every kernel thread is a fiber
// and a warp shuffle is a context switch per lane: the base-size model costs
// seconds per chunk there. Its cases then use the first few chunks of their
// input (the model is causal: the golden chunk logits' prefix still applies;
// clips are compared with the CPU engine on the same prefix). A GPU runs
// them whole.
#if defined(MEGA_CUDA_STANDIN)
constexpr int64_t kBaseChunkLimit = 3;
#else
constexpr int64_t kBaseChunkLimit = int64_t(1) << 40;
#endif

// The first `chunks` chunks of a model's input (all of it if shorter).
inline std::vector<float> first_chunks(const std::vector<float>& in, int64_t chunk_samples, int64_t chunks) {
  const size_t n = size_t(std::min<int64_t>(int64_t(in.size()), chunks * chunk_samples));
  return std::vector<float>(in.begin(), in.begin() + long(n));
}

// A device array of n T (freed at scope exit); from a host vector or zeros.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&p_, sizeof(T) * (n ? n : 1)), cudaSuccess);
    EXPECT_EQ(cudaMemset(p_, 0, sizeof(T) * (n ? n : 1)), cudaSuccess);
  }
  explicit DeviceArray(const std::vector<T>& v) : DeviceArray(v.size()) { upload(v); }
  ~DeviceArray() { cudaFree(p_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return static_cast<T*>(p_); }
  void upload(const std::vector<T>& v) {
    EXPECT_EQ(cudaMemcpy(p_, v.data(), sizeof(T) * v.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v.data(), p_, sizeof(T) * n_, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

// max |got - want| / (|want| + floor) must stay within tol.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol, double floor,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::fabs(double(got[i]) - double(want[i])) / (std::fabs(double(want[i])) + floor);
    if (!(e <= worst)) {
      worst = std::isnan(e) ? INFINITY : e;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": worst at " << at << ": " << got[at] << " vs " << want[at];
}

// A kernel launcher's result, then the device synchronized, both cudaSuccess.
inline void expect_launched(int err, const char* what) {
  EXPECT_EQ(err, int(cudaSuccess)) << what << ": " << cudaGetErrorString(cudaError_t(err));
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
}

}  // namespace mega_test
