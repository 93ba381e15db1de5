// SPDX-License-Identifier: Apache-2.0
// Tests for kernels/cpu/elementwise: accuracy against double-precision libm on dense
// grids, length/alignment/aliasing behaviour, and saturation at extreme inputs.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/elementwise.h"

namespace {

using mega::KernelImpl;
using UnaryFn = void (*)(KernelImpl, const float*, float*, int64_t);

constexpr double kPi = 3.14159265358979323846;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------------------------------
// Double-precision truths, written in forms that stay accurate in both tails (erfc for
// 1 + erf of a negative argument, e/(1+e) for the negative side of the sigmoid).

double exp_truth(float x) { return std::exp(static_cast<double>(x)); }
double erf_truth(float x) { return std::erf(static_cast<double>(x)); }

double sigmoid_d(double x) {
  const double e = std::exp(-std::fabs(x));
  return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
double sigmoid_truth(float x) { return sigmoid_d(x); }
double silu_truth(float x) { return static_cast<double>(x) * sigmoid_d(x); }

double gelu_truth(float x) {
  const double xd = x;
  return 0.5 * xd * std::erfc(-xd / std::sqrt(2.0));
}

double gelu_tanh_truth(float x) {
  // 0.5 (1 + tanh(u)) == sigmoid(2u), without the cancellation for negative u.
  const double xd = x;
  const double u = std::sqrt(2.0 / kPi) * (xd + 0.044715 * xd * xd * xd);
  return xd * sigmoid_d(2.0 * u);
}

double laplace_truth_d(double x) {
  const double z = (x - static_cast<double>(mega::cpu::kLaplaceMu)) /
                   static_cast<double>(mega::cpu::kLaplaceDivisor);
  return 0.5 * std::erfc(-z);
}
double laplace_truth(float x) { return laplace_truth_d(x); }

// ---------------------------------------------------------------------------------------
// Error measurement

enum class Metric {
  Abs,          // |got - want|
  AbsScaled,    // |got - want| / max(1, |want|): absolute below 1, relative above
  RelNormal,    // |got - want| / |want| where want is a normal float; below FLT_MIN
                // the kernels may flush to 0, so there only |got - want| <= FLT_MIN
  RelNormalX,   // for x * f(x) (silu): relative while want / max(1, |x|) is a normal
                // float; beyond that f(x) may be flushed, so |got - want| <= FLT_MIN |x|
};

// The flush threshold sits one float above ln FLT_MIN, so values a hair above FLT_MIN
// may be flushed too.
constexpr double kFlushLimit = FLT_MIN * 1.00001;

struct ErrorStats {
  double max_err = 0.0;
  float worst_x = 0.0f;
  double worst_got = 0.0;
  double worst_want = 0.0;
  int64_t nan_count = 0;
};

double metric_error(Metric m, float x, double got, double want) {
  const double diff = std::fabs(got - want);
  switch (m) {
    case Metric::Abs:
      return diff;
    case Metric::AbsScaled:
      return diff / std::fmax(1.0, std::fabs(want));
    case Metric::RelNormal:
      if (std::fabs(want) >= kFlushLimit) return diff / std::fabs(want);
      // Flush range: map "within FLT_MIN" to 0 and anything worse to a failing value.
      return diff <= kFlushLimit ? 0.0 : 1.0;
    case Metric::RelNormalX: {
      const double scale = std::fmax(1.0, std::fabs(static_cast<double>(x)));
      if (std::fabs(want) / scale >= kFlushLimit) return diff / std::fabs(want);
      return diff <= kFlushLimit * scale ? 0.0 : 1.0;
    }
  }
  return 0.0;
}

std::vector<float> linspace(double lo, double hi, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const double frac = static_cast<double>(i) / static_cast<double>(count - 1);
    v[static_cast<size_t>(i)] = static_cast<float>(lo + (hi - lo) * frac);
  }
  return v;
}

template <typename Truth>
ErrorStats measure(UnaryFn fn, KernelImpl impl, const std::vector<float>& xs, Truth truth, Metric m) {
  std::vector<float> ys(xs.size());
  fn(impl, xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
  ErrorStats s;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (std::isnan(ys[i])) {
      ++s.nan_count;
      continue;
    }
    const double want = truth(xs[i]);
    const double err = metric_error(m, xs[i], ys[i], want);
    if (err > s.max_err) {
      s.max_err = err;
      s.worst_x = xs[i];
      s.worst_got = ys[i];
      s.worst_want = want;
    }
  }
  return s;
}

const char* impl_name(KernelImpl impl) { return impl == KernelImpl::optimized ? "fast" : "reference"; }

template <typename Truth>
void expect_accuracy(const char* name, UnaryFn fn, KernelImpl impl, const std::vector<float>& xs,
                     Truth truth, Metric m, double bound) {
  const ErrorStats s = measure(fn, impl, xs, truth, m);
  std::printf("[ measured ] %-10s %-9s max err %.3g at x=%.9g (got %.9g, want %.9g)\n", name,
              impl_name(impl), s.max_err, static_cast<double>(s.worst_x), s.worst_got,
              s.worst_want);
  EXPECT_EQ(s.nan_count, 0) << name << " produced NaN for finite input";
  EXPECT_LE(s.max_err, bound) << name << " " << impl_name(impl) << " worst at x=" << s.worst_x
                              << " got " << s.worst_got << " want " << s.worst_want;
}

constexpr int64_t kGrid = 1000000;

// ---------------------------------------------------------------------------------------
// Accuracy of the fast path

TEST(ElementwiseFast, ExpRelativeError) {
  expect_accuracy("exp", mega::cpu::vec_exp, KernelImpl::optimized, linspace(-87.0, 88.0, kGrid),
                  exp_truth, Metric::RelNormal, 4e-7);
  // Near zero the polynomial carries everything.
  expect_accuracy("exp", mega::cpu::vec_exp, KernelImpl::optimized, linspace(-1.0, 1.0, kGrid),
                  exp_truth, Metric::RelNormal, 4e-7);
  // Right up to the flush threshold and the overflow threshold.
  expect_accuracy("exp", mega::cpu::vec_exp, KernelImpl::optimized, linspace(-87.33654, -86.0, 100000),
                  exp_truth, Metric::RelNormal, 4e-7);
  expect_accuracy("exp", mega::cpu::vec_exp, KernelImpl::optimized, linspace(87.0, 88.72, 100000),
                  exp_truth, Metric::RelNormal, 4e-7);
}

TEST(ElementwiseFast, ExpFlushesBelowFltMin) {
  // Below ln FLT_MIN = -87.3365 the true value is under FLT_MIN; the kernel returns 0.
  const std::vector<float> xs = linspace(-120.0, -87.33655, 100000);
  std::vector<float> ys(xs.size());
  mega::cpu::vec_exp(KernelImpl::optimized, xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(ys[i], 0.0f) << "x=" << xs[i];
}

TEST(ElementwiseFast, ErfAbsoluteError) {
  expect_accuracy("erf", mega::cpu::vec_erf, KernelImpl::optimized, linspace(-10.0, 10.0, kGrid),
                  erf_truth, Metric::Abs, 2e-7);
  // Dense around the switch between the two approximations at |z| = 1.
  expect_accuracy("erf", mega::cpu::vec_erf, KernelImpl::optimized, linspace(-2.0, 2.0, kGrid),
                  erf_truth, Metric::Abs, 2e-7);
}

TEST(ElementwiseFast, ErfRelativeErrorNearZero) {
  // erf(x) ~ 2x/sqrt(pi) for tiny x: the polynomial form must keep relative accuracy.
  expect_accuracy("erf", mega::cpu::vec_erf, KernelImpl::optimized, linspace(-1e-3, 1e-3, 100001),
                  erf_truth, Metric::RelNormal, 4e-7);
}

TEST(ElementwiseFast, ErfIsOdd) {
  const std::vector<float> xs = linspace(0.0, 6.0, 100000);
  std::vector<float> neg(xs.size()), pos(xs.size()), neg_out(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) neg[i] = -xs[i];
  mega::cpu::vec_erf(KernelImpl::optimized, xs.data(), pos.data(), static_cast<int64_t>(xs.size()));
  mega::cpu::vec_erf(KernelImpl::optimized, neg.data(), neg_out.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(neg_out[i], -pos[i]) << "x=" << xs[i];
}

TEST(ElementwiseFast, SigmoidRelativeError) {
  expect_accuracy("sigmoid", mega::cpu::vec_sigmoid, KernelImpl::optimized,
                  linspace(-100.0, 100.0, kGrid), sigmoid_truth, Metric::RelNormal, 4e-7);
  expect_accuracy("sigmoid", mega::cpu::vec_sigmoid, KernelImpl::optimized, linspace(-8.0, 8.0, kGrid),
                  sigmoid_truth, Metric::RelNormal, 4e-7);
}

TEST(ElementwiseFast, SiluRelativeError) {
  expect_accuracy("silu", mega::cpu::vec_silu, KernelImpl::optimized, linspace(-100.0, 100.0, kGrid),
                  silu_truth, Metric::RelNormalX, 4e-7);
  expect_accuracy("silu", mega::cpu::vec_silu, KernelImpl::optimized, linspace(-8.0, 8.0, kGrid),
                  silu_truth, Metric::RelNormal, 4e-7);
}

// GELU outputs reach |x|, where a float cannot hold 2e-7 absolute (ulp(8) = 9.5e-7), so
// the 2e-7 bound is absolute below 1 and relative above.
TEST(ElementwiseFast, GeluError) {
  expect_accuracy("gelu", mega::cpu::vec_gelu, KernelImpl::optimized, linspace(-10.0, 10.0, kGrid),
                  gelu_truth, Metric::AbsScaled, 2e-7);
}

TEST(ElementwiseFast, GeluTanhError) {
  expect_accuracy("gelu_tanh", mega::cpu::vec_gelu_tanh, KernelImpl::optimized,
                  linspace(-10.0, 10.0, kGrid), gelu_tanh_truth, Metric::AbsScaled, 2e-7);
}

TEST(ElementwiseFast, LaplaceAbsoluteError) {
  expect_accuracy("laplace", mega::cpu::vec_laplace, KernelImpl::optimized,
                  linspace(-10.0, 10.0, kGrid), laplace_truth, Metric::Abs, 2e-7);
  // The interesting part of the curve: |x - mu| < 2.
  expect_accuracy("laplace", mega::cpu::vec_laplace, KernelImpl::optimized,
                  linspace(-1.3, 2.7, kGrid), laplace_truth, Metric::Abs, 2e-7);
}

TEST(ElementwiseFast, GeluAndLaplaceKeepRelativeAccuracyInNegativeTail) {
  // 1 + erf(z) for z < 0 comes from erfc directly, so tiny outputs are still accurate.
  // In the far tail erfc(z) changes by 2 z^2 ulp per ulp of z, so the truth here starts
  // from the same float z the kernel computes, isolating the erfc evaluation.
  const auto gelu_float_z = [](float x) {
    const float z = x / 1.41421356f;
    return 0.5 * static_cast<double>(x) * std::erfc(-static_cast<double>(z));
  };
  const auto laplace_float_z = [](float x) {
    const float z = (x - mega::cpu::kLaplaceMu) / mega::cpu::kLaplaceDivisor;
    return 0.5 * std::erfc(-static_cast<double>(z));
  };
  expect_accuracy("gelu", mega::cpu::vec_gelu, KernelImpl::optimized, linspace(-12.0, -1.0, 100000),
                  gelu_float_z, Metric::RelNormal, 1e-6);
  expect_accuracy("laplace", mega::cpu::vec_laplace, KernelImpl::optimized, linspace(-2.8, 0.0, 100000),
                  laplace_float_z, Metric::RelNormal, 1e-6);
}

TEST(ElementwiseFast, LaplaceScaledBias) {
  const int64_t n = 4099;
  std::vector<float> in(n), bias(n), fused(n), arg(n), plain(n);
  // Multiples of 2^-10 times 0.5 plus multiples of 2^-8: every in * scale + bias is exact,
  // so the fused op must equal vec_laplace on the precomputed argument bit for bit.
  const float scale = 0.5f;
  for (int64_t i = 0; i < n; ++i) {
    in[i] = static_cast<float>(i - n / 2) * (1.0f / 1024.0f) * 4.0f;
    bias[i] = static_cast<float>((i * 37) % 1024 - 512) * (1.0f / 256.0f);
    arg[i] = in[i] * scale + bias[i];
  }
  for (KernelImpl impl : {KernelImpl::optimized, KernelImpl::reference}) {
    mega::cpu::laplace_scaled_bias(impl, in.data(), scale, bias.data(), fused.data(), n);
    mega::cpu::vec_laplace(impl, arg.data(), plain.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(fused[i], plain[i]) << impl_name(impl) << " i=" << i;
  }
  // A scale that is not a power of two, against the double truth. Rounding the product
  // and the sum to float may move the result by max|laplace'| (~1.42) times half an ulp
  // of each.
  const float scale2 = 0.125f * 1.1f;
  mega::cpu::laplace_scaled_bias(KernelImpl::optimized, in.data(), scale2, bias.data(), fused.data(), n);
  double max_err = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = static_cast<double>(in[i]) * scale2 + bias[i];
    const double err = std::fabs(fused[i] - laplace_truth_d(a));
    const double product = std::fabs(static_cast<double>(in[i]) * scale2);
    const double bound = 2e-7 + 1.5 * (product + std::fabs(a)) * std::ldexp(1.0, -24);
    max_err = std::fmax(max_err, err);
    ASSERT_LE(err, bound) << "i=" << i << " arg=" << a;
  }
  std::printf("[ measured ] laplace_scaled_bias fast max err %.3g\n", max_err);
}

TEST(ElementwiseFast, LaplaceConstants) {
  // PyTorch: (x - 0.707107) / (0.282095 * math.sqrt(2.0)), doubles rounded to float once.
  EXPECT_EQ(mega::cpu::kLaplaceDivisor, 0x1.988468p-2f);
  EXPECT_EQ(mega::cpu::kLaplaceMu, 0.707107f);
  const float mu = mega::cpu::kLaplaceMu;
  float out = 0.0f;
  for (KernelImpl impl : {KernelImpl::optimized, KernelImpl::reference}) {
    mega::cpu::vec_laplace(impl, &mu, &out, 1);
    EXPECT_EQ(out, 0.5f) << impl_name(impl);
  }
}

// ---------------------------------------------------------------------------------------
// Accuracy of the reference path (libm in float; looser, and it is allowed to lose
// relative accuracy where 1 + erf or 1 + tanh cancels).

TEST(ElementwiseReference, Accuracy) {
  const KernelImpl r = KernelImpl::reference;
  expect_accuracy("exp", mega::cpu::vec_exp, r, linspace(-87.0, 88.0, kGrid), exp_truth,
                  Metric::RelNormal, 1e-6);
  expect_accuracy("erf", mega::cpu::vec_erf, r, linspace(-10.0, 10.0, kGrid), erf_truth,
                  Metric::Abs, 1e-6);
  expect_accuracy("sigmoid", mega::cpu::vec_sigmoid, r, linspace(-80.0, 80.0, kGrid),
                  sigmoid_truth, Metric::RelNormal, 1e-6);
  expect_accuracy("silu", mega::cpu::vec_silu, r, linspace(-80.0, 80.0, kGrid), silu_truth,
                  Metric::RelNormal, 1e-6);
  expect_accuracy("gelu", mega::cpu::vec_gelu, r, linspace(-10.0, 10.0, kGrid), gelu_truth,
                  Metric::AbsScaled, 1e-6);
  expect_accuracy("gelu_tanh", mega::cpu::vec_gelu_tanh, r, linspace(-10.0, 10.0, kGrid),
                  gelu_tanh_truth, Metric::AbsScaled, 1e-6);
  expect_accuracy("laplace", mega::cpu::vec_laplace, r, linspace(-10.0, 10.0, kGrid),
                  laplace_truth, Metric::Abs, 1e-6);
}

TEST(Elementwise, Relu) {
  const float in[] = {-3.0f, -0.0f, 0.0f, 1e-40f, 2.5f, -kInf, kInf, kNan, -FLT_MAX};
  const float want[] = {0.0f, 0.0f, 0.0f, 1e-40f, 2.5f, 0.0f, kInf, kNan, 0.0f};
  const int64_t n = static_cast<int64_t>(sizeof in / sizeof in[0]);
  for (KernelImpl impl : {KernelImpl::optimized, KernelImpl::reference}) {
    float out[sizeof in / sizeof in[0]];
    mega::cpu::vec_relu(impl, in, out, n);
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(out[i])) << i;
      } else {
        EXPECT_EQ(out[i], want[i]) << i;
        EXPECT_FALSE(std::signbit(out[i])) << i;  // relu(-0) is +0
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Lengths, alignment, aliasing

struct NamedFn {
  const char* name;
  UnaryFn fn;
};

const NamedFn kUnaryFns[] = {
    {"exp", mega::cpu::vec_exp},         {"erf", mega::cpu::vec_erf},
    {"sigmoid", mega::cpu::vec_sigmoid}, {"silu", mega::cpu::vec_silu},
    {"gelu", mega::cpu::vec_gelu},       {"gelu_tanh", mega::cpu::vec_gelu_tanh},
    {"relu", mega::cpu::vec_relu},       {"laplace", mega::cpu::vec_laplace},
};

bool same_bits(float a, float b) {
  uint32_t ua, ub;
  std::memcpy(&ua, &a, sizeof ua);
  std::memcpy(&ub, &b, sizeof ub);
  return ua == ub;
}

// Values spread over every branch of the kernels (both erf pieces, both sigmoid sides).
float test_value(int64_t i) {
  return static_cast<float>(std::sin(static_cast<double>(i) * 0.7) * 12.0 +
                            static_cast<double>(i % 7) * 0.01);
}

TEST(Elementwise, ZeroLengthTouchesNothing) {
  for (KernelImpl impl : {KernelImpl::optimized, KernelImpl::reference}) {
    for (const NamedFn& f : kUnaryFns) {
      f.fn(impl, nullptr, nullptr, 0);
      float guard = 42.0f;
      const float x = 1.0f;
      f.fn(impl, &x, &guard, 0);
      EXPECT_EQ(guard, 42.0f) << f.name;
    }
    mega::cpu::laplace_scaled_bias(impl, nullptr, 1.0f, nullptr, nullptr, 0);
  }
}

TEST(Elementwise, LengthsUnalignedAndInPlace) {
  const int64_t lengths[] = {0, 1, 3, 15, 16, 17, 33, 1023};
  constexpr float kSentinel = -12345.0f;
  for (KernelImpl impl : {KernelImpl::optimized, KernelImpl::reference}) {
    for (const NamedFn& f : kUnaryFns) {
      for (int64_t n : lengths) {
        // Offset by one float from a 64-byte-aligned-ish vector start: unaligned for SIMD.
        // One guard element on each side of the output catches overruns.
        std::vector<float> in_store(static_cast<size_t>(n) + 2);
        std::vector<float> out_store(static_cast<size_t>(n) + 2, kSentinel);
        std::vector<float> inplace_store(static_cast<size_t>(n) + 2, kSentinel);
        float* in = in_store.data() + 1;
        float* out = out_store.data() + 1;
        float* inplace = inplace_store.data() + 1;
        for (int64_t i = 0; i < n; ++i) in[i] = inplace[i] = test_value(i);

        f.fn(impl, in, out, n);
        f.fn(impl, inplace, inplace, n);

        EXPECT_EQ(out_store.front(), kSentinel) << f.name << " n=" << n;
        EXPECT_EQ(out_store.back(), kSentinel) << f.name << " n=" << n;
        EXPECT_EQ(inplace_store.front(), kSentinel) << f.name << " n=" << n;
        EXPECT_EQ(inplace_store.back(), kSentinel) << f.name << " n=" << n;
        for (int64_t i = 0; i < n; ++i) {
          // One element at a time goes through the tail path; it must agree bit for bit
          // with the same element computed inside a full block.
          float single = 0.0f;
          f.fn(impl, in + i, &single, 1);
          ASSERT_TRUE(same_bits(out[i], inplace[i]))
              << f.name << " " << impl_name(impl) << " n=" << n << " i=" << i;
          ASSERT_TRUE(same_bits(out[i], single))
              << f.name << " " << impl_name(impl) << " n=" << n << " i=" << i;
          ASSERT_FALSE(std::isnan(out[i])) << f.name << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(Elementwise, LaplaceScaledBiasAliasing) {
  const int64_t lengths[] = {0, 1, 3, 17, 1023};
  const float scale = 0.37f;
  for (KernelImpl impl : {KernelImpl::optimized, KernelImpl::reference}) {
    for (int64_t n : lengths) {
      std::vector<float> in_store(static_cast<size_t>(n) + 1);
      std::vector<float> bias_store(static_cast<size_t>(n) + 1);
      float* in = in_store.data() + 1;
      float* bias = bias_store.data() + 1;
      for (int64_t i = 0; i < n; ++i) {
        in[i] = test_value(i);
        bias[i] = test_value(i + 1000) * 0.25f;
      }
      std::vector<float> ref_store(static_cast<size_t>(n) + 1);
      float* ref = ref_store.data() + 1;
      mega::cpu::laplace_scaled_bias(impl, in, scale, bias, ref, n);

      std::vector<float> a(in_store), b(bias_store);
      mega::cpu::laplace_scaled_bias(impl, a.data() + 1, scale, b.data() + 1, a.data() + 1, n);
      std::vector<float> c(in_store), d(bias_store);
      mega::cpu::laplace_scaled_bias(impl, c.data() + 1, scale, d.data() + 1, d.data() + 1, n);
      // in, bias and out all one array: out[i] = laplace(e[i] * scale + e[i]).
      std::vector<float> e(in_store), e_ref(static_cast<size_t>(n) + 1);
      mega::cpu::laplace_scaled_bias(impl, in, scale, in, e_ref.data() + 1, n);
      mega::cpu::laplace_scaled_bias(impl, e.data() + 1, scale, e.data() + 1, e.data() + 1, n);
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = static_cast<size_t>(i) + 1;
        ASSERT_TRUE(same_bits(ref[i], a[k])) << "out==in n=" << n << " i=" << i;
        ASSERT_TRUE(same_bits(ref[i], d[k])) << "out==bias n=" << n << " i=" << i;
        ASSERT_TRUE(same_bits(e_ref[k], e[k])) << "out==in==bias n=" << n << " i=" << i;
        ASSERT_GE(ref[i], 0.0f);
        ASSERT_LE(ref[i], 1.0f);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Extremes

float run1(UnaryFn fn, KernelImpl impl, float x) {
  float y = 0.0f;
  fn(impl, &x, &y, 1);
  return y;
}

TEST(ElementwiseFast, ExtremesSaturate) {
  const KernelImpl f = KernelImpl::optimized;
  using namespace mega::cpu;

  EXPECT_EQ(run1(vec_exp, f, -kInf), 0.0f);
  EXPECT_EQ(run1(vec_exp, f, -1000.0f), 0.0f);
  EXPECT_EQ(run1(vec_exp, f, -200.0f), 0.0f);
  EXPECT_EQ(run1(vec_exp, f, 88.8f), kInf);
  EXPECT_EQ(run1(vec_exp, f, 1000.0f), kInf);
  EXPECT_EQ(run1(vec_exp, f, kInf), kInf);
  EXPECT_EQ(run1(vec_exp, f, FLT_MAX), kInf);
  EXPECT_EQ(run1(vec_exp, f, -FLT_MAX), 0.0f);
  EXPECT_EQ(run1(vec_exp, f, 0.0f), 1.0f);
  EXPECT_EQ(run1(vec_exp, f, -0.0f), 1.0f);
  EXPECT_LT(run1(vec_exp, f, 88.7f), kInf);
  EXPECT_GE(run1(vec_exp, f, -100.0f), 0.0f);
  EXPECT_LT(run1(vec_exp, f, -100.0f), 1e-40f);

  for (float x : {4.0f, 4.5f, 10.0f, 1000.0f, FLT_MAX, kInf}) {
    EXPECT_EQ(run1(vec_erf, f, x), 1.0f) << x;
    EXPECT_EQ(run1(vec_erf, f, -x), -1.0f) << x;
  }
  EXPECT_EQ(run1(vec_erf, f, 0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(run1(vec_erf, f, -0.0f)));
  EXPECT_FLOAT_EQ(run1(vec_erf, f, 1e-30f), static_cast<float>(2.0 / std::sqrt(kPi) * 1e-30));

  EXPECT_EQ(run1(vec_sigmoid, f, -1000.0f), 0.0f);
  EXPECT_EQ(run1(vec_sigmoid, f, 1000.0f), 1.0f);
  EXPECT_EQ(run1(vec_sigmoid, f, -kInf), 0.0f);
  EXPECT_EQ(run1(vec_sigmoid, f, kInf), 1.0f);
  EXPECT_EQ(run1(vec_sigmoid, f, 0.0f), 0.5f);

  EXPECT_EQ(run1(vec_silu, f, -1000.0f), 0.0f);  // -0 compares equal to 0
  EXPECT_EQ(run1(vec_silu, f, -kInf), 0.0f);
  EXPECT_EQ(run1(vec_silu, f, 1000.0f), 1000.0f);
  EXPECT_EQ(run1(vec_silu, f, kInf), kInf);

  for (UnaryFn g : {vec_gelu, vec_gelu_tanh}) {
    EXPECT_EQ(run1(g, f, -1000.0f), 0.0f);
    EXPECT_EQ(run1(g, f, -kInf), 0.0f);
    EXPECT_EQ(run1(g, f, -FLT_MAX), 0.0f);
    EXPECT_EQ(run1(g, f, 1000.0f), 1000.0f);
    EXPECT_EQ(run1(g, f, FLT_MAX), FLT_MAX);
    EXPECT_EQ(run1(g, f, kInf), kInf);
    EXPECT_EQ(run1(g, f, 0.0f), 0.0f);
  }

  EXPECT_EQ(run1(vec_laplace, f, -kInf), 0.0f);
  EXPECT_EQ(run1(vec_laplace, f, -1000.0f), 0.0f);
  EXPECT_EQ(run1(vec_laplace, f, 1000.0f), 1.0f);
  EXPECT_EQ(run1(vec_laplace, f, kInf), 1.0f);
}

TEST(Elementwise, NanPropagatesAndExtremesNeverMakeNan) {
  const float extremes[] = {kInf, -kInf, 1000.0f, -1000.0f, FLT_MAX, -FLT_MAX, 88.8f,
                            -88.8f, 1e-45f, -1e-45f, 0.0f, -0.0f, 3.0e38f, -104.0f};
  const int64_t n_ext = static_cast<int64_t>(sizeof extremes / sizeof extremes[0]);
  for (const NamedFn& fn : kUnaryFns) {
    // NaN in, NaN out, on both impls, alone and inside a block of other values.
    std::vector<float> block(40);
    for (size_t i = 0; i < block.size(); ++i) block[i] = test_value(static_cast<int64_t>(i));
    block[5] = kNan;
    block[33] = -kNan;
    for (KernelImpl impl : {KernelImpl::optimized, KernelImpl::reference}) {
      EXPECT_TRUE(std::isnan(run1(fn.fn, impl, kNan))) << fn.name << " " << impl_name(impl);
      std::vector<float> out(block.size());
      fn.fn(impl, block.data(), out.data(), static_cast<int64_t>(block.size()));
      for (size_t i = 0; i < block.size(); ++i) {
        EXPECT_EQ(std::isnan(out[i]), std::isnan(block[i])) << fn.name << " i=" << i;
      }
    }
    // The fast path turns every non-NaN input, infinities included, into a non-NaN.
    std::vector<float> out(static_cast<size_t>(n_ext));
    fn.fn(KernelImpl::optimized, extremes, out.data(), n_ext);
    for (int64_t i = 0; i < n_ext; ++i) {
      EXPECT_FALSE(std::isnan(out[static_cast<size_t>(i)])) << fn.name << " x=" << extremes[i];
    }
  }
  float bias = 0.0f;
  float y = 0.0f;
  const float x = kNan;
  mega::cpu::laplace_scaled_bias(KernelImpl::optimized, &x, 1.0f, &bias, &y, 1);
  EXPECT_TRUE(std::isnan(y));
}

TEST(ElementwiseReference, FiniteExtremesSaturate) {
  const KernelImpl r = KernelImpl::reference;
  using namespace mega::cpu;
  EXPECT_EQ(run1(vec_exp, r, -1000.0f), 0.0f);
  EXPECT_EQ(run1(vec_exp, r, 1000.0f), kInf);
  EXPECT_EQ(run1(vec_erf, r, 1000.0f), 1.0f);
  EXPECT_EQ(run1(vec_erf, r, -kInf), -1.0f);
  EXPECT_EQ(run1(vec_sigmoid, r, -1000.0f), 0.0f);
  EXPECT_EQ(run1(vec_sigmoid, r, 1000.0f), 1.0f);
  EXPECT_EQ(run1(vec_silu, r, -1000.0f), 0.0f);
  EXPECT_EQ(run1(vec_silu, r, 1000.0f), 1000.0f);
  EXPECT_EQ(run1(vec_gelu, r, -1000.0f), 0.0f);
  EXPECT_EQ(run1(vec_gelu, r, 1000.0f), 1000.0f);
  EXPECT_EQ(run1(vec_gelu_tanh, r, -1000.0f), 0.0f);
  EXPECT_EQ(run1(vec_gelu_tanh, r, 1000.0f), 1000.0f);
  EXPECT_EQ(run1(vec_laplace, r, -1000.0f), 0.0f);
  EXPECT_EQ(run1(vec_laplace, r, 1000.0f), 1.0f);
}

}  // namespace
