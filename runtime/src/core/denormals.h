// SPDX-License-Identifier: Apache-2.0
// Flush-to-zero for the duration of a forward pass. Random or trained weights
// can drive values (silu of large negative inputs, decayed EMA states) into
// the subnormal range, where x86 arithmetic is ~100x slower; values that small
// (< 1.2e-38) do not change any output we check. The caller's floating-point
// mode is restored on exit, so the library never leaks a mode change.
#pragma once

#if defined(__SSE2__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace mega {

class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals() {
#if defined(__SSE2__) || defined(__x86_64__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | 0x8040u);  // FTZ | DAZ
#elif defined(__aarch64__)
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(saved_));
    const unsigned long v = saved_ | (1ul << 24);  // FZ
    __asm__ __volatile__("msr fpcr, %0" : : "r"(v));
#endif
  }
  ~ScopedFlushDenormals() {
#if defined(__SSE2__) || defined(__x86_64__)
    _mm_setcsr(saved_);
#elif defined(__aarch64__)
    __asm__ __volatile__("msr fpcr, %0" : : "r"(saved_));
#endif
  }
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
#if defined(__aarch64__)
  unsigned long saved_ = 0;
#else
  unsigned int saved_ = 0;
#endif
};

}  // namespace mega
