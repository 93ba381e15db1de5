// SPDX-License-Identifier: Apache-2.0
// MEGA_HD marks a function usable from both host and device code: the shared
// per-element math (scalar_math.h) and the CUDA kernels' element functions
// (kernels/*.cuh), so the plain C++ build and its tests run the same code the
// GPU does. Empty for the host compiler.
#pragma once

#if defined(__CUDACC__)
#define MEGA_HD __host__ __device__
#else
#define MEGA_HD
#endif
