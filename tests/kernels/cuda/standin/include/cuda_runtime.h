// SPDX-License-Identifier: Apache-2.0
// The CUDA stand-in's cuda_runtime.h: the part of the CUDA runtime API the
// backend (kernels/) and its tests use, run on the CPU (tests/kernels/cuda/standin/,
// docs/cuda-standin.md). Test code only: it is never installed or shipped.
//
// Kernels are plain C++ functions; a launch (MEGA_KERNEL_LAUNCH in
// kernels/cuda/launch.cuh) runs every block of the grid, in a seeded random order,
// and every thread of a block as a cooperative fiber, so __syncthreads() is a
// real barrier and warp shuffles exchange values between the lanes of a
// 32-lane warp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_standin_types.h"

// ---- qualifiers: nothing on the host
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One copy per OS thread; blocks run one after another on a thread, so this is
// per-block memory. (Not poisoned between blocks; see docs/cuda-standin.md.)
#define __shared__ static thread_local

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};

namespace cuda_standin {

// What a kernel thread sees (threadIdx and friends).
struct ThreadContext {
  uint3 thread_idx, block_idx;
  dim3 block_dim, grid_dim;
  int32_t linear = 0;  // thread index within the block
};
ThreadContext& this_thread();

// Barrier and warp exchange (fibers.cpp).
void syncthreads();
uint64_t shuffle(unsigned mask, uint64_t bits, int32_t src_lane, int32_t width, int kind);
enum ShuffleKind { kShflIdx = 0, kShflXor = 1, kShflDown = 2, kShflUp = 3 };

// A kernel with its arguments bound by value (as CUDA copies them at launch).
struct KernelCall {
  virtual ~KernelCall() = default;
  virtual void run_thread() = 0;  // one thread (this_thread() is set)
  virtual KernelCall* clone() const = 0;
};

template <typename... P>
struct BoundKernel final : KernelCall {
  void (*fn)(P...);
  std::tuple<std::decay_t<P>...> args;
  template <typename... A>
  BoundKernel(void (*f)(P...), A&&... a) : fn(f), args(std::forward<A>(a)...) {}
  void run_thread() override { std::apply(fn, args); }
  KernelCall* clone() const override { return new BoundKernel(*this); }
};

// Runs (or queues, or records into a graph) a launch; owns call. Returns the
// launch's error (also left for cudaGetLastError).
cudaError_t launch_kernel(KernelCall* call, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                          const char* name);

class Launch {
 public:
  Launch(dim3 grid, dim3 block, size_t shmem, cudaStream_t stream, const char* name)
      : grid_(grid), block_(block), shmem_(shmem), stream_(stream), name_(name) {}
  template <typename... P>
  struct Bound {
    const Launch* l;
    void (*fn)(P...);
    template <typename... A>
    void operator()(A&&... a) const {
      static_assert(sizeof...(A) == sizeof...(P), "kernel launched with the wrong number of arguments");
      launch_kernel(new BoundKernel<P...>(fn, std::forward<A>(a)...), l->grid_, l->block_, l->shmem_, l->stream_,
                    l->name_);
    }
  };
  template <typename... P>
  Bound<P...> kernel(void (*fn)(P...)) const {
    return Bound<P...>{this, fn};
  }

 private:
  dim3 grid_, block_;
  size_t shmem_;
  cudaStream_t stream_;
  const char* name_;
};

// Test hooks (the stand-in's own tests and the engines' tests).
struct Config {
  bool deferred = false;    // run stream work only when the program synchronizes
  bool integrated = false;  // the device reports itself integrated (mapped memory)
  uint64_t seed = 1;        // thread and block order
  int32_t device_count = 2;  // two, so that device selection is exercised
};
Config config();
void set_config(const Config& c);  // also clears errors; only between tests
// Clears a sticky error (a failed kernel) so a test can go on.
void reset_errors();
// The text of the last fault found in a kernel (deadlock, shuffle misuse...).
const char* last_fault();
// Launches, graph launches and cuBLAS calls run so far.
int64_t kernels_run();

}  // namespace cuda_standin

#define threadIdx (::cuda_standin::this_thread().thread_idx)
#define blockIdx (::cuda_standin::this_thread().block_idx)
#define blockDim (::cuda_standin::this_thread().block_dim)
#define gridDim (::cuda_standin::this_thread().grid_dim)
constexpr int warpSize = 32;

inline void __syncthreads() { cuda_standin::syncthreads(); }

namespace cuda_standin {
template <typename T>
T shfl(unsigned mask, T v, int32_t lane, int32_t width, int kind) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of an unsupported type");
  uint64_t bits = 0;
  __builtin_memcpy(&bits, &v, sizeof(T));
  bits = shuffle(mask, bits, lane, width, kind);
  T out;
  __builtin_memcpy(&out, &bits, sizeof(T));
  return out;
}
}  // namespace cuda_standin

template <typename T>
T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
  return cuda_standin::shfl(mask, v, src_lane, width, cuda_standin::kShflIdx);
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return cuda_standin::shfl(mask, v, lane_mask, width, cuda_standin::kShflXor);
}
template <typename T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return cuda_standin::shfl(mask, v, int(delta), width, cuda_standin::kShflDown);
}
template <typename T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return cuda_standin::shfl(mask, v, int(delta), width, cuda_standin::kShflUp);
}

// ---- the runtime API
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned flags);
cudaError_t cudaMallocHost(void** p, size_t bytes);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaHostGetDevicePointer(void** dev, void* host, unsigned flags);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s = nullptr);
cudaError_t cudaMemset(void* p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);

cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags);
cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
