// SPDX-License-Identifier: Apache-2.0
// Norm kernel: one thread per element (batch norm) or per token (norm.cuh).
#include "launch.cuh"
#include "norm.cuh"

namespace mega::gpu {

template <typename T>
int launch_norm(const NormParams<T>& p, CUstream_st* stream) {
  return launch_each<NormParams<T>, norm_element<T>>(p, norm_size(p), stream);
}

template int launch_norm<float>(const NormParams<float>&, CUstream_st*);
template int launch_norm<__half>(const NormParams<__half>&, CUstream_st*);

}  // namespace mega::gpu
