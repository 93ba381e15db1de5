// SPDX-License-Identifier: Apache-2.0
// The truncated damped EMA (mega-spec.md, "The EMA").
//
// Reference: the defining lag sum y_t = sum_{l<K} k[l] x_{t-l}, in double.
// The optimized causal EMA is the exact recurrent form of the truncated
// kernel, vectorized across channels (simd_kernels.inc); both leave the same
// state (h and the ring of the last K inputs), so a stream can be checked
// chunk by chunk against either. The bidirectional fast form below uses the
// same recurrence per channel.
#include <cstring>

#include "cpu/kernels.h"

namespace mega::cpu {

void ema_lag_kernel(const EmaWeights& w, double* kernel) {
  const int64_t K = w.truncation;
  for (int32_t r = 0; r < w.n_rows; ++r) {
    double* k = kernel + int64_t(r) * K;
    for (int64_t l = 0; l < K; ++l) k[l] = 0.0;
    for (int32_t n = 0; n < w.n_dim; ++n) {
      const size_t i = size_t(r) * size_t(w.n_dim) + size_t(n);
      double ql = 1.0;
      for (int64_t l = 0; l < K; ++l) {
        k[l] += w.gain[i] * ql * w.out[i];
        ql *= w.decay[i];
      }
    }
  }
}

namespace {

// Input of channel `ch` at absolute token index `tok` for a causal span that
// starts at absolute token `start` (x holds the span, ring the K before it).
inline float causal_input(const EmaParams& p, int64_t start, int64_t tok, int32_t ch) {
  if (tok < 0) return 0.0f;
  if (tok >= start) return p.x[(tok - start) * p.d + ch];
  const int64_t K = p.w->truncation;
  return p.ring[(tok % K) * p.d + ch];
}

void push_ring(const EmaParams& p) {
  const int64_t K = p.w->truncation;
  if (K == 0) return;
  const int64_t first = p.n > K ? p.n - K : 0;  // only the last K inputs survive
  for (int64_t t = first; t < p.n; ++t) {
    const int64_t tok = p.tokens_seen + t;
    std::memcpy(p.ring + (tok % K) * p.d, p.x + t * p.d, sizeof(float) * size_t(p.d));
  }
}

// Untruncated EMA: the plain recurrence (no lag sum can be formed over an
// unbounded past); the reference for K = 0.
void ema_causal_untruncated(const EmaParams& p) {
  const EmaWeights& w = *p.w;
  const int32_t N = w.n_dim;
  for (int32_t ch = 0; ch < p.d; ++ch) {
    double* h = p.h + int64_t(ch) * N;
    const size_t base = size_t(ch) * size_t(N);
    for (int64_t t = 0; t < p.n; ++t) {
      const double x = p.x[t * p.d + ch];
      double acc = 0.0;
      for (int32_t n = 0; n < N; ++n) {
        h[n] = w.decay[base + n] * h[n] + w.gain[base + n] * x;
        acc += w.out[base + n] * h[n];
      }
      p.y[t * p.d + ch] = float(acc);
    }
  }
}

}  // namespace

void ema_causal_ref(const EmaParams& p) {
  const EmaWeights& w = *p.w;
  const int64_t K = w.truncation;
  if (K == 0) return ema_causal_untruncated(p);
  const int32_t N = w.n_dim;
  const int64_t start = p.tokens_seen;
  for (int32_t ch = 0; ch < p.d; ++ch) {
    const double* k = p.ref_kernel + int64_t(ch) * K;
    for (int64_t t = 0; t < p.n; ++t) {
      double acc = 0.0;
      for (int64_t l = 0; l < K; ++l) acc += k[l] * double(causal_input(p, start, start + t - l, ch));
      p.y[t * p.d + ch] = float(acc);
    }
    // state after the span, from its definition: h = g sum_{l<K} q^l x_{end-1-l}
    const int64_t last = start + p.n - 1;
    for (int32_t n = 0; n < N; ++n) {
      const size_t i = size_t(ch) * size_t(N) + size_t(n);
      double acc = 0.0, ql = 1.0;
      for (int64_t l = 0; l < K; ++l) {
        acc += ql * double(causal_input(p, start, last - l, ch));
        ql *= w.decay[i];
      }
      p.h[i] = w.gain[i] * acc;
    }
  }
  push_ring(p);
}

void ema_bidir_ref(const EmaParams& p) {
  const EmaWeights& w = *p.w;
  const int64_t K = w.truncation > 0 ? w.truncation : p.n;
  const int32_t N = w.n_dim;
  for (int32_t ch = 0; ch < p.d; ++ch) {
    for (int64_t t = 0; t < p.n; ++t) {
      double acc = 0.0;
      for (int32_t half = 0; half < 2; ++half) {
        const int32_t row = ch + half * p.d;
        for (int32_t n = 0; n < N; ++n) {
          const size_t i = size_t(row) * size_t(N) + size_t(n);
          double ql = 1.0, s = 0.0;
          for (int64_t l = 0; l < K; ++l) {
            const int64_t tok = half == 0 ? t - l : t + l;
            if (tok < 0 || tok >= p.n) break;
            s += ql * double(p.x[tok * p.d + ch]);
            ql *= w.decay[i];
          }
          acc += w.gain[i] * w.out[i] * s;
        }
      }
      p.y[t * p.d + ch] = float(acc);
    }
  }
}

void ema_bidir_fast(const EmaParams& p) {
  const EmaWeights& w = *p.w;
  const int64_t K = w.truncation;
  const int32_t N = w.n_dim;
  double* h = p.scratch;
  for (int32_t ch = 0; ch < p.d; ++ch) {
    for (int32_t half = 0; half < 2; ++half) {
      const size_t base = size_t(ch + half * p.d) * size_t(N);
      const double* q = w.decay.data() + base;
      const double* g = w.gain.data() + base;
      const double* qk = w.decay_k.data() + base;
      const double* out = w.out.data() + base;
      for (int32_t n = 0; n < N; ++n) h[n] = 0.0;
      for (int64_t i = 0; i < p.n; ++i) {
        const int64_t t = half == 0 ? i : p.n - 1 - i;
        const int64_t far = half == 0 ? t - K : t + K;  // the input leaving the window
        const double x = p.x[t * p.d + ch];
        const double old = (K > 0 && far >= 0 && far < p.n) ? double(p.x[far * p.d + ch]) : 0.0;
        double acc = 0.0;
        for (int32_t n = 0; n < N; ++n) {
          h[n] = q[n] * h[n] + g[n] * (x - qk[n] * old);
          acc += out[n] * h[n];
        }
        if (half == 0) {
          p.y[t * p.d + ch] = float(acc);
        } else {
          p.y[t * p.d + ch] = float(double(p.y[t * p.d + ch]) + acc);
        }
      }
    }
  }
}

}  // namespace mega::cpu
