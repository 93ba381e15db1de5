// SPDX-License-Identifier: Apache-2.0
// Patch embedding kernels: one thread per output element (log mel: per band),
// then, with a running mean, one per (stream, channel); log mel: one per output element for the mix (embed.cuh).
#include "embed.cuh"
#include "launch.cuh"

namespace mega::gpu {

template <typename T>
int launch_embed(const EmbedParams<T>& p, CUstream_st* stream) {
  const int e = launch_each<EmbedParams<T>, embed_element<T>>(p, embed_size(p), stream);
  if (e != int(cudaSuccess)) return e;
  const int c = launch_each<EmbedParams<T>, embed_column<T>>(p, embed_column_size(p), stream);
  if (c != int(cudaSuccess)) return c;
  return launch_each<EmbedParams<T>, embed_mix<T>>(p, embed_mix_size(p), stream);
}

template int launch_embed<float>(const EmbedParams<float>&, CUstream_st*);
template int launch_embed<__half>(const EmbedParams<__half>&, CUstream_st*);

}  // namespace mega::gpu
