// SPDX-License-Identifier: Apache-2.0
// The gating steps' kernels: one thread per element (gating.cuh).
#include "gating.cuh"
#include "launch.cuh"

namespace mega::gpu {

template <typename T>
int launch_bias_act(const BiasActParams<T>& p, CUstream_st* stream) {
  return launch_each<BiasActParams<T>, bias_act_element<T>>(p, p.rows * p.cols, stream);
}

template <typename T>
int launch_split(const SplitParams<T>& p, CUstream_st* stream) {
  return launch_each<SplitParams<T>, split_element<T>>(p, p.rows * p.g.cols(), stream);
}

template <typename T>
int launch_out_gate(const OutGateParams<T>& p, CUstream_st* stream) {
  return launch_each<OutGateParams<T>, out_gate_element<T>>(p, p.rows * p.g.h, stream);
}

template <typename T>
int launch_residual(const ResidualParams<T>& p, CUstream_st* stream) {
  return launch_each<ResidualParams<T>, residual_element<T>>(p, p.rows * p.g.d, stream);
}

template <typename T>
int launch_add_residual(const AddResidualParams<T>& p, CUstream_st* stream) {
  return launch_each<AddResidualParams<T>, add_residual_element<T>>(p, p.rows * p.cols, stream);
}

#define MEGA_GATING_INSTANTIATE(T)                                                  \
  template int launch_bias_act<T>(const BiasActParams<T>&, CUstream_st*);           \
  template int launch_split<T>(const SplitParams<T>&, CUstream_st*);                \
  template int launch_out_gate<T>(const OutGateParams<T>&, CUstream_st*);           \
  template int launch_residual<T>(const ResidualParams<T>&, CUstream_st*);          \
  template int launch_add_residual<T>(const AddResidualParams<T>&, CUstream_st*);
MEGA_GATING_INSTANTIATE(float)
MEGA_GATING_INSTANTIATE(__half)

}  // namespace mega::gpu
