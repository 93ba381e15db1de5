// SPDX-License-Identifier: Apache-2.0
// Does the streaming EMA drift? The optimized causal EMA is the recurrence
// h_t = q h_{t-1} + g (x_t - q^K x_{t-K}) in double, which adds each input
// once and subtracts it K tokens later: rounding errors could pile up over
// hours. This feeds many tokens of DC-biased noise (systematic rounding is
// the worst case) through it, chunk by chunk as a session does, for decays
// from fast to exactly 1.0 (a valid file can give q == 1.0 in double:
// sigmoid(delta) * sigmoid(alpha) < 2^-53), then recomputes the state and the
// output from their definition (the lag sum over the last K inputs, which
// the ring holds) in long double. MEGA_EMA_DRIFT_TOKENS sets the length (the
// hours-long figure in docs/reliability.md).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "cpu/kernels.h"
#include "cpu/simd_kernels.h"

TEST(EmaDrift, RecurrenceMatchesTheLagSumAfterManyTokens) {
  const char* env = std::getenv("MEGA_EMA_DRIFT_TOKENS");
  const int64_t n_tokens = env ? int64_t(std::atof(env)) : 2000000;
  const double decays[] = {1.0, 1.0 - 1e-12, 1.0 - 1e-7, 0.9999, 0.999, 0.99, 0.5};
  const int32_t N = int32_t(std::size(decays)), D = 2;  // every decay in each of 2 channels
  const int64_t K = 1000, C = 1000;                    // the base model's truncation and chunk
  mega::EmaWeights w;
  w.n_rows = D;
  w.n_dim = N;
  w.truncation = int32_t(K);
  for (int32_t d = 0; d < D; ++d) {
    for (int32_t n = 0; n < N; ++n) {
      const double q = decays[n];
      w.decay.push_back(q);
      w.decay_k.push_back(std::pow(q, double(K)));
      w.gain.push_back(d == 0 ? 0.37 : 1.0 - q + 1e-3);
      w.out.push_back(d == 0 ? 1.0 : -0.25);
    }
  }
  std::vector<double> h(size_t(D * N), 0.0);
  std::vector<float> ring(size_t(K * D), 0.0f), x(size_t(C * D)), y(size_t(C * D));
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  mega::cpu::EmaParams p;
  p.w = &w;
  p.d = D;
  p.n = C;
  p.x = x.data();
  p.y = y.data();
  p.h = h.data();
  p.ring = ring.data();
  const mega::cpu::SimdKernels& ks = mega::cpu::simd_kernels();
  const int32_t groups = (D + ks.ema_group - 1) / ks.ema_group;
  std::vector<double> scratch(size_t(mega::cpu::ema_scratch_doubles(N)));
  for (int64_t t0 = 0; t0 < n_tokens; t0 += C) {
    for (int64_t i = 0; i < C * D; ++i) x[size_t(i)] = (i % D == 0 ? 1.0f : -3.0f) + noise(rng);
    p.tokens_seen = t0;
    ks.ema_causal(p, 0, groups, scratch.data());
  }
  const int64_t end = (n_tokens + C - 1) / C * C;  // tokens fed
  double worst_h = 0.0, worst_y = 0.0;
  for (int32_t d = 0; d < D; ++d) {
    long double y_def = 0.0L, scale_y = 0.0L;
    for (int32_t n = 0; n < N; ++n) {
      const size_t i = size_t(d * N + n);
      long double acc = 0.0L, mag = 0.0L, ql = 1.0L;
      for (int64_t l = 0; l < K; ++l) {
        const long double xv = ring[size_t(((end - 1 - l) % K) * D + d)];
        acc += ql * xv;
        mag += ql * std::fabs(xv);
        ql *= w.decay[i];
      }
      const long double h_def = w.gain[i] * acc;
      const double rel = double(std::fabs(h[i] - h_def) / (std::fabs(w.gain[i]) * mag));
      worst_h = std::max(worst_h, rel);
      y_def += w.out[i] * h_def;
      scale_y += std::fabs(w.out[i] * w.gain[i]) * mag;
    }
    // the last token's output, as the session sees it (float)
    const double rel_y = double(std::fabs(y[size_t((C - 1) * D + d)] - y_def) / scale_y);
    worst_y = std::max(worst_y, rel_y);
  }
  std::printf("[ drift    ] %lld tokens: state error %.3g, output error %.3g (relative to the window's magnitude)\n",
              static_cast<long long>(end), worst_h, worst_y);
  EXPECT_LE(worst_h, 1e-9);
  EXPECT_LE(worst_y, 1e-6);  // float output: ~6e-8 rounding
}
