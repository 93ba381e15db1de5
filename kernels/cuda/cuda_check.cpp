// SPDX-License-Identifier: Apache-2.0
#include "cuda_check.h"

#include <cstdio>

namespace mega::gpu {

namespace {
thread_local char t_error[512];
}

Status report_cuda(cudaError_t err, const char* expr, const char* file, int line) {
  std::snprintf(t_error, sizeof t_error, "%s (%s) in %s at %s:%d", cudaGetErrorName(err), cudaGetErrorString(err),
                expr, file, line);
  return err == cudaErrorMemoryAllocation ? Status::out_of_memory : Status::device_error;
}

Status report_cublas(cublasStatus_t err, const char* expr, const char* file, int line) {
  std::snprintf(t_error, sizeof t_error, "cuBLAS %s in %s at %s:%d", cublasGetStatusString(err), expr, file, line);
  return err == CUBLAS_STATUS_ALLOC_FAILED ? Status::out_of_memory : Status::device_error;
}

const char* last_device_error() { return t_error; }

}  // namespace mega::gpu
