// SPDX-License-Identifier: Apache-2.0
// The attention weight pass (one thread per score) and the softmax rows (one
// thread per row; only softmax models use it) between the cuBLAS GEMMs
// (attention.cuh).
#include "attention.cuh"
#include "launch.cuh"

namespace mega::gpu {

template <typename T>
int launch_scores(const ScoreParams<T>& p, CUstream_st* stream) {
  return launch_each<ScoreParams<T>, score_element<T>>(p, score_size(p), stream);
}

template <typename T>
int launch_softmax(const ScoreParams<T>& p, CUstream_st* stream) {
  return launch_each<ScoreParams<T>, softmax_row<T>>(p, p.n_chunks * p.c, stream);
}

template int launch_scores<float>(const ScoreParams<float>&, CUstream_st*);
template int launch_scores<__half>(const ScoreParams<__half>&, CUstream_st*);
template int launch_softmax<float>(const ScoreParams<float>&, CUstream_st*);
template int launch_softmax<__half>(const ScoreParams<__half>&, CUstream_st*);

}  // namespace mega::gpu
