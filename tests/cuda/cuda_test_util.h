// Helpers for the CUDA tests: skip without a GPU, device copies of host
// arrays, and a comparison that reports the worst element.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

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

}  // namespace mega_test
