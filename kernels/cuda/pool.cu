// SPDX-License-Identifier: Apache-2.0
// Pooling (one thread per stream and channel) and the head (one block per
// stream) kernels (pool.cuh).
#include "launch.cuh"
#include "pool.cuh"

namespace mega::gpu {

template <typename T>
int launch_pool(const PoolParams<T>& p, CUstream_st* stream) {
  return launch_each<PoolParams<T>, pool_element<T>>(p, int64_t(p.n_streams) * p.d, stream);
}

namespace {

constexpr int32_t kHeadThreads = 128;

// Stream blockIdx.x: its channels, then each layer's outputs, across the
// block; a layer reads what the one before wrote (the barriers).
__global__ void __launch_bounds__(kHeadThreads) head_kernel(HeadParams p) {
  const int32_t b = int32_t(blockIdx.x);
  for (int32_t c = int32_t(threadIdx.x); c < p.d; c += kHeadThreads) head_mean(p, b, c);
  for (int32_t l = 0; l < p.n_layers; ++l) {
    __syncthreads();
    for (int32_t o = int32_t(threadIdx.x); o < p.layers[l].n_out; o += kHeadThreads) head_unit(p, b, l, o);
  }
}

}  // namespace

int launch_head(const HeadParams& p, CUstream_st* stream) {
  if (p.n_streams <= 0) return int(cudaSuccess);
  MEGA_KERNEL_LAUNCH(unsigned(p.n_streams), unsigned(kHeadThreads), 0, stream, head_kernel)(p);
  return int(cudaGetLastError());
}

template int launch_pool<float>(const PoolParams<float>&, CUstream_st*);
template int launch_pool<__half>(const PoolParams<__half>&, CUstream_st*);

}  // namespace mega::gpu
