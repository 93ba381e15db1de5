// SPDX-License-Identifier: Apache-2.0
// The engine factory (mega/engine.hpp): it checks the options and reaches
// every backend by name through the registry (backend_registry.h), the CPU
// one included (kernels/cpu). The core includes no backend's header.
#include "mega/engine.hpp"

#include <new>
#include <vector>

#include "backend_registry.h"

namespace mega {

namespace {

Status check_options(const EngineOptions& o, std::string* error) {
  if (o.max_in_flight < 1 || o.max_in_flight > 16) {
    if (error) *error = "max_in_flight must be in [1, 16]";
    return Status::invalid_argument;
  }
  if (o.max_clip_samples < 0) {
    if (error) *error = "max_clip_samples must be >= 0";
    return Status::invalid_argument;
  }
  return Status::ok;
}

}  // namespace

Status Engine::self_test(float* max_abs_diff) {
  const Model& m = model();
  if (max_abs_diff) *max_abs_diff = 0.0f;
  if (m.self_test_input().empty()) return Status::invalid_argument;
  std::vector<float> out(size_t(m.hparams().n_classes));
  const Status s = classify_clip(m.self_test_input().data(), int64_t(m.self_test_input().size()), out.data());
  return s == Status::ok ? m.check_self_test(out.data(), max_abs_diff) : s;
}

namespace {

// Why no backend of that name could be found: a known one missing here, or a bad name.
Status unserved(const std::string& backend) {
  return backend == "cuda" ? Status::no_device : Status::invalid_argument;
}

// The backend of that name if it can make engines here.
const BackendInterface* usable_backend(const std::string& name, std::string* why) {
  const BackendInterface* b = find_backend(name, why);
  return b && b->available(why) ? b : nullptr;
}

std::unique_ptr<Engine> make_engine(const std::string& backend, std::shared_ptr<const Model> model,
                                    const EngineOptions& opts, std::string* error, Status* status) {
  if (!model) return creation_failed<Engine>(error, status, Status::invalid_argument, "no model");
  const Status s = check_options(opts, error);
  if (s != Status::ok) return creation_failed<Engine>(error, status, s, error ? *error : "");
  std::string why;
  const BackendInterface* b = find_backend(backend, &why);
  if (!b) return creation_failed<Engine>(error, status, unserved(backend), why);
  return b->create_engine(std::move(model), opts, error, status);
}

std::unique_ptr<BatchEngine> make_batch_engine(const std::string& backend, std::shared_ptr<const Model> model,
                                               int32_t n_streams, const EngineOptions& opts, std::string* error,
                                               Status* status) {
  if (!model) return creation_failed<BatchEngine>(error, status, Status::invalid_argument, "no model");
  if (n_streams < 1 || n_streams > (1 << 20)) {
    return creation_failed<BatchEngine>(error, status, Status::invalid_argument, "n_streams must be in [1, 2^20]");
  }
  if (!model->streamable()) {
    return creation_failed<BatchEngine>(error, status, Status::not_streamable,
                                        "batched streams need a streaming (unidirectional) model");
  }
  const Status s = check_options(opts, error);
  if (s != Status::ok) return creation_failed<BatchEngine>(error, status, s, error ? *error : "");
  std::string why;
  const BackendInterface* b = find_backend(backend, &why);
  if (!b) return creation_failed<BatchEngine>(error, status, unserved(backend), why);
  return b->create_batch_engine(std::move(model), n_streams, opts, error, status);
}

}  // namespace

// The factories' containers may throw bad_alloc; nothing escapes the API.
std::unique_ptr<Engine> create_engine(const std::string& backend, std::shared_ptr<const Model> model,
                                      const EngineOptions& opts, std::string* error, Status* status) {
  try {
    return make_engine(backend, std::move(model), opts, error, status);
  } catch (const std::bad_alloc&) {
    return creation_failed<Engine>(error, status, Status::out_of_memory, "out of memory");
  }
}

std::unique_ptr<BatchEngine> create_batch_engine(const std::string& backend, std::shared_ptr<const Model> model,
                                                 int32_t n_streams, const EngineOptions& opts, std::string* error,
                                                 Status* status) {
  try {
    return make_batch_engine(backend, std::move(model), n_streams, opts, error, status);
  } catch (const std::bad_alloc&) {
    return creation_failed<BatchEngine>(error, status, Status::out_of_memory, "out of memory");
  }
}

bool backend_available(const std::string& backend, std::string* why) {
  std::string reason;
  const bool ok = usable_backend(backend, &reason) != nullptr;
  if (why) *why = reason;
  return ok;
}

const char* default_backend() { return backend_available("cuda") ? "cuda" : "cpu"; }

}  // namespace mega
