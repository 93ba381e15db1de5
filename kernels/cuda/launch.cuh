// SPDX-License-Identifier: Apache-2.0
// Grid-stride launch of an element function over n work items: the kernels
// of every elementwise op are this one template (.cu files only).
//
// Every kernel launch goes through MEGA_KERNEL_LAUNCH(grid, block, shmem,
// stream, kernel)(args...): nvcc's <<<grid, block, shmem, stream>>>, or, in
// the test-only CPU stand-in build (MEGA_CUDA_STANDIN, tests/kernels/cuda/standin/),
// the stand-in's grid loop over the same kernel compiled as host C++.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(MEGA_CUDA_STANDIN)
#define MEGA_KERNEL_LAUNCH(grid, block, shmem, stream, ...) \
  ::cuda_standin::Launch(grid, block, shmem, stream, #__VA_ARGS__).kernel(__VA_ARGS__)
#else
#define MEGA_KERNEL_LAUNCH(grid, block, shmem, stream, ...) __VA_ARGS__<<<grid, block, shmem, stream>>>
#endif

namespace mega::gpu {

constexpr int kBlockThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

template <typename P, void (*F)(const P&, int64_t)>
__global__ void __launch_bounds__(kBlockThreads) each_kernel(P p, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) F(p, i);
}

// Returns the launch's cudaError_t as an int (the .cuh headers stay free of
// CUDA types).
template <typename P, void (*F)(const P&, int64_t)>
int launch_each(const P& p, int64_t n, cudaStream_t stream) {
  if (n <= 0) return int(cudaSuccess);
  int64_t blocks = (n + kBlockThreads - 1) / kBlockThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  MEGA_KERNEL_LAUNCH(unsigned(blocks), kBlockThreads, 0, stream, each_kernel<P, F>)(p, n);
  return int(cudaGetLastError());
}

}  // namespace mega::gpu
