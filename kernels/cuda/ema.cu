// SPDX-License-Identifier: Apache-2.0
// The EMA's segmented scan: one block per (stream, channel), lanes x segments
// threads; and its recurrent form for streams: one thread per (stream,
// channel, n) (see ema.cuh; host_ops.h runs the same steps on the host).
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

// The recurrent form: lanes consecutive threads per (stream, channel), a
// whole number of channels per block (lanes divides kEmaThreads).
template <typename T>
__global__ void __launch_bounds__(kEmaThreads) ema_recur_kernel(EmaParams<T> p, int32_t lanes) {
  const int64_t gid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t channel = gid / lanes;  // b * d + c
  if (channel >= int64_t(p.n_streams) * p.d) return;  // whole channels: the shuffle groups stay whole
  const int32_t n = int32_t(gid % lanes);
  const EmaChannel ch = ema_channel(p, int32_t(channel / p.d), int32_t(channel % p.d));
  const bool real = n < p.n;  // lanes past N keep h = 0
  const int64_t i = int64_t(p.row_offset + ch.c) * p.n + n;
  const float a = real ? p.a[i] : 0.0f;
  const float g = real ? p.g[i] : 0.0f;
  const float qk = real ? p.qk[i] : 0.0f;
  const float out = real ? p.out[i] : 0.0f;
  const int32_t lane = int32_t(threadIdx.x & 31);
  const unsigned group = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u) << (lane - lane % lanes);
  double h = ema_recur_h0(p, ch, n);
  for (int64_t t = 0; t < p.n_tok; ++t) {
    h = ema_recur_step(a, g, qk, h, ema_recur_input(p, ch, t), ema_recur_old(p, ch, t));
    float v = float(double(out) * h);
    for (int32_t off = lanes / 2; off > 0; off /= 2) v += __shfl_xor_sync(group, v, off, lanes);
    if (n == 0) ema_finish(p, ch.b, t, ch.c, v);
  }
  if (real) p.hd[(int64_t(ch.b) * p.d + ch.c) * p.n + n] = h;
  // the channel's lanes have all passed the last step's shuffle: no ring read is left
  const int64_t kept = p.n_tok < p.k ? p.n_tok : p.k;
  for (int64_t it = n; it < kept; it += lanes) ema_ring_store(p, ch, it);
}

}  // namespace

template <typename T>
int launch_ema(const EmaParams<T>& p, CUstream_st* stream) {
  if (p.n_streams <= 0 || p.d <= 0 || p.n_tok <= 0) return int(cudaSuccess);
  if (p.n > kEmaMaxN) return int(cudaErrorInvalidValue);
  if (ema_recurrent(p)) {
    const int32_t lanes = ema_recur_lanes(p.n);
    const int64_t threads = int64_t(p.n_streams) * p.d * lanes;
    MEGA_KERNEL_LAUNCH(unsigned((threads + kEmaThreads - 1) / kEmaThreads), unsigned(kEmaThreads), 0, stream,
                       ema_recur_kernel<T>)(p, lanes);
    return int(cudaGetLastError());
  }
  const EmaShape s = ema_shape(ema_n_ext(p), p.n);
  MEGA_KERNEL_LAUNCH(unsigned(int64_t(p.n_streams) * p.d), unsigned(s.threads), 0, stream, ema_kernel<T>)(p, s.lanes,
                                                                                            s.n_seg);
  return int(cudaGetLastError());
}

template int launch_ema<float>(const EmaParams<float>&, CUstream_st*);
template int launch_ema<__half>(const EmaParams<__half>&, CUstream_st*);

}  // namespace mega::gpu
