// SPDX-License-Identifier: Apache-2.0
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

// erf(x) ~ x P(x^2) / Q(x^2) for |x| < 3.9; beyond, the attention weight
// 0.5 (1 + erf) is exactly 0 or 1 (erf(3.9) = 1 - 3.5e-8 rounds to 1 in
// float). Fitted for this file: linearized least squares on the absolute
// error, reweighted towards minimax, then each coefficient rounded to float in
// turn with the others refitted (so the rounding leaves no systematic error
// beyond the fit's). In exact arithmetic with these float coefficients the
// error is 6e-8; evaluated in float with FMA, the weight is within 1.8e-7 of
// the exact value (checked on a 1e6-point grid against erf in double); its
// mean over any 0.1-wide range of x stays within 3e-8 (the fit's own
// oscillation), the rest is rounding noise that cancels over a row's keys.
constexpr float kErfRationalClamp = 3.9f;
constexpr float kErfRationalP[7] = {1.128378749e+00f, 2.081262767e-01f, 5.166473240e-02f, 4.055696540e-03f, 1.507295237e-04f, -1.994733111e-06f, 1.976469299e-08f};
constexpr float kErfRationalQ[5] = {1.0f, 5.177755356e-01f, 1.183969751e-01f, 1.506003179e-02f, 1.043389086e-03f};

constexpr int32_t kMaxQueryBlock = 48;  // AVX-512: 3 vectors of 16

// Floats of the fused attention's bias-term array (one query block's worth),
// rounded to whole 64-byte lines so the panel after it stays aligned.
int64_t attention_arg_floats(int32_t c) { return (int64_t(c) - 1 + kMaxQueryBlock + 15) / 16 * 16; }

// Whether the fused attention splits the last of its query blocks of
// query_block queries into two key halves (see attention_units): when there
// is an odd number of blocks, more than one.
bool split_last_block(int32_t query_block, int32_t c) {
  const int32_t blocks = (c + query_block - 1) / query_block;
  return blocks > 1 && blocks % 2 == 1;
}

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

int32_t attention_units(const SimdKernels& k, int32_t c) {
  return (c + k.query_block - 1) / k.query_block + (split_last_block(k.query_block, c) ? 1 : 0);
}

void attention_finish(const SimdKernels& k, const AttentionParams& p) {
  if (!split_last_block(k.query_block, p.c)) return;
  const int32_t i0 = (p.c - 1) / k.query_block * k.query_block;
  const int64_t n = int64_t(p.c - i0) * p.hdim;
  const float* a = p.partial;
  const float* b = p.partial + int64_t(k.query_block) * p.hdim;
  float* o = p.o + int64_t(i0) * p.hdim;
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}

void attention_all(const SimdKernels& k, const AttentionParams& p, float* scratch) {
  k.attention(p, 0, attention_units(k, p.c), scratch);
  attention_finish(k, p);
}

int64_t attention_partial_floats(int32_t hdim) { return int64_t(2) * kMaxQueryBlock * hdim; }

int64_t attention_scratch_floats(int32_t c, int32_t z) {
  return int64_t(z) * kMaxQueryBlock + attention_arg_floats(c) + int64_t(c) * kMaxQueryBlock;
}

int64_t ema_scratch_doubles(int32_t n_dim) {
  return int64_t(5) * n_dim * 8;  // five (N x 8) arrays: AVX-512 holds 8 doubles per vector
}

}  // namespace mega::cpu
