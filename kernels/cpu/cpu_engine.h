// The CPU backend's engines (mega/engine.hpp), behind its entry point
// (backend_entry.cpp): the stream state over the CPU ops (stream_ops.h). A
// leaf of the core like kernels/cuda: it reads a model through the public API
// and the core's weight views (weights.h) only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mega/engine.hpp"

namespace mega::cpu {

std::unique_ptr<Engine> create_cpu_engine(std::shared_ptr<const Model> model, const EngineOptions& opts,
                                          std::string* error, Status* status);
std::unique_ptr<BatchEngine> create_cpu_batch_engine(std::shared_ptr<const Model> model, int32_t n_streams,
                                                     const EngineOptions& opts, std::string* error,
                                                     Status* status);

// Tests (parity): classify_clip() of a CPU engine, also writing the embedding
// and each layer's output into trace, (n_layers + 1) x tokens x D floats with
// tokens = padded_clip_samples(n) / patch_stride. invalid_argument if e is not
// a CPU engine.
Status classify_clip_traced(Engine& e, const float* samples, int64_t n, float* logits, float* trace);

}  // namespace mega::cpu
