// SPDX-License-Identifier: Apache-2.0
// The interface between the core's engine factory (mega::create_engine,
// runtime/src/engine.cpp) and a compute backend. Backends are leaves: they
// include this and the core's other backend headers (ops.h, weights.h,
// forward_pass.h), the core includes none of theirs. The CPU backend
// (kernels/cpu) is linked into the core library and registered on first use
// through its entry point (cpu_backend_entry, below); the CUDA backend
// (kernels/cuda) is a separately loaded module, libmega_kws_cuda.so, so that
// the core library and the programs linking it need no CUDA library.
//
// Any other backend fills one BackendInterface and either
//  - is linked into a program that registers it (register_backend(); the
//    tests do this with the CUDA backend built as a static library), or
//  - is built as a module exporting the C symbol kBackendEntry, which the
//    factory dlopen()s from the directory of libmega_kws.so when
//    create_engine() first asks for that backend by name.
//
// The module and the core are built together (same compiler, same standard
// library), so C++ types cross the boundary; abi names the project version
// both were built from, and the factory refuses a module from another one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mega/engine.hpp"

namespace mega {

struct BackendInterface {
  const char* abi = nullptr;   // MEGA_KWS_VERSION_STRING of the build
  const char* name = nullptr;  // what create_engine() is asked for: "cuda"
  // True when the backend can create engines here; *why names the device, or
  // says why not. Cheap; called once per create_engine() at most.
  bool (*available)(std::string* why) = nullptr;
  // Options are already checked (EngineOptions ranges) and model is not null;
  // for batch engines the model is streamable and n_streams >= 1.
  std::unique_ptr<Engine> (*create_engine)(std::shared_ptr<const Model> model, const EngineOptions& opts,
                                           std::string* error, Status* status) = nullptr;
  std::unique_ptr<BatchEngine> (*create_batch_engine)(std::shared_ptr<const Model> model, int32_t n_streams,
                                                      const EngineOptions& opts, std::string* error,
                                                      Status* status) = nullptr;
};

// How a create function fails: the message in *error and the code in
// *status (either may be null), and no object.
template <typename T>
std::unique_ptr<T> creation_failed(std::string* error, Status* status, Status s, const std::string& msg) {
  if (error) *error = msg;
  if (status) *status = s;
  return nullptr;
}

// Makes a backend reachable by its name (the pointer must stay valid). False
// if a backend of that name is already registered, or the table is full.
bool register_backend(const BackendInterface* backend);

// The CPU backend's entry point, linked into the core
// (kernels/cpu/backend_entry.cpp): the registry registers its table before
// any other.
const BackendInterface* cpu_backend_entry();
// The reference backend's (kernels/reference/backend_entry.cpp): the scalar
// reference kernels, registered after the CPU backend.
const BackendInterface* reference_backend_entry();

// The name of the symbol a backend module exports (below).
constexpr const char* kBackendEntry = "mega_kws_backend";
using BackendEntry = const BackendInterface* (*)();

}  // namespace mega

// A backend's entry point: its interface table. Defined by each backend
// (kernels/cuda/backend_entry.cpp); the factory finds it with dlsym(), a
// program that links a backend statically calls it to register_backend().
extern "C" const mega::BackendInterface* mega_kws_backend(void);
