// The EMA's segmented scan: one block per (stream, channel), lanes x segments
// threads (see ema.cuh; host_ops.h runs the same phases on the host).
#include "ema.cuh"
#include "launch.cuh"

namespace mega::gpu {

namespace {

template <typename T>
__global__ void __launch_bounds__(kEmaThreads) ema_kernel(EmaParams<T> p, int32_t lanes, int32_t n_seg) {
  __shared__ float s_end[kEmaThreads];  // phase 1 end values, [segment][lane]
  const int32_t b = int32_t(blockIdx.x / unsigned(p.d));
  const int32_t c = int32_t(blockIdx.x % unsigned(p.d));
  const EmaChannel ch = ema_channel(p, b, c);
  const int32_t tid = int32_t(threadIdx.x);
  const int32_t seg = tid / lanes, n = tid % lanes;
  const bool active = seg < n_seg;     // threads past lanes * n_seg only fill the last warp
  const bool real = active && n < p.n; // lanes past N keep h = 0
  const int64_t n_ext = ema_n_ext(p), n_warm = ema_n_warm(p);
  const EmaRange r = ema_segment(n_ext, n_seg, active ? seg : n_seg);  // inactive: empty
  const int64_t m0 = r.m0, m1 = r.m1;
  const int64_t i = int64_t(p.row_offset + c) * p.n + n;
  const float a = real ? p.a[i] : 0.0f;
  const float g = real ? p.g[i] : 0.0f;
  const float qk = real ? p.qk[i] : 0.0f;
  const float out = real ? p.out[i] : 0.0f;

  // phase 1: this segment from h = 0
  s_end[tid] = active ? ema_scan_range(p, ch, a, g, qk, m0, m1, 0.0f) : 0.0f;
  __syncthreads();

  // phase 2: the state entering this segment
  float h = 0.0f;
  if (active) {
    const float q_len = ema_decay_pow(a, ema_segment_len(n_ext, n_seg));
    h = ema_segment_start(q_len, ema_h_init(p, ch, n), s_end + n, lanes, seg);
  }

  // phase 3: rescan and reduce out * h over the segment's lanes, which are
  // consecutive lanes of one warp (lanes divides 32) running the same steps
  if (active) {
    const int32_t lane = tid & 31;
    const unsigned group = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u) << (lane - lane % lanes);
    for (int64_t m = m0; m < m1; ++m) {
      h = ema_update(a, h, ema_drive(p, ch, g, qk, m));
      if (m >= n_warm) {
        float v = out * h;
        for (int32_t off = lanes / 2; off > 0; off /= 2) v += __shfl_xor_sync(group, v, off, lanes);
        if (n == 0) ema_finish(p, b, ema_token(p, m), c, v);
      }
    }
  }
  __syncthreads();  // every read of the ring and of h is done

  if (p.mode != EmaMode::stream) return;
  if (p.k > 0) {
    const int64_t kept = p.n_tok < p.k ? p.n_tok : p.k;
    for (int64_t it = tid; it < kept; it += blockDim.x) ema_ring_store(p, ch, it);
  } else if (real && m1 == n_ext && m1 > m0) {
    p.h[(int64_t(b) * p.d + c) * p.n + n] = h;  // the untruncated state after the span
  }
}

}  // namespace

template <typename T>
int launch_ema(const EmaParams<T>& p, CUstream_st* stream) {
  if (p.n_streams <= 0 || p.d <= 0 || p.n_tok <= 0) return int(cudaSuccess);
  if (p.n > kEmaMaxN) return int(cudaErrorInvalidValue);
  const EmaShape s = ema_shape(ema_n_ext(p), p.n);
  MEGA_KERNEL_LAUNCH(unsigned(int64_t(p.n_streams) * p.d), unsigned(s.threads), 0, stream, ema_kernel<T>)(p, s.lanes,
                                                                                            s.n_seg);
  return int(cudaGetLastError());
}

template int launch_ema<float>(const EmaParams<float>&, CUstream_st*);
template int launch_ema<__half>(const EmaParams<__half>&, CUstream_st*);

}  // namespace mega::gpu
