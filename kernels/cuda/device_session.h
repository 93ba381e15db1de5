// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's session: B streams of one model on one GPU.
//
// All device memory (activations, per-stream state, weights, cuBLAS
// workspace) and all pinned host memory is allocated at creation. A step
// advances every stream by one chunk: submit() scales the samples into a
// pinned staging slot and launches the slot's CUDA graph (captured once at
// creation: input copy, every kernel and GEMM, the logits copy back) plus an
// event, and returns; poll() checks the event, wait() blocks on it. On
// integrated GPUs (Jetson), where host memory is device memory, the kernels
// read the staged input and write the logits through mapped pinned memory
// and the graph has no copies. max_in_flight slots, each with its own graph,
// let the host stage the next chunk while earlier ones run.
//
// Per-stream state lives on the device and is indexed by the chunk index the
// host uploads with each step, so resetting a stream is a host-side counter
// (the kernels treat chunk 0 as a fresh stream). Bidirectional models only
// classify clips (one forward over the clip, no graph).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mega/mega.hpp"

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

struct StepResult {
  int64_t step = 0;
  const int64_t* chunk_index = nullptr;  // per stream
  const float* logits = nullptr;         // n_streams x n_classes, pinned; valid until the next submit()
                                         // (non-finite rows already zeroed and counted)
};

class DeviceSession {
 public:
  static std::unique_ptr<DeviceSession> create(std::shared_ptr<const Model> model, const DeviceOptions& opts,
                                               std::string* error, Status* status);
  virtual ~DeviceSession() = default;

  // n_streams * chunk_samples raw samples, stream-major.
  virtual Status submit(const float* samples) = 0;
  virtual Status poll(StepResult* out, bool* ready) = 0;
  virtual Status wait(StepResult* out) = 0;
  // Waits for every queued step and drops its results.
  virtual Status drain() = 0;
  // Stream b (-1: all) starts afresh at the next submit().
  virtual Status reset(int32_t b) = 0;
  // One-stream sessions: offline logits of a clip (stream 0 is reset).
  virtual Status classify_clip(const float* samples, int64_t n, float* logits) = 0;
  // Stream b's input hygiene counts (mega.hpp, StreamStats): samples are
  // cleaned as they are staged (NaN/Inf -> 0, clipped to full scale); a
  // result whose logits are not finite is zeroed, and that stream's state
  // (EMA rings, pooling window, patch context) is cleared while its position
  // goes on, as the CPU session does.
  virtual StreamStats stats(int32_t b) const = 0;

  virtual const Model& model() const = 0;
  virtual int32_t n_streams() const = 0;
  virtual int32_t queued() const = 0;
  virtual bool integrated() const = 0;
  // Steps replay CUDA graphs (false if asked not to, or if capture failed:
  // last_error() then says why).
  virtual bool uses_graphs() const = 0;
  virtual int64_t device_bytes() const = 0;
  virtual int64_t host_bytes() const = 0;
  virtual const char* last_error() const = 0;
};

// True when a device is usable; *why names device 0 or says why not.
bool cuda_device_present(std::string* why);

}  // namespace mega::gpu
