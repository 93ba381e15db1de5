// The CUDA stand-in's cuda_fp16.h: __half as an IEEE binary16 (_Float16,
// round to nearest even on conversion, as __float2half_rn), with only the
// conversions the backend uses, so half arithmetic cannot slip in unnoticed.
#pragma once

struct __half {
  _Float16 v;
};

inline float __half2float(__half h) { return float(h.v); }
inline __half __float2half_rn(float f) { return __half{_Float16(f)}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
