// SPDX-License-Identifier: Apache-2.0
// The CUDA stand-in's cuda_fp16.h: __half as an IEEE binary16 (_Float16,
// round to nearest even on conversion, as __float2half_rn), with only the
// conversions the backend uses, so half arithmetic cannot slip in unnoticed.
#pragma once

struct __half {
  _Float16 v;
};

inline float __half2float(__half h) { return float(h.v); }
namespace cuda_standin {
void note_half_overflow(float f);  // a finite float that rounds to an infinite half (counted, the first reported)
}
inline __half __float2half_rn(float f) {
  const __half h{_Float16(f)};
  if (__builtin_isinf(float(h.v)) && !__builtin_isinf(f) && !__builtin_isnan(f)) cuda_standin::note_half_overflow(f);
  return h;
}
inline __half __float2half(float f) { return __float2half_rn(f); }
