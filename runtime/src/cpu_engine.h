// The CPU backend's engines (mega/engine.hpp), built into the runtime core:
// the stream state over the CPU ops (kernels/ops.h, create_cpu_stream_ops),
// reached by the engine factory through its backend table like any other.
#pragma once

#include <cstdint>

#include "backend.h"

namespace mega {

// The "cpu" entry of the backend table (backend_registry.cpp).
const BackendInterface* cpu_backend();

// Tests (parity): classify_clip() of a CPU engine, also writing the embedding
// and each layer's output into trace, (n_layers + 1) x tokens x D floats with
// tokens = padded_clip_samples(n) / patch_stride. invalid_argument if e is not
// a CPU engine.
Status classify_clip_traced(Engine& e, const float* samples, int64_t n, float* logits, float* trace);

}  // namespace mega
