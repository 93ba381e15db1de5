// SPDX-License-Identifier: Apache-2.0
// The truncated damped EMA on the GPU (mega-spec.md, "The EMA"), as a
// segmented linear scan.
//
// Every mode is the recurrence h_m = q h_{m-1} + u_m over a sequence of steps
// m = 0 .. n_ext-1 of one (stream, channel), with
//   u_m = g (e_m - q^K e_{m-K})   (the q^K term only for K > 0 and m >= K),
//   y   = sum_n out_n h_m[n]      at the output steps,
// where e_m is the step's input:
//   stream   (causal, streaming): truncated: the K inputs before the chunk
//            (the ring; zero before the stream started) then the chunk's
//            n_tok, output at steps >= K. Starting from h = 0 K steps early
//            gives exactly the truncated state g sum_{l<K} q^l x_{t-l}, so no
//            float rounding carries over from one chunk to the next: the only
//            state is the ring of the last K inputs (the CPU carries h in
//            double instead). Untruncated: the chunk's tokens from the
//            carried h (zero at chunk 0), which is written back.
//   forward  (clips): x_0 .. x_{n-1} from h = 0 (the causal half);
//   backward (clips): x_{n-1} .. x_0 from h = 0, added to y (the
//            bidirectional model's second half, rows d..2d-1).
// The epilogue turns y into mx = silu(y + omega * x) (after the last half).
//
// Recurrent form (truncated stream mode with hd set: the CUDA engines'
// streaming path): the CPU's exact recurrence (kernels/cpu/ema.cpp,
// simd_kernels.inc), h_t = q h_{t-1} + g (x_t - q^K x_{t-K}), carried between
// chunks in double (hd) beside the ring of the last K inputs, one pass over
// the chunk's n_tok steps instead of K + n_tok. One thread per (stream,
// channel, n), the lanes of a channel reduced with warp shuffles; the time
// direction is sequential within the chunk (ema_recur_* below, run on the
// host by host_ops.h).
//
// Parallel form: one block per (stream, channel); threads = n_pad lanes (N
// padded to a power of two <= 32; extra lanes have q = g = 0) times n_seg
// time segments. Phase 1 scans each segment from 0 to get its end value E_s;
// phase 2 gives each segment its start state from the ones before it,
// H = q^L H + E_s (all segments but the last have L steps); phase 3 rescans from there, reducing out * h over the
// lanes with warp shuffles and writing y. Everything but the thread mapping
// and the shuffles is in the MEGA_HD functions below, which the host build
// runs (kernels/cuda/host_ops.h) and the CPU tests check against the reference.
#pragma once

#include <math.h>

#include <cstdint>

#include "common/scalar_math.h"
#include "storage.h"

struct CUstream_st;

namespace mega::gpu {

enum class EmaMode : int32_t { stream = 0, forward = 1, backward = 2 };

template <typename T>
struct EmaParams {
  const T* x = nullptr;  // (n_streams * n_tok, d), stored as value / xs (so is the ring)
  T* y = nullptr;        // same layout; may not alias x (not scaled)
  float xs = 1.0f;       // Dims::x_scale
  // coefficients per (row, n), row = row_offset + channel: float copies of
  // 1 - EmaWeights::decay, gain, decay_k, out. The decay is held as its
  // complement a = 1 - q and applied as h - a h: q itself rounded to float
  // would put an error of l * 6e-8 on the weight of lag l, which over a
  // thousand lags moves the base model's logits by 4e-3 (measured); a in
  // float is q to ~1e-11.
  const float* a = nullptr;
  const float* g = nullptr;
  const float* qk = nullptr;
  const float* out = nullptr;
  int32_t row_offset = 0;
  const float* omega = nullptr;  // (d), epilogue only
  int32_t n_streams = 0;
  int64_t n_tok = 0;
  int32_t d = 0, n = 0, k = 0;   // channels, EMA dims, truncation (0: none)
  EmaMode mode = EmaMode::stream;
  bool accumulate = false;       // y += this half (backward)
  bool epilogue = true;          // y = silu(y + omega * x)
  // stream mode state
  T* ring = nullptr;             // (n_streams, k, d): token p at slot p mod k
  float* h = nullptr;            // (n_streams, d, n): untruncated only
  const int64_t* chunk_index = nullptr;  // per stream; the span starts at token chunk_index * n_tok
  double* hd = nullptr;          // (n_streams, d, n): truncated only; set: the recurrent form
};

// Largest N the kernel takes (one warp of lanes per segment at most).
constexpr int32_t kEmaMaxN = 32;
constexpr int32_t kEmaThreads = 256;

template <typename T>
MEGA_HD inline bool ema_stream_truncated(const EmaParams<T>& p) {
  return p.mode == EmaMode::stream && p.k > 0;
}

template <typename T>
MEGA_HD inline int64_t ema_n_ext(const EmaParams<T>& p) {
  return ema_stream_truncated(p) ? p.k + p.n_tok : p.n_tok;
}

// Steps before the first output (the truncated stream's ring).
template <typename T>
MEGA_HD inline int64_t ema_n_warm(const EmaParams<T>& p) {
  return ema_stream_truncated(p) ? p.k : 0;
}

// The (stream, channel) a thread works on, and the absolute token its span
// starts at (chunk_index read once: on integrated GPUs it is mapped host memory).
struct EmaChannel {
  int32_t b = 0, c = 0;
  int64_t start = 0;
};

template <typename T>
MEGA_HD inline EmaChannel ema_channel(const EmaParams<T>& p, int32_t b, int32_t c) {
  EmaChannel ch;
  ch.b = b;
  ch.c = c;
  ch.start = p.chunk_index ? p.chunk_index[b] * p.n_tok : 0;
  return ch;
}

// Input at step m (zero for m < 0 and before the stream's first token), as
// stored (value / xs).
template <typename T>
MEGA_HD inline float ema_input(const EmaParams<T>& p, const EmaChannel& ch, int64_t m) {
  if (m < 0) return 0.0f;
  const int32_t c = ch.c;
  const T* xs = p.x + int64_t(ch.b) * p.n_tok * p.d;
  switch (p.mode) {
    case EmaMode::stream:
      if (p.k > 0) {
        if (m >= p.k) return ld(xs[(m - p.k) * p.d + c]);
        const int64_t pos = ch.start - p.k + m;  // absolute token
        if (pos < 0) return 0.0f;
        return ld(p.ring[(int64_t(ch.b) * p.k + pos % p.k) * p.d + c]);
      }
      return ld(xs[m * p.d + c]);
    case EmaMode::forward:
      return ld(xs[m * p.d + c]);
    case EmaMode::backward:
      return ld(xs[(p.n_tok - 1 - m) * p.d + c]);
  }
  return 0.0f;
}

// Token (within the stream's span) that step m outputs; m >= ema_n_warm.
template <typename T>
MEGA_HD inline int64_t ema_token(const EmaParams<T>& p, int64_t m) {
  if (p.mode == EmaMode::backward) return p.n_tok - 1 - m;
  return m - ema_n_warm(p);
}

// u_m for coefficients g, qk (the CPU's g * (x - q^K * old), old = 0 when absent).
template <typename T>
MEGA_HD inline float ema_drive(const EmaParams<T>& p, const EmaChannel& ch, float g, float qk, int64_t m) {
  const float old = (p.k > 0 && m >= p.k) ? ema_input(p, ch, m - p.k) : 0.0f;
  return g * (ema_input(p, ch, m) - qk * old);
}

// Steps per segment: every segment has this many but the last non-empty
// one, which may have fewer, and any empty ones after it.
MEGA_HD inline int64_t ema_segment_len(int64_t n_ext, int32_t n_seg) { return (n_ext + n_seg - 1) / n_seg; }

// Steps [m0, m1) of segment s when n_ext steps are cut into n_seg segments.
// (Returned by value: pointer outputs gave the float16 kernel a stack frame
// and spills on sm_87.)
struct EmaRange {
  int64_t m0 = 0, m1 = 0;
};
MEGA_HD inline EmaRange ema_segment(int64_t n_ext, int32_t n_seg, int32_t s) {
  const int64_t len = ema_segment_len(n_ext, n_seg);
  const int64_t start = int64_t(s) * len;
  EmaRange r;
  r.m0 = start < n_ext ? start : n_ext;
  r.m1 = r.m0 + len < n_ext ? r.m0 + len : n_ext;
  return r;
}

// q^e = (1 - a)^e, in double: once per thread, so its cost does not matter.
MEGA_HD inline float ema_decay_pow(float a, int64_t e) {
  if (e == 0) return 1.0f;
  return float(exp(double(e) * log1p(-double(a))));
}

// The state before step 0 of the span.
template <typename T>
MEGA_HD inline float ema_h_init(const EmaParams<T>& p, const EmaChannel& ch, int32_t n) {
  if (p.mode != EmaMode::stream || p.k > 0 || n >= p.n) return 0.0f;
  if (ch.start == 0) return 0.0f;  // chunk 0: a fresh (or reset) stream
  return p.h[(int64_t(ch.b) * p.d + ch.c) * p.n + n];
}

// One step: h = q h + u with q = 1 - a.
MEGA_HD inline float ema_update(float a, float h, float u) { return (h - a * h) + u; }

// Phase 1 (and the rescan's update): h after steps [m0, m1) from h.
template <typename T>
MEGA_HD inline float ema_scan_range(const EmaParams<T>& p, const EmaChannel& ch, float a, float g, float qk,
                                    int64_t m0, int64_t m1, float h) {
  for (int64_t m = m0; m < m1; ++m) h = ema_update(a, h, ema_drive(p, ch, g, qk, m));
  return h;
}

// Phase 2: the state before segment s, from h_init and the end values
// ends[j * stride] of the segments j < s (each scanned from 0 over len
// steps); q_len = q^len (ema_decay_pow).
MEGA_HD inline float ema_segment_start(float q_len, float h_init, const float* ends, int32_t stride, int32_t s) {
  float h = h_init;
  for (int32_t j = 0; j < s; ++j) h = q_len * h + ends[int64_t(j) * stride];
  return h;
}

// Writes y (or mx) for token t of stream b from this half's sum acc.
template <typename T>
MEGA_HD inline void ema_finish(const EmaParams<T>& p, int32_t b, int64_t t, int32_t c, float acc) {
  const int64_t i = (int64_t(b) * p.n_tok + t) * p.d + c;
  acc *= p.xs;  // the scan ran on x as stored (value / xs); the EMA is linear
  float v = p.accumulate ? ld(p.y[i]) + acc : acc;
  if (p.epilogue) v = math::silu(v + p.omega[c] * (ld(p.x[i]) * p.xs));
  st(p.y + i, v);
}

// After the span (truncated stream mode): the last min(n_tok, k) inputs go into
// the ring. item in [0, min(n_tok, k)).
template <typename T>
MEGA_HD inline void ema_ring_store(const EmaParams<T>& p, const EmaChannel& ch, int64_t item) {
  const int64_t kept = p.n_tok < p.k ? p.n_tok : p.k;
  const int64_t t = p.n_tok - kept + item;
  const int64_t pos = ch.start + t;
  p.ring[(int64_t(ch.b) * p.k + pos % p.k) * p.d + ch.c] = p.x[(int64_t(ch.b) * p.n_tok + t) * p.d + ch.c];
}

// Launch shape: lanes per segment (N rounded up to a power of two), segments
// (about 32 steps each, at most kEmaThreads / lanes), threads per block (a
// whole number of warps).
struct EmaShape {
  int32_t lanes = 1, n_seg = 1, threads = 32;
};

inline EmaShape ema_shape(int64_t n_ext, int32_t n) {
  EmaShape s;
  while (s.lanes < n) s.lanes *= 2;
  const int64_t max_seg = kEmaThreads / s.lanes;
  const int64_t want = n_ext / 32;
  s.n_seg = int32_t(want < 1 ? 1 : (want > max_seg ? max_seg : want));
  s.threads = (s.lanes * s.n_seg + 31) / 32 * 32;
  return s;
}

// The recurrent form (see the top): truncated stream mode with its carried h.
template <typename T>
MEGA_HD inline bool ema_recurrent(const EmaParams<T>& p) {
  return ema_stream_truncated(p) && p.hd != nullptr;
}

// x_t and x_{t-K} of token t of the span, as stored: x_{t-K} from the span,
// from the ring, or zero before the stream's first token.
template <typename T>
MEGA_HD inline float ema_recur_input(const EmaParams<T>& p, const EmaChannel& ch, int64_t t) {
  return ld(p.x[(int64_t(ch.b) * p.n_tok + t) * p.d + ch.c]);
}
template <typename T>
MEGA_HD inline float ema_recur_old(const EmaParams<T>& p, const EmaChannel& ch, int64_t t) {
  if (t >= p.k) return ema_recur_input(p, ch, t - p.k);
  const int64_t pos = ch.start + t - p.k;  // absolute token
  if (pos < 0) return 0.0f;
  return ld(p.ring[(int64_t(ch.b) * p.k + pos % p.k) * p.d + ch.c]);
}

// h of lane n entering the span: zero at chunk 0 (a fresh or reset stream).
template <typename T>
MEGA_HD inline double ema_recur_h0(const EmaParams<T>& p, const EmaChannel& ch, int32_t n) {
  if (ch.start == 0 || n >= p.n) return 0.0;
  return p.hd[(int64_t(ch.b) * p.d + ch.c) * p.n + n];
}

// One step in double, as the CPU: h = q h + g (x - q^K old), q = 1 - a.
MEGA_HD inline double ema_recur_step(float a, float g, float qk, double h, float x, float old) {
  return (h - double(a) * h) + double(g) * (double(x) - double(qk) * double(old));
}

// Lanes per channel (N rounded up to a power of two) for the recurrent form.
inline int32_t ema_recur_lanes(int32_t n) {
  int32_t lanes = 1;
  while (lanes < n) lanes *= 2;
  return lanes;
}

template <typename T>
int launch_ema(const EmaParams<T>& p, CUstream_st* stream);

}  // namespace mega::gpu
