// SPDX-License-Identifier: Apache-2.0
// CUDA_CHECK / CUBLAS_CHECK: inside the library a failed call returns a
// Status from the enclosing function (out_of_memory or device_error) after
// writing "cudaErrorX (text) in expr at file:line" into a thread-local
// buffer (last_device_error()); nothing aborts, nothing allocates.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "mega/mega.hpp"

namespace mega::gpu {

Status report_cuda(cudaError_t err, const char* expr, const char* file, int line);
Status report_cublas(cublasStatus_t err, const char* expr, const char* file, int line);
// The calling thread's last report (empty if none).
const char* last_device_error();

}  // namespace mega::gpu

#define CUDA_CHECK(expr)                                                            \
  do {                                                                              \
    const cudaError_t mega_e_ = (expr);                                             \
    if (mega_e_ != cudaSuccess) return ::mega::gpu::report_cuda(mega_e_, #expr, __FILE__, __LINE__); \
  } while (0)

#define CUBLAS_CHECK(expr)                                                          \
  do {                                                                              \
    const cublasStatus_t mega_e_ = (expr);                                          \
    if (mega_e_ != CUBLAS_STATUS_SUCCESS) return ::mega::gpu::report_cublas(mega_e_, #expr, __FILE__, __LINE__); \
  } while (0)
