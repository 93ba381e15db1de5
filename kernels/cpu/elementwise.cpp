// SPDX-License-Identifier: Apache-2.0
// Elementwise float kernels; see elementwise.h for the contract.
//
// Fast path design:
//   - every op is a small always-inline scalar function with no branches and no libm
//     calls, applied by a driver that works in fixed blocks of kBlockFloats floats. The fixed
//     trip count lets g++ vectorize even at -O2 (its very-cheap cost model refuses loops
//     that would need a scalar epilogue or a runtime alias check); in-place and
//     out-of-place calls take separate loops so __restrict is only used where it holds;
//     the tail is padded into a local block and run through the same block code, so an
//     element's result never depends on its position, alignment or the call's length.
//   - exp: Cody-Waite reduction x = k ln2 + r, degree-6 polynomial, 2^k built in the
//     exponent field. erf: odd polynomial below |z| = 1, above it erfc(|z|) =
//     exp(-z^2) t Q(t) with t = 1/(1 + |z|/2). Coefficients were fitted for this file
//     (iteratively reweighted least squares towards minimax relative error, then rounded
//     to float and checked in float arithmetic); tests/kernels/cpu/test_elementwise.cpp checks bounds.
//   - NaN flows through: clamps are selects on a compare (a NaN compare is false, so
//     NaN keeps its value) rather than std::min/std::max.
// Do not build this file with -ffast-math: the rounding and NaN handling rely on IEEE
// semantics.
#include "elementwise.h"

#include <cmath>
#include <cstddef>
#include <cstring>

namespace mega::cpu {
namespace {

#if defined(__GNUC__) || defined(__clang__)
#define MEGA_EW_INLINE inline __attribute__((always_inline))
#else
#define MEGA_EW_INLINE inline
#endif

// On x86-64 Linux with g++, also build AVX-512 and AVX2 copies of each fast loop, picked
// at load time by ifunc (16 or 8 floats per vector instead of 4). The project builds in
// ISO mode, where g++ contracts no multiply-add into an FMA, so every copy computes
// bit-identical results. Define MEGA_NO_TARGET_CLONES to turn it off.
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(MEGA_NO_TARGET_CLONES)
#define MEGA_EW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MEGA_EW_CLONES
#endif

MEGA_EW_INLINE uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

MEGA_EW_INLINE float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// c ? a : b without control flow. A plain ternary becomes a branch in g++'s IR, and PRE
// then specialises the code after it per arm (e.g. folds exp of a clamp bound to a
// constant whose evaluation would raise overflow), leaving conditional float operations
// that if-conversion refuses, so the loop stays scalar. The mask form is one basic block
// and vectorizes to compare + and/andnot/or (or a blend). NaN-safe: a false compare
// picks b.
MEGA_EW_INLINE float select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return from_bits((to_bits(a) & m) | (to_bits(b) & ~m));
}

// ---------------------------------------------------------------------------------------
// exp

constexpr float kLog2e = 1.44269502e+00f;
// ln2 = kLn2Hi + kLn2Lo; kLn2Hi = 355/512 has 9 significant bits, so k * kLn2Hi is
// exact for every k the clamp allows and x - k * kLn2Hi loses nothing.
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.121944417e-04f;
// Adding 1.5 * 2^23 rounds a float of magnitude < 2^22 to an integer held in the low
// mantissa bits, so k comes out of the bit pattern without a float-to-int conversion.
constexpr float kRoundMagic = 12582912.0f;
// Below kExpMin, the float just above ln FLT_MIN = -87.3365448, the result is flushed
// to 0: denormal arithmetic takes a microcode assist costing ~100 cycles per instruction
// on many x86 cores, and softmax / attention rows with very negative entries would hit it
// on every element. exp(kExpMin) = FLT_MIN (1 + 4.5e-6) is still normal. Above 89 the
// result is inf anyway. The clamp keeps k in [-126, 128], where the two-factor scaling
// below is exact.
constexpr float kExpMin = -87.3365402f;
constexpr float kExpMax = 89.0f;
// exp(r) ~ 1 + r + r^2 (c2 + c3 r + c4 r^2 + c5 r^3 + c6 r^4) on |r| <= ln2/2;
// fitted relative error 3e-9, far below float rounding.
constexpr float kExpC2 = 4.999999404e-01f;
constexpr float kExpC3 = 1.666651964e-01f;
constexpr float kExpC4 = 4.166839272e-02f;
constexpr float kExpC5 = 8.368778974e-03f;
constexpr float kExpC6 = 1.381444628e-03f;

// exp(hi + lo) for |lo| much smaller than 1: lo is added after range reduction, so a
// caller that knows its argument to better than float precision (erfc) keeps it.
MEGA_EW_INLINE float exp_split(float hi, float lo) {
  const bool flush = hi < kExpMin;  // false for NaN, which then flows through
  hi = select(flush, kExpMin, hi);
  hi = select(hi > kExpMax, kExpMax, hi);
  const float t = hi * kLog2e + kRoundMagic;
  // k + 256 as unsigned, in [130, 384] for clamped input; for NaN it is garbage, but
  // unsigned arithmetic keeps that free of UB and the NaN in r poisons the result.
  const uint32_t kb = to_bits(t) - to_bits(kRoundMagic) + 256u;
  const float kf = static_cast<float>(static_cast<int32_t>(kb - 256u));
  float r = hi - kf * kLn2Hi;
  r = r - kf * kLn2Lo;
  r = r + lo;
  float p = kExpC6;
  p = p * r + kExpC5;
  p = p * r + kExpC4;
  p = p * r + kExpC3;
  p = p * r + kExpC2;
  const float y = (r * r * p + r) + 1.0f;
  // 2^k = 2^k1 * 2^k2 with k1 = floor(k / 2): both factors are normal floats for every
  // clamped k (k = 128 near the overflow threshold does not fit one exponent field), and
  // the products overflow to inf just as the true value would.
  const uint32_t k1b = kb >> 1;                        // k1 + 128
  const float s1 = from_bits((k1b - 1u) << 23);        // biased exponent k1 + 127
  const float s2 = from_bits((kb - k1b - 1u) << 23);   // biased exponent k - k1 + 127
  return select(flush, 0.0f, (y * s1) * s2);
}

MEGA_EW_INLINE float exp_fast(float x) { return exp_split(x, 0.0f); }

// 1 / (1 + exp(-x)) computed from e = exp(-|x|) <= 1: nothing overflows, and for x < 0
// the form e / (1 + e) keeps full relative accuracy down to FLT_MIN (below which the
// result is flushed to 0 along with exp).
MEGA_EW_INLINE float sigmoid_fast(float x) {
  const float e = exp_fast(-std::fabs(x));
  const float num = select(x >= 0.0f, 1.0f, e);
  return num / (1.0f + e);
}

// silu(x) is -0 long before -200; clamping there avoids -inf * 0 = NaN for x = -inf.
constexpr float kSiluMin = -200.0f;

MEGA_EW_INLINE float silu_fast(float x) {
  const float xc = select(x < kSiluMin, kSiluMin, x);
  return xc * sigmoid_fast(xc);
}

// ---------------------------------------------------------------------------------------
// erf

// Below kErfSplit: erf(a) = a + a q(a^2), accurate to ~1 ulp relative, even for tiny a.
constexpr float kErfSplit = 1.0f;
constexpr float kErfQ0 = 1.283791661e-01f;  // 2/sqrt(pi) - 1
constexpr float kErfQ1 = -3.761262596e-01f;
constexpr float kErfQ2 = 1.128358543e-01f;
constexpr float kErfQ3 = -2.685381100e-02f;
constexpr float kErfQ4 = 5.188326817e-03f;
constexpr float kErfQ5 = -8.010184974e-04f;
constexpr float kErfQ6 = 7.853830175e-05f;
// Above it: erfc(a) = exp(-a^2) t Q(t), t = 1 / (1 + a/2), fitted for relative error
// 3e-9 on [1, 10.5]; Q(0) is close to 1/(2 sqrt(pi)) so the fit follows the asymptote.
constexpr float kErfcP0 = 2.820853889e-01f;
constexpr float kErfcP1 = 2.823569179e-01f;
constexpr float kErfcP2 = 2.436998636e-01f;
constexpr float kErfcP3 = 1.972742230e-01f;
constexpr float kErfcP4 = -2.219762187e-03f;
constexpr float kErfcP5 = 2.162352949e-01f;
constexpr float kErfcP6 = -3.977071941e-01f;
constexpr float kErfcP7 = 2.154338807e-01f;
constexpr float kErfcP8 = -3.693506494e-02f;
// erfc(9.1) = 6.7e-38 is the last value kept; beyond it erfc is flushed to 0 (it drops
// below FLT_MIN by 9.2), so no denormal arithmetic happens (see kExpMin). The clamp
// also keeps inf out of the polynomials.
constexpr float kErfClamp = 9.1f;

// For z: a = min(|z|, clamp), small = erf(a) for a < kErfSplit (meaningless above),
// tail = erfc(|z|) for |z| >= kErfSplit (meaningless below; 0 beyond the clamp). Both
// are always computed and then selected, which is what lets the loops vectorize.
MEGA_EW_INLINE void erf_parts(float z, float& a, float& small, float& tail) {
  a = std::fabs(z);
  const bool flush = a > kErfClamp;  // false for NaN
  a = select(flush, kErfClamp, a);

  const float s = a * a;
  float q = kErfQ6;
  q = q * s + kErfQ5;
  q = q * s + kErfQ4;
  q = q * s + kErfQ3;
  q = q * s + kErfQ2;
  q = q * s + kErfQ1;
  q = q * s + kErfQ0;
  small = a + a * q;

  // a^2 = ah^2 + al (a + ah) with ah = a cut to 12 significant bits: ah^2 is exact, and
  // passing the small rest separately into exp keeps erfc's relative error near 1 ulp
  // even where a^2 is ~100 (a single rounded a^2 would cost ~50 ulp there).
  const float ah = from_bits(to_bits(a) & 0xFFFFF000u);
  const float al = a - ah;
  const float ex = exp_split(-(ah * ah), -(al * (a + ah)));
  const float t = 1.0f / (1.0f + 0.5f * a);
  float p = kErfcP8;
  p = p * t + kErfcP7;
  p = p * t + kErfcP6;
  p = p * t + kErfcP5;
  p = p * t + kErfcP4;
  p = p * t + kErfcP3;
  p = p * t + kErfcP2;
  p = p * t + kErfcP1;
  p = p * t + kErfcP0;
  tail = select(flush, 0.0f, ex * (t * p));
}

MEGA_EW_INLINE float erf_fast(float z) {
  float a, small, tail;
  erf_parts(z, a, small, tail);
  const float big = 1.0f - tail;
  const float e = select(a < kErfSplit, small, big);
  return std::copysign(e, z);
}

// 1 + erf(z). For z < 0 this is erfc(|z|) taken directly, not 1 - erf(|z|), so GELU and
// Laplace keep their relative accuracy in the negative tail instead of cancelling to 0.
MEGA_EW_INLINE float one_plus_erf_fast(float z) {
  float a, small, tail;
  erf_parts(z, a, small, tail);
  const float neg_small = 1.0f - small;
  const float pos_small = 1.0f + small;
  const float pos_big = 2.0f - tail;
  const float neg = select(a < kErfSplit, neg_small, tail);
  const float pos = select(a < kErfSplit, pos_small, pos_big);
  return select(z < 0.0f, neg, pos);
}

// ---------------------------------------------------------------------------------------
// Activations. Constants and operation order follow the PyTorch model code, where the
// Python double constants are rounded to float once.

constexpr float kSqrt2 = 1.41421356f;            // x / math.sqrt(2.0)
constexpr float kSqrt2OverPi = 0.797884561f;  // math.sqrt(2.0 / math.pi)
constexpr float kGeluTanhCubic = 0.044715f;
// GELU of anything below -20 is -0 in float; clamping avoids -inf * 0 = NaN.
constexpr float kGeluMin = -20.0f;

MEGA_EW_INLINE float gelu_fast(float x) {
  const float xc = select(x < kGeluMin, kGeluMin, x);
  return (0.5f * xc) * one_plus_erf_fast(xc / kSqrt2);
}

// 0.5 (1 + tanh(u)) == sigmoid(2u), which reuses the accurate sigmoid.
MEGA_EW_INLINE float gelu_tanh_fast(float x) {
  const float xc = select(x < kGeluMin, kGeluMin, x);
  const float u = kSqrt2OverPi * (xc + kGeluTanhCubic * xc * xc * xc);
  return xc * sigmoid_fast(2.0f * u);
}

MEGA_EW_INLINE float laplace_fast(float x) {
  return 0.5f * one_plus_erf_fast((x - kLaplaceMu) / kLaplaceDivisor);
}

// NaN stays NaN (like torch.relu); -0 becomes +0.
MEGA_EW_INLINE float relu_op(float x) { return select(x <= 0.0f, 0.0f, x); }

// ---------------------------------------------------------------------------------------
// Drivers

constexpr int64_t kBlockFloats = 16;

// Keep g++ -O3 from fully unrolling the block loops of cheap ops (relu) into straight
// scalar code before the loop vectorizer sees them.
#if defined(__GNUC__) && !defined(__clang__)
#define MEGA_EW_NO_UNROLL _Pragma("GCC unroll 1")
#else
#define MEGA_EW_NO_UNROLL
#endif

// One block of kBlockFloats elements. The fixed trip count is what lets g++ -O2 vectorize
// (no epilogue), and __restrict spares it a runtime overlap check, which -O2 would also
// refuse. The callers only pass pointers that really do not overlap, or a single pointer
// for in-place work.
template <typename Op>
MEGA_EW_INLINE void block_unary(const float* __restrict in, float* __restrict out, Op op) {
  MEGA_EW_NO_UNROLL
  for (int64_t j = 0; j < kBlockFloats; ++j) out[j] = op(in[j]);
}

template <typename Op>
MEGA_EW_INLINE void block_unary_inplace(float* p, Op op) {
  MEGA_EW_NO_UNROLL
  for (int64_t j = 0; j < kBlockFloats; ++j) p[j] = op(p[j]);
}

template <typename Op>
MEGA_EW_INLINE void block_binary(const float* __restrict a, const float* __restrict b,
                                 float* __restrict out, Op op) {
  MEGA_EW_NO_UNROLL
  for (int64_t j = 0; j < kBlockFloats; ++j) out[j] = op(a[j], b[j]);
}

// out == a, b elsewhere.
template <typename Op>
MEGA_EW_INLINE void block_binary_inplace(float* __restrict p, const float* __restrict b, Op op) {
  MEGA_EW_NO_UNROLL
  for (int64_t j = 0; j < kBlockFloats; ++j) p[j] = op(p[j], b[j]);
}

// The tail goes through a zero-padded local block and the same block code, so an
// element's result never depends on where it sits in the array. op(0) is finite for
// every op, and the padding avoids reading uninitialised floats.
template <typename Op>
MEGA_EW_INLINE void map_unary(const float* in, float* out, int64_t n, Op op) {
  int64_t i = 0;
  if (in == out) {
    for (; i + kBlockFloats <= n; i += kBlockFloats) block_unary_inplace(out + i, op);
  } else {
    for (; i + kBlockFloats <= n; i += kBlockFloats) block_unary(in + i, out + i, op);
  }
  const int64_t rem = n - i;
  if (rem > 0) {
    float buf[kBlockFloats] = {};
    std::memcpy(buf, in + i, static_cast<std::size_t>(rem) * sizeof(float));
    block_unary_inplace(buf, op);
    std::memcpy(out + i, buf, static_cast<std::size_t>(rem) * sizeof(float));
  }
}

template <typename Op>
MEGA_EW_INLINE void map_binary(const float* a, const float* b, float* out, int64_t n, Op op) {
  int64_t i = 0;
  if (out != a && out != b) {
    for (; i + kBlockFloats <= n; i += kBlockFloats) block_binary(a + i, b + i, out + i, op);
  } else if (out == a && out != b) {
    for (; i + kBlockFloats <= n; i += kBlockFloats) block_binary_inplace(out + i, b + i, op);
  } else {
    // out == b (or all three the same; rare): stage the inputs so out may overwrite them.
    for (; i + kBlockFloats <= n; i += kBlockFloats) {
      float buf_a[kBlockFloats];
      float buf_b[kBlockFloats];
      std::memcpy(buf_a, a + i, sizeof buf_a);
      std::memcpy(buf_b, b + i, sizeof buf_b);
      block_binary(buf_a, buf_b, out + i, op);
    }
  }
  const int64_t rem = n - i;
  if (rem > 0) {
    float buf_a[kBlockFloats] = {};
    float buf_b[kBlockFloats] = {};
    std::memcpy(buf_a, a + i, static_cast<std::size_t>(rem) * sizeof(float));
    std::memcpy(buf_b, b + i, static_cast<std::size_t>(rem) * sizeof(float));
    block_binary_inplace(buf_a, buf_b, op);
    std::memcpy(out + i, buf_a, static_cast<std::size_t>(rem) * sizeof(float));
  }
}

// Function objects rather than lambdas so the always_inline attribute is explicit.
struct ExpOp {
  MEGA_EW_INLINE float operator()(float x) const { return exp_fast(x); }
};
struct ErfOp {
  MEGA_EW_INLINE float operator()(float x) const { return erf_fast(x); }
};
struct SigmoidOp {
  MEGA_EW_INLINE float operator()(float x) const { return sigmoid_fast(x); }
};
struct SiluOp {
  MEGA_EW_INLINE float operator()(float x) const { return silu_fast(x); }
};
struct GeluOp {
  MEGA_EW_INLINE float operator()(float x) const { return gelu_fast(x); }
};
struct GeluTanhOp {
  MEGA_EW_INLINE float operator()(float x) const { return gelu_tanh_fast(x); }
};
struct ReluOp {
  MEGA_EW_INLINE float operator()(float x) const { return relu_op(x); }
};
struct LaplaceOp {
  MEGA_EW_INLINE float operator()(float x) const { return laplace_fast(x); }
};
struct LaplaceScaledBiasOp {
  float scale;
  MEGA_EW_INLINE float operator()(float x, float b) const { return laplace_fast(x * scale + b); }
};

MEGA_EW_CLONES void exp_fast_loop(const float* in, float* out, int64_t n) {
  map_unary(in, out, n, ExpOp{});
}
MEGA_EW_CLONES void erf_fast_loop(const float* in, float* out, int64_t n) {
  map_unary(in, out, n, ErfOp{});
}
MEGA_EW_CLONES void sigmoid_fast_loop(const float* in, float* out, int64_t n) {
  map_unary(in, out, n, SigmoidOp{});
}
MEGA_EW_CLONES void silu_fast_loop(const float* in, float* out, int64_t n) {
  map_unary(in, out, n, SiluOp{});
}
MEGA_EW_CLONES void gelu_fast_loop(const float* in, float* out, int64_t n) {
  map_unary(in, out, n, GeluOp{});
}
MEGA_EW_CLONES void gelu_tanh_fast_loop(const float* in, float* out, int64_t n) {
  map_unary(in, out, n, GeluTanhOp{});
}
MEGA_EW_CLONES void relu_loop(const float* in, float* out, int64_t n) {
  map_unary(in, out, n, ReluOp{});
}
MEGA_EW_CLONES void laplace_fast_loop(const float* in, float* out, int64_t n) {
  map_unary(in, out, n, LaplaceOp{});
}
MEGA_EW_CLONES void laplace_scaled_bias_fast_loop(const float* in, float scale, const float* bias,
                                                  float* out, int64_t n) {
  map_binary(in, bias, out, n, LaplaceScaledBiasOp{scale});
}

// ---------------------------------------------------------------------------------------
// Reference: libm in float, spelled like the PyTorch formulas.

inline float laplace_ref(float x) {
  return 0.5f * (1.0f + std::erf((x - kLaplaceMu) / kLaplaceDivisor));
}

}  // namespace

void vec_exp(KernelImpl impl, const float* in, float* out, int64_t n) {
  if (impl == KernelImpl::reference) {
    for (int64_t i = 0; i < n; ++i) out[i] = std::exp(in[i]);
  } else {
    exp_fast_loop(in, out, n);
  }
}

void vec_erf(KernelImpl impl, const float* in, float* out, int64_t n) {
  if (impl == KernelImpl::reference) {
    for (int64_t i = 0; i < n; ++i) out[i] = std::erf(in[i]);
  } else {
    erf_fast_loop(in, out, n);
  }
}

void vec_sigmoid(KernelImpl impl, const float* in, float* out, int64_t n) {
  if (impl == KernelImpl::reference) {
    for (int64_t i = 0; i < n; ++i) out[i] = 1.0f / (1.0f + std::exp(-in[i]));
  } else {
    sigmoid_fast_loop(in, out, n);
  }
}

void vec_silu(KernelImpl impl, const float* in, float* out, int64_t n) {
  if (impl == KernelImpl::reference) {
    // PyTorch's CPU kernel form: x / (1 + exp(-x)).
    for (int64_t i = 0; i < n; ++i) out[i] = in[i] / (1.0f + std::exp(-in[i]));
  } else {
    silu_fast_loop(in, out, n);
  }
}

void vec_gelu(KernelImpl impl, const float* in, float* out, int64_t n) {
  if (impl == KernelImpl::reference) {
    for (int64_t i = 0; i < n; ++i) {
      const float x = in[i];
      out[i] = 0.5f * x * (1.0f + std::erf(x / kSqrt2));
    }
  } else {
    gelu_fast_loop(in, out, n);
  }
}

void vec_gelu_tanh(KernelImpl impl, const float* in, float* out, int64_t n) {
  if (impl == KernelImpl::reference) {
    for (int64_t i = 0; i < n; ++i) {
      const float x = in[i];
      out[i] = 0.5f * x *
               (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x)));
    }
  } else {
    gelu_tanh_fast_loop(in, out, n);
  }
}

void vec_relu(KernelImpl /*impl*/, const float* in, float* out, int64_t n) {
  relu_loop(in, out, n);
}

void vec_laplace(KernelImpl impl, const float* in, float* out, int64_t n) {
  if (impl == KernelImpl::reference) {
    for (int64_t i = 0; i < n; ++i) out[i] = laplace_ref(in[i]);
  } else {
    laplace_fast_loop(in, out, n);
  }
}

void laplace_scaled_bias(KernelImpl impl, const float* in, float scale, const float* bias,
                         float* out, int64_t n) {
  if (impl == KernelImpl::reference) {
    for (int64_t i = 0; i < n; ++i) out[i] = laplace_ref(in[i] * scale + bias[i]);
  } else {
    laplace_scaled_bias_fast_loop(in, scale, bias, out, n);
  }
}

}  // namespace mega::cpu
