// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's step (the core's StepOps, runtime/src/core/step_ops.h):
// B streams of one model on one GPU. The core's streams (stream.cpp) frame
// the samples into a slot's pinned memory, launch it and collect it; this
// step owns the device side.
//
// All device memory (activations, per-stream state, weights, cuBLAS
// workspace) and all pinned host memory is allocated at creation. launch()
// replays the slot's CUDA graph (captured once at creation: input copy, every
// kernel and GEMM, the window logits copy back) plus an event, and returns;
// ready() queries the event, finish() blocks on it. On integrated GPUs
// (Jetson), where host memory is device memory, the kernels read the staged
// input and write the logits through mapped pinned memory and the graph has
// no copies. max_in_flight slots, each with its own graph, let the host stage
// the next chunk while earlier ones run.
//
// Per-stream state lives on the device and is indexed by the chunk index the
// host uploads with each step, so a stream at chunk 0 reads no state: the
// core's reset is a host-side counter. Bidirectional models only classify
// clips (one forward over the clip, no graph).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mega/mega.hpp"
#include "step_ops.h"

namespace mega::gpu {

struct DeviceOptions {
  int32_t n_streams = 1;
  bool fp16 = false;
  int32_t device = 0;
  int32_t max_in_flight = 3;
  int64_t max_clip_samples = 0;             // bidirectional clips (0: one window)
  int64_t attention_bytes = int64_t(256) << 20;  // cap on the attention scores buffer
  bool graphs = true;                       // false: launch each step's kernels directly
};

class DeviceStep : public StepOps {
 public:
  // Null with *error and *status on failure (device errors name the call).
  static std::unique_ptr<DeviceStep> create(std::shared_ptr<const Model> model, const DeviceOptions& opts,
                                            std::string* error, Status* status);

  // Steps replay CUDA graphs (false if asked not to, or if capture failed:
  // last_error() then says why).
  virtual bool uses_graphs() const = 0;
};

// True when a device is usable; *why names device 0 or says why not.
bool cuda_device_present(std::string* why);

}  // namespace mega::gpu
