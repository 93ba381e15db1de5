// Patch embedding kernels: one thread per output element, then, with a running mean, one per (stream, channel) (embed.cuh).
#include "embed.cuh"
#include "launch.cuh"

namespace mega::gpu {

template <typename T>
int launch_embed(const EmbedParams<T>& p, CUstream_st* stream) {
  const int e = launch_each<EmbedParams<T>, embed_element<T>>(p, embed_size(p), stream);
  if (e != int(cudaSuccess)) return e;
  return launch_each<EmbedParams<T>, embed_column<T>>(p, embed_column_size(p), stream);
}

template int launch_embed<float>(const EmbedParams<float>&, CUstream_st*);
template int launch_embed<__half>(const EmbedParams<__half>&, CUstream_st*);

}  // namespace mega::gpu
