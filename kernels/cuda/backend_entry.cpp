// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's entry point (runtime/src/core/backend.h): the table the engine
// factory registers, returned by the module's exported mega_kws_backend().
#include "backend.h"
#include "cuda_engine.h"

namespace {

const mega::BackendInterface kCudaBackend = [] {
  mega::BackendInterface b;
  b.abi = MEGA_KWS_VERSION_STRING;
  b.name = "cuda";
  b.available = mega::gpu::cuda_available;
  b.create_engine = mega::gpu::create_cuda_engine;
  b.create_batch_engine = mega::gpu::create_cuda_batch_engine;
  return b;
}();

}  // namespace

extern "C" __attribute__((visibility("default"))) const mega::BackendInterface* mega_kws_backend(void) {
  return &kCudaBackend;
}
