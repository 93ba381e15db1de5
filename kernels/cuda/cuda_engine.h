// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's engines, behind its entry point (backend_entry.cpp).
#pragma once

#include <memory>
#include <string>

#include "mega/engine.hpp"

namespace mega::gpu {

std::unique_ptr<Engine> create_cuda_engine(std::shared_ptr<const Model> model, const EngineOptions& opts,
                                           std::string* error, Status* status);
std::unique_ptr<BatchEngine> create_cuda_batch_engine(std::shared_ptr<const Model> model, int32_t n_streams,
                                                      const EngineOptions& opts, std::string* error,
                                                      Status* status);
// True when a CUDA device is usable; *why names it, or says why not.
bool cuda_available(std::string* why);

}  // namespace mega::gpu
