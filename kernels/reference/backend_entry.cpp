// SPDX-License-Identifier: Apache-2.0
// The reference backend ("reference"): the scalar reference kernels
// (kernels/cpu/kernels.h, plain loops written from the paper's equations) as
// a backend of their own, for checking the others against. It has no stream
// code: the core's stream (stream.h) runs over the CPU backend's ops with the
// references chosen; all a backend must supply is its ops.
#include "backend.h"
#include "cpu/cpu_ops.h"
#include "stream.h"

namespace {

bool reference_available(std::string* why) {
  if (why) *why = "scalar reference kernels";
  return true;
}

std::unique_ptr<mega::Engine> create_engine(std::shared_ptr<const mega::Model> model, const mega::EngineOptions& o,
                                            std::string* error, mega::Status* status) {
  const mega::HParams hp = model->hparams();
  const mega::ModelWeights& w = mega::model_weights(*model);
  return mega::create_stream("reference", std::move(model), o, [&](int64_t span_tokens) {
    return mega::create_cpu_stream_ops(hp, w, mega::KernelImpl::reference, 1, span_tokens);
  }, error, status);
}

std::unique_ptr<mega::BatchEngine> create_batch_engine(std::shared_ptr<const mega::Model> model, int32_t n_streams,
                                                       const mega::EngineOptions& o, std::string* error,
                                                       mega::Status* status) {
  const mega::HParams hp = model->hparams();
  const mega::ModelWeights& w = mega::model_weights(*model);
  return mega::create_batch_streams("reference", std::move(model), n_streams, o, [&](int64_t span_tokens) {
    return mega::create_cpu_stream_ops(hp, w, mega::KernelImpl::reference, 1, span_tokens);
  }, 0, error, status);
}

const mega::BackendInterface kReferenceBackend = [] {
  mega::BackendInterface b;
  b.abi = MEGA_KWS_VERSION_STRING;
  b.name = "reference";
  b.available = reference_available;
  b.create_engine = create_engine;
  b.create_batch_engine = create_batch_engine;
  return b;
}();

}  // namespace

const mega::BackendInterface* mega::reference_backend_entry() { return &kReferenceBackend; }
