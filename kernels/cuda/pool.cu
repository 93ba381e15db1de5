// Pooling (one thread per stream and channel) and the head (one thread per
// stream) kernels (pool.cuh).
#include "launch.cuh"
#include "pool.cuh"

namespace mega::gpu {

template <typename T>
int launch_pool(const PoolParams<T>& p, CUstream_st* stream) {
  return launch_each<PoolParams<T>, pool_element<T>>(p, int64_t(p.n_streams) * p.d, stream);
}

int launch_head(const HeadParams& p, CUstream_st* stream) {
  return launch_each<HeadParams, head_element>(p, p.n_streams, stream);
}

template int launch_pool<float>(const PoolParams<float>&, CUstream_st*);
template int launch_pool<__half>(const PoolParams<__half>&, CUstream_st*);

}  // namespace mega::gpu
