// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's entry table (runtime/src/core/backend.h): its engines
// are the core's streams (runtime/src/core/stream.h) over its device step
// (device_step.h). libmega_kws.so finds the table in the module
// libmega_kws_cuda.so by mega_kws_backend(); the static mega_cuda's users
// register it themselves.
#include "backend.h"
#include "device_step.h"
#include "stream.h"

namespace {

mega::gpu::DeviceOptions device_options(const mega::EngineOptions& o, int32_t n_streams) {
  mega::gpu::DeviceOptions d;
  d.n_streams = n_streams;
  d.fp16 = o.fp16;
  d.device = o.device;
  d.max_in_flight = o.max_in_flight;
  d.max_clip_samples = o.max_clip_samples;
  return d;
}

std::unique_ptr<mega::Engine> create_engine(std::shared_ptr<const mega::Model> model, const mega::EngineOptions& o,
                                            std::string* error, mega::Status* status) {
  auto step = mega::gpu::DeviceStep::create(model, device_options(o, 1), error, status);
  if (!step) return nullptr;
  return mega::create_stream("cuda", std::move(model), std::move(step), error, status);
}

std::unique_ptr<mega::BatchEngine> create_batch_engine(std::shared_ptr<const mega::Model> model, int32_t n_streams,
                                                       const mega::EngineOptions& o, std::string* error,
                                                       mega::Status* status) {
  auto step = mega::gpu::DeviceStep::create(model, device_options(o, n_streams), error, status);
  if (!step) return nullptr;
  return mega::create_batch_streams("cuda", std::move(model), n_streams, std::move(step), error, status);
}

const mega::BackendInterface kCudaBackend = [] {
  mega::BackendInterface b;
  b.abi = MEGA_KWS_VERSION_STRING;
  b.name = "cuda";
  b.available = mega::gpu::cuda_device_present;
  b.create_engine = create_engine;
  b.create_batch_engine = create_batch_engine;
  return b;
}();

}  // namespace

extern "C" __attribute__((visibility("default"))) const mega::BackendInterface* mega_kws_backend(void) {
  return &kCudaBackend;
}
