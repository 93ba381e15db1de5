// SPDX-License-Identifier: Apache-2.0
// Storage types of the CUDA backend's activations: float, or __half with
// float arithmetic (fp16 mode). ld() widens to float, st() rounds back; the
// element functions are written once against these. The plain C++ build
// (host emulation and its tests) knows only float.
#pragma once

#include "common/hd.h"

#if defined(__CUDACC__) || defined(MEGA_CUDA_STANDIN)
#include <cuda_fp16.h>
#endif

namespace mega::gpu {

MEGA_HD inline float ld(float v) { return v; }
MEGA_HD inline void st(float* p, float v) { *p = v; }

#if defined(__CUDACC__) || defined(MEGA_CUDA_STANDIN)
MEGA_HD inline float ld(__half v) { return __half2float(v); }
MEGA_HD inline void st(__half* p, float v) { *p = __float2half_rn(v); }
#endif

}  // namespace mega::gpu
