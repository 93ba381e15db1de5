// Builds simd_kernels.inc once per instruction set and picks the best set
// the CPU supports. On x86-64 with g++: AVX-512 (F), AVX2 + FMA, and SSE2;
// elsewhere only the portable 128-bit build (NEON on aarch64).
#include "cpu/simd_kernels.h"

#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MEGA_SIMD_X86 1
#include <immintrin.h>
#else
#define MEGA_SIMD_X86 0
#endif

namespace mega::cpu {

namespace {

// erf(x) ~ x P(x^2) / Q(x^2) for |x| <= 3.9 (erf(3.9) = 1 - 3.5e-8 is 1 in
// float). Fitted for this file: linearized least squares on the absolute
// error, reweighted towards minimax, coefficients rounded to float. Absolute
// error 5e-8 in exact arithmetic, 3.3e-7 evaluated in float with FMA (checked
// against erf in double on a 2e5-point grid); the attention weight
// 0.5 (1 + erf) is thus within 1.7e-7 of the exact value, below the ~6e-8
// rounding PyTorch's float32 1 + erf(x) already has plus a few ulp.
constexpr float k_erf_rational_clamp = 3.9f;
constexpr float k_erf_rational_p[7] = {1.128378630e+00f, 2.139491588e-01f, 5.243406072e-02f, 4.293236881e-03f,
                                       1.555407362e-04f, -1.990323426e-06f, 1.921686454e-08f};
constexpr float k_erf_rational_q[5] = {1.000000000e+00f, 5.229351521e-01f, 1.208014637e-01f, 1.555146929e-02f,
                                       1.098081120e-03f};

constexpr int32_t k_max_query_block = 48;  // AVX-512: 3 vectors of 16

// Floats of the fused attention's bias-term array (one query block's worth),
// rounded to whole 64-byte lines so the panel after it stays aligned.
int64_t attention_arg_floats(int32_t c) { return (int64_t(c) - 1 + k_max_query_block + 15) / 16 * 16; }

#if MEGA_SIMD_X86
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
namespace avx512 {
#define MEGA_SIMD_W 16
#include "cpu/simd_kernels.inc"
#undef MEGA_SIMD_W
}  // namespace avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
#define MEGA_SIMD_W 8
#include "cpu/simd_kernels.inc"
#undef MEGA_SIMD_W
}  // namespace avx2
#pragma GCC pop_options
#endif

namespace portable {
#define MEGA_SIMD_W 4
#include "cpu/simd_kernels.inc"
#undef MEGA_SIMD_W
}  // namespace portable

template <int Wf>
SimdKernels make_set(SimdLevel level, const char* name,
                     void (*attention)(const AttentionParams&, int32_t, int32_t, float*),
                     void (*linear)(const LinearParams&), void (*ema)(const EmaParams&, int32_t, int32_t, double*)) {
  SimdKernels k;
  k.level = level;
  k.name = name;
  k.query_block = 3 * Wf;
  k.ema_group = Wf / 2;
  k.attention = attention;
  k.linear = linear;
  k.ema_causal = ema;
  return k;
}

struct Sets {
  SimdKernels sets[3];
  int32_t n = 0;
  Sets() {
#if MEGA_SIMD_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) {
      sets[n++] = make_set<16>(SimdLevel::avx512, "avx512", avx512::attention, avx512::linear, avx512::ema_causal);
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      sets[n++] = make_set<8>(SimdLevel::avx2, "avx2", avx2::attention, avx2::linear, avx2::ema_causal);
    }
#endif
    sets[n++] = make_set<4>(SimdLevel::portable, MEGA_SIMD_X86 ? "sse2" : "portable", portable::attention,
                            portable::linear, portable::ema_causal);
  }
};

const Sets& sets() {
  static const Sets s;
  return s;
}

}  // namespace

const SimdKernels& simd_kernels() { return sets().sets[0]; }

int32_t simd_kernel_sets(const SimdKernels** out, int32_t max) {
  const Sets& s = sets();
  int32_t n = 0;
  for (; n < s.n && n < max; ++n) out[n] = &s.sets[n];
  return n;
}

int64_t attention_scratch_floats(int32_t c, int32_t z) {
  return int64_t(z) * k_max_query_block + attention_arg_floats(c) + int64_t(c) * k_max_query_block;
}

int64_t ema_scratch_doubles(int32_t n_dim) {
  return int64_t(5) * n_dim * 8;  // five (N x 8) arrays: AVX-512 holds 8 doubles per vector
}

}  // namespace mega::cpu
