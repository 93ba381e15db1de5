// Grid-stride launch of an element function over n work items: the kernels
// of every elementwise op are this one template (.cu files only).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mega::gpu {

constexpr int k_block_threads = 256;
constexpr int64_t k_max_blocks = 65535;

template <typename P, void (*F)(const P&, int64_t)>
__global__ void __launch_bounds__(k_block_threads) each_kernel(P p, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) F(p, i);
}

// Returns the launch's cudaError_t as an int (the .cuh headers stay free of
// CUDA types).
template <typename P, void (*F)(const P&, int64_t)>
int launch_each(const P& p, int64_t n, cudaStream_t stream) {
  if (n <= 0) return int(cudaSuccess);
  int64_t blocks = (n + k_block_threads - 1) / k_block_threads;
  if (blocks > k_max_blocks) blocks = k_max_blocks;
  each_kernel<P, F><<<unsigned(blocks), k_block_threads, 0, stream>>>(p, n);
  return int(cudaGetLastError());
}

}  // namespace mega::gpu
