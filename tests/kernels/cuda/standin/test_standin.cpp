// SPDX-License-Identifier: Apache-2.0
// The CUDA stand-in's own tests: what it promises to catch, it catches.
// Barriers are real (a missing one changes the result for some seed), blocks
// run in a random order (an inter-block race shows), shuffles exchange the
// right lanes and reject mismatched masks, a barrier not every thread
// reaches is a deadlock, graph capture records parameters by value and
// rejects synchronous calls, deferred streams show reads before completion
// as NaN and do not order the legacy stream before a non-blocking one, and
// cuBLAS matches a plain loop and checks its arguments.
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "launch.cuh"

namespace {

namespace cs = cuda_standin;

// Restores the default configuration and clears errors after each test.
class Standin : public ::testing::Test {
 protected:
  void SetUp() override { cs::set_config(cs::Config()); }
  void TearDown() override { cs::set_config(cs::Config()); }
  static void seed(uint64_t s) {
    cs::Config c = cs::config();
    c.seed = s;
    cs::set_config(c);
  }
  static void deferred(bool integrated = false) {
    cs::Config c = cs::config();
    c.deferred = true;
    c.integrated = integrated;
    cs::set_config(c);
  }
};

template <typename T>
T* device_alloc(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, sizeof(T) * n), cudaSuccess);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> download(const T* d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, sizeof(T) * n, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// Every thread writes its slot, then thread 0 sums the block's slots.
__global__ void block_sum(int* out, bool barrier) {
  __shared__ int slots[64];
  slots[threadIdx.x] = int(threadIdx.x + 1 + 100 * blockIdx.x);
  if (barrier) __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0;
    for (unsigned i = 0; i < blockDim.x; ++i) s += slots[i];
    out[blockIdx.x] = s;
  }
}

TEST_F(Standin, BarrierIsRealAndAMissingOneShows) {
  int* out = device_alloc<int>(4);
  auto want = [](int b) { return 64 * 65 / 2 + 6400 * b; };
  int wrong_without = 0;
  for (uint64_t s = 1; s <= 8; ++s) {
    seed(s);
    MEGA_KERNEL_LAUNCH(4, 64, 0, nullptr, block_sum)(out, true);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const auto with = download(out, 4);
    for (int b = 0; b < 4; ++b) EXPECT_EQ(with[size_t(b)], want(b)) << "seed " << s;
    MEGA_KERNEL_LAUNCH(4, 64, 0, nullptr, block_sum)(out, false);
    const auto without = download(out, 4);
    for (int b = 0; b < 4; ++b) wrong_without += without[size_t(b)] != want(b);
  }
  EXPECT_GT(wrong_without, 0) << "without the barrier every seed still gave the right sum";
  cudaFree(out);
}

// Block b reads what block b - 1 wrote: right only if blocks ran in order.
__global__ void chain(int* x) {
  if (threadIdx.x != 0) return;
  const unsigned b = blockIdx.x;
  x[b + 1] = x[b] + 1;
}

TEST_F(Standin, BlocksRunInARandomOrderSoInterBlockRacesShow) {
  int* x = device_alloc<int>(33);
  int orders_wrong = 0;
  for (uint64_t s = 1; s <= 4; ++s) {
    seed(s);
    ASSERT_EQ(cudaMemset(x, 0, sizeof(int) * 33), cudaSuccess);
    MEGA_KERNEL_LAUNCH(32, 32, 0, nullptr, chain)(x);
    orders_wrong += download(x, 33)[32] != 32;
  }
  EXPECT_GT(orders_wrong, 0);
  cudaFree(x);
}

// Sum of a value over groups of `width` lanes with xor shuffles.
__global__ void group_sum(const float* in, float* out, int width) {
  const int lane = int(threadIdx.x) & 31;
  const unsigned group = width == 32 ? 0xffffffffu : ((1u << width) - 1u) << (lane - lane % width);
  float v = in[threadIdx.x];
  for (int off = width / 2; off > 0; off /= 2) v += __shfl_xor_sync(group, v, off, width);
  out[threadIdx.x] = v;
}

TEST_F(Standin, ShufflesExchangeBetweenTheLanesOfAGroup) {
  std::vector<float> h(64);
  for (size_t i = 0; i < h.size(); ++i) h[i] = float(i * i % 17);
  float* in = device_alloc<float>(64);
  float* out = device_alloc<float>(64);
  ASSERT_EQ(cudaMemcpy(in, h.data(), sizeof(float) * 64, cudaMemcpyHostToDevice), cudaSuccess);
  for (int width : {32, 8, 4}) {
    MEGA_KERNEL_LAUNCH(1, 64, 0, nullptr, group_sum)(in, out, width);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const auto got = download(out, 64);
    for (size_t i = 0; i < 64; ++i) {
      float want = 0.0f;
      for (size_t j = i / size_t(width) * size_t(width); j < (i / size_t(width) + 1) * size_t(width); ++j) want += h[j];
      EXPECT_EQ(got[i], want) << "width " << width << " lane " << i;
    }
  }
  cudaFree(in);
  cudaFree(out);
}

// Lanes 0-15 say "all 32 lanes", lanes 16-31 say "lanes 16-31".
__global__ void bad_masks(float* out) {
  const unsigned mask = threadIdx.x < 16 ? 0xffffffffu : 0xffff0000u;
  out[threadIdx.x] = __shfl_xor_sync(mask, 1.0f, 1);
}

// Half the block returns before the barrier the other half waits at.
__global__ void divergent_barrier(float* out) {
  if (threadIdx.x < 16) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

TEST_F(Standin, MismatchedMasksAndUnreachableBarriersAreFaults) {
  float* out = device_alloc<float>(32);
  MEGA_KERNEL_LAUNCH(1, 32, 0, nullptr, bad_masks)(out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_NE(std::string(cs::last_fault()).find("different masks"), std::string::npos) << cs::last_fault();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure) << "a kernel fault is sticky";
  cs::reset_errors();
  MEGA_KERNEL_LAUNCH(1, 32, 0, nullptr, divergent_barrier)(out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_NE(std::string(cs::last_fault()).find("deadlock"), std::string::npos) << cs::last_fault();
  cs::reset_errors();
  MEGA_KERNEL_LAUNCH(1, 2048, 0, nullptr, divergent_barrier)(out);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration) << "more than 1024 threads per block";
  cudaFree(out);
}

__global__ void store(float* out, float v) { out[threadIdx.x] = v; }

TEST_F(Standin, GraphsRecordParametersByValueAndRejectSynchronousCalls) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* out = device_alloc<float>(8);
  float v = 1.0f;
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  MEGA_KERNEL_LAUNCH(1, 8, 0, s, store)(out, v);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  cudaGraphExec_t x = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  EXPECT_TRUE(std::isnan(download(out, 8)[0])) << "captured work ran during the capture";
  v = 2.0f;
  ASSERT_EQ(cudaGraphLaunch(x, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(download(out, 8)[3], 1.0f);

  // a synchronous copy during a capture is refused and invalidates it
  float h[8] = {};
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t bad = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &bad), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(bad, nullptr);
  cudaGetLastError();
  cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
  cudaFree(out);
  cudaStreamDestroy(s);
}

TEST_F(Standin, DeferredWorkShowsReadsBeforeCompletion) {
  deferred();
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float* d = device_alloc<float>(8);
  float* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), sizeof(float) * 8, cudaHostAllocDefault), cudaSuccess);
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  MEGA_KERNEL_LAUNCH(1, 8, 0, s, store)(d, 5.0f);
  ASSERT_EQ(cudaMemcpyAsync(pinned, d, sizeof(float) * 8, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  EXPECT_TRUE(std::isnan(pinned[0])) << "the copy's destination must read NaN until it completes";
  EXPECT_EQ(cudaEventQuery(e), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
  EXPECT_EQ(pinned[7], 5.0f);

  // a plain cudaMemcpy from pageable memory is ordered on the legacy stream,
  // which a non-blocking stream does not wait for
  const std::vector<float> ones(8, 1.0f);
  float* w = device_alloc<float>(8);
  ASSERT_EQ(cudaMemcpy(w, ones.data(), sizeof(float) * 8, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned, w, sizeof(float) * 8, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(std::isnan(pinned[0])) << "the non-blocking stream read the weights before the legacy copy";
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaEventDestroy(e);
  cudaFreeHost(pinned);
  cudaFree(d);
  cudaFree(w);
  cudaStreamDestroy(s);
}

TEST_F(Standin, MemcpyChecksDirectionAndBounds) {
  float* d = device_alloc<float>(4);
  float h[8] = {};
  EXPECT_EQ(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice), cudaErrorInvalidValue) << "past the allocation";
  EXPECT_EQ(cudaMemcpy(h, d, sizeof(float) * 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue) << "wrong direction";
  EXPECT_EQ(cudaMemcpy(d, h, sizeof(float) * 4, cudaMemcpyHostToDevice), cudaSuccess);
  cudaGetLastError();
  cudaFree(d);
}

// C (m x n) = A (m x k) B (k x n), column-major, by a plain loop.
std::vector<float> ref_gemm(bool ta, int m, int n, int k, const std::vector<float>& a, int lda,
                            const std::vector<float>& b, int ldb) {
  std::vector<float> c(size_t(m * n));
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double s = 0.0;
      for (int l = 0; l < k; ++l) s += double(ta ? a[size_t(i * lda + l)] : a[size_t(l * lda + i)]) * b[size_t(j * ldb + l)];
      c[size_t(j * m + i)] = float(s);
    }
  }
  return c;
}

TEST_F(Standin, CublasMatchesAPlainLoopAndChecksItsArguments) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const int m = 7, n = 5, k = 3, lda = 9, ldb = 4;  // awkward: leading dimensions past the rows
  std::vector<float> a(size_t(lda * k) * 2), b(size_t(ldb * n) * 2);
  for (size_t i = 0; i < a.size(); ++i) a[i] = float(int(i % 11) - 5) * 0.25f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = float(int(i % 7) - 3) * 0.5f;
  float* da = device_alloc<float>(a.size());
  float* db = device_alloc<float>(b.size());
  float* dc = device_alloc<float>(size_t(m * n) * 2);
  ASSERT_EQ(cudaMemcpy(da, a.data(), sizeof(float) * a.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db, b.data(), sizeof(float) * b.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_32F, lda, lda * k, db,
                                       CUDA_R_32F, ldb, ldb * n, &zero, dc, CUDA_R_32F, m, m * n, 2,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  const auto got = download(dc, size_t(m * n) * 2);
  for (int batch = 0; batch < 2; ++batch) {
    const std::vector<float> ab(a.begin() + batch * lda * k, a.begin() + (batch + 1) * lda * k);
    const std::vector<float> bb(b.begin() + batch * ldb * n, b.begin() + (batch + 1) * ldb * n);
    const auto want = ref_gemm(false, m, n, k, ab, lda, bb, ldb);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[size_t(batch * m * n) + i], want[i], 1e-5) << i;
  }
  // cuBLAS's checks
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_32F, m - 1, db, CUDA_R_32F, ldb, &zero,
                         dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE)
      << "lda < m";
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_32F, lda, db, CUDA_R_32F, ldb, &zero,
                         dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_SUPPORTED)
      << "TF32";
  EXPECT_EQ(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, da, CUDA_R_32F, 1, 0, db,
                                       CUDA_R_32F, 1, 0, &zero, dc, CUDA_R_32F, 1, 0, 65536, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE)
      << "a batch past 65535";
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a.data(), CUDA_R_32F, lda, db, CUDA_R_32F, ldb,
                         &zero, dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_EXECUTION_FAILED)
      << "a host pointer";

  // float16 operands go through float and round back
  std::vector<__half> ah(size_t(m * k)), bh(size_t(k * n));
  std::vector<float> af(ah.size()), bf(bh.size());
  for (size_t i = 0; i < ah.size(); ++i) ah[i] = __float2half_rn(a[i]), af[i] = __half2float(ah[i]);
  for (size_t i = 0; i < bh.size(); ++i) bh[i] = __float2half_rn(b[i]), bf[i] = __half2float(bh[i]);
  __half* dah = device_alloc<__half>(ah.size());
  __half* dbh = device_alloc<__half>(bh.size());
  __half* dch = device_alloc<__half>(size_t(m * n));
  ASSERT_EQ(cudaMemcpy(dah, ah.data(), sizeof(__half) * ah.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dbh, bh.data(), sizeof(__half) * bh.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, dah, CUDA_R_16F, k, dbh, CUDA_R_16F, k, &zero,
                         dch, CUDA_R_16F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  const auto want16 = ref_gemm(true, m, n, k, af, k, bf, k);
  const auto got16 = download(dch, size_t(m * n));
  for (size_t i = 0; i < want16.size(); ++i) {
    EXPECT_EQ(__half2float(got16[i]), __half2float(__float2half_rn(want16[i]))) << i;
  }
  cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dah), cudaFree(dbh), cudaFree(dch);
  cublasDestroy(h);
}

}  // namespace
