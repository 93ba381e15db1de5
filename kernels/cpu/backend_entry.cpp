// SPDX-License-Identifier: Apache-2.0
// The CPU backend's entry point (backend.h): the table that the core's
// registry registers on first use, as it registers a program's or a loaded
// module's (backend_registry.cpp). Linked into the core library. Its streams
// are the core's (stream.h) over its ops (cpu_ops.h); it adds only its own
// options' checks and, for batches, one packed copy of the projections.
#include <cblas.h>

#include "backend.h"
#include "cpu/cpu_ops.h"
#include "stream.h"

namespace mega::cpu {

namespace {

bool cpu_available(std::string* why) {
  if (why) *why = "cpu";
  return true;
}

// The CPU options' ranges; ok or invalid_argument with *error set.
Status check_cpu_options(const EngineOptions& o, std::string* error) {
  if (o.kernels != KernelImpl::reference && o.kernels != KernelImpl::optimized) {
    if (error) *error = "unknown kernel implementation";
    return Status::invalid_argument;
  }
  if (o.n_threads < 1 || o.n_threads > kMaxThreads) {
    if (error) *error = "n_threads must be in [1, " + std::to_string(kMaxThreads) + "]";
    return Status::invalid_argument;
  }
  return Status::ok;
}

std::unique_ptr<Engine> create_cpu_engine(std::shared_ptr<const Model> model, const EngineOptions& o,
                                          std::string* error, Status* status) {
  const Status s = check_cpu_options(o, error);
  if (s != Status::ok) return creation_failed<Engine>(error, status, s, error ? *error : "");
  const HParams hp = model->hparams();
  const ModelWeights& w = model_weights(*model);
  return create_stream("cpu", std::move(model), o, [&](int64_t span_tokens) {
    return create_cpu_stream_ops(hp, w, o.kernels, o.n_threads, span_tokens);
  }, error, status);
}

// Each stream on one thread, all sharing one packed copy of the projections.
std::unique_ptr<BatchEngine> create_cpu_batch_engine(std::shared_ptr<const Model> model, int32_t n_streams,
                                                     const EngineOptions& opts, std::string* error, Status* status) {
  EngineOptions o = opts;
  o.n_threads = 1;
  const Status s = check_cpu_options(o, error);
  if (s != Status::ok) return creation_failed<BatchEngine>(error, status, s, error ? *error : "");
  const HParams hp = model->hparams();
  const ModelWeights& w = model_weights(*model);
  std::shared_ptr<const PackedWeights> packed;
  if (o.kernels == KernelImpl::optimized) {
    packed = PackedWeights::create(w);
    if (!packed) {
      return creation_failed<BatchEngine>(error, status, Status::out_of_memory, "no memory for the packed projections");
    }
  }
  return create_batch_streams("cpu", std::move(model), n_streams, o, [&](int64_t span_tokens) {
    return create_cpu_stream_ops(hp, w, o.kernels, o.n_threads, span_tokens, packed);
  }, packed ? packed->bytes() : 0, error, status);
}

}  // namespace

}  // namespace mega::cpu

namespace {

const mega::BackendInterface kCpuBackend = [] {
  mega::BackendInterface b;
  b.abi = MEGA_KWS_VERSION_STRING;
  b.name = "cpu";
  b.available = mega::cpu::cpu_available;
  b.create_engine = mega::cpu::create_cpu_engine;
  b.create_batch_engine = mega::cpu::create_cpu_batch_engine;
  return b;
}();

}  // namespace

const mega::BackendInterface* mega::cpu_backend_entry() { return &kCpuBackend; }

namespace mega {

// The public API's (mega.hpp): only the CPU backend's optimized kernels use BLAS.
void set_blas_threads(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

}  // namespace mega
