// SPDX-License-Identifier: Apache-2.0
// Between the stand-in's runtime (runtime.cpp), its kernel scheduler
// (fibers.cpp) and its cuBLAS (cublas.cpp).
#pragma once

#include <functional>
#include <string>

#include "cuda_runtime.h"

namespace cuda_standin {

// Runs every block of a launch on the calling thread; "" or the fault found.
std::string run_grid(KernelCall* call, dim3 grid, dim3 block, uint64_t seed);

// Stream-ordered work (a kernel, a copy, a GEMM): run now, queued, or recorded
// into the graph being captured, by the stream's rules. `what` names it in
// error messages. Returns the error of an API call that cannot be ordered
// (e.g. an invalid stream), cudaSuccess otherwise.
cudaError_t enqueue(cudaStream_t s, std::function<cudaError_t()> work, const char* what);

// True when [p, p + bytes) lies in memory the device can read or write
// (cudaMalloc'ed, or mapped pinned memory on an integrated device).
bool device_accessible(const void* p, size_t bytes);

// Sets the thread's last error (and a sticky one for faults).
cudaError_t set_error(cudaError_t e);

}  // namespace cuda_standin
