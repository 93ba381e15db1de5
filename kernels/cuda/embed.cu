// Patch embedding kernel: one thread per output element (embed.cuh).
#include "embed.cuh"
#include "launch.cuh"

namespace mega::gpu {

template <typename T>
int launch_embed(const EmbedParams<T>& p, CUstream_st* stream) {
  return launch_each<EmbedParams<T>, embed_element<T>>(p, embed_size(p), stream);
}

template int launch_embed<float>(const EmbedParams<float>&, CUstream_st*);
template int launch_embed<__half>(const EmbedParams<__half>&, CUstream_st*);

}  // namespace mega::gpu
