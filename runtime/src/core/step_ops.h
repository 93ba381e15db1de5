// SPDX-License-Identifier: Apache-2.0
// What a backend supplies to the core's streams (stream.h): its batched step.
// The core frames each stream's samples into a slot's host memory (Stager, stream.h),
// launches the slot, and collects it when the backend says it is done; it
// owns the slots' order, the input hygiene, the recovery from non-finite
// logits, the result queue and clips. The backend owns its memory (pinned on
// a GPU), its kernels, the streams' recurrent state, their pooling windows
// and the head: a step runs the model over every stream's chunk and leaves
// each stream's window logits in the slot.
//
// Implemented by the host step over per-stream StreamOps (host_step.cpp: the
// CPU and reference backends) and by the CUDA backend's device step
// (kernels/cuda/device_step.h).
#pragma once

#include <cstdint>

#include "mega/mega.hpp"

namespace mega {

// One step's host memory, for n_streams streams.
struct StepSlot {
  float* samples = nullptr;  // n_streams blocks of [ctx | chunk], scaled (Stager, stream.h)
  int64_t* index = nullptr;  // n_streams chunk indices (0: the stream starts afresh)
  float* logits = nullptr;   // n_streams x n_classes window logits, once the step is done
};

class StepOps {
 public:
  virtual ~StepOps() = default;

  // Steps that may be in flight at once (each with its own slot).
  virtual int32_t n_slots() const = 0;
  virtual StepSlot slot(int32_t r) = 0;

  // Starts slot r's step: every stream's chunk through the model, its sum into
  // its pooling window (slot index % W) and its clip total (from chunk 0),
  // the head over the last min(index + 1, W) chunks into slot r's logits. A
  // stream whose index is 0 starts from silence. May return before it is done.
  virtual Status launch(int32_t r) = 0;
  // Whether slot r's step is done (never blocks).
  virtual Status ready(int32_t r, bool* done) = 0;
  // Blocks until slot r's step is done.
  virtual Status finish(int32_t r) = 0;

  // Stream b's recurrent state, pooling window and total back to silence
  // (non-finite logits); ordered before the next launch, after those queued.
  virtual Status clear_state(int32_t b) = 0;

  // Clips, on one-stream steps. Unidirectional: after slot r's step, the
  // head over the stream's total since chunk 0, synchronously.
  virtual Status clip_head(int32_t r, float* logits) = 0;
  // Bidirectional: the host memory a clip is staged into ([ctx | samples]),
  // its capacity in tokens, and one synchronous pass over n_tok tokens with
  // the head over all of them.
  virtual float* clip_samples() = 0;
  virtual int64_t clip_tokens() const = 0;
  virtual Status classify_span(int64_t n_tok, float* logits) = 0;

  // Tests (parity): the embedding's and each layer's output, (n_layers + 1)
  // x trace_tokens x D floats, at the chunk's own offset (null: off).
  // Backends without traces ignore it.
  virtual void set_trace(float* trace, int64_t trace_tokens) {
    (void)trace;
    (void)trace_tokens;
  }

  virtual int64_t memory_bytes() const = 0;
  virtual const char* last_error() const { return ""; }
};

}  // namespace mega
