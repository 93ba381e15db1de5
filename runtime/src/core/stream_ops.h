// SPDX-License-Identifier: Apache-2.0
// What a backend supplies for one stream, as the core's stream (stream.h)
// runs it: the ops interface's steps (ops.h) plus the stream's recurrent
// state, its pooled sums and the classifier head, all in the backend's own
// memory. Implemented by the CPU backend's CpuOps (kernels/cpu/cpu_ops.h),
// for its optimized kernels and for the reference backend's scalar ones.
#pragma once

#include <cstdint>

#include "mega/mega.hpp"
#include "ops.h"
#include "weights.h"

namespace mega {

class StreamOps : public Ops {
 public:
  // Fresh recurrent state (the stream starts from silence).
  virtual void clear_state() = 0;
  // After forward(): the span's tokens summed (D doubles).
  virtual const double* span_sum() const = 0;
  // Logits (n_classes) of a pooled sum over n_tok tokens.
  virtual void head(const double* sum, int64_t n_tok, float* out) = 0;
  // Tests: x after the embedding and each layer into trace + (slot *
  // trace_tokens + offset) * D (null: off).
  virtual void set_trace(float* trace, int64_t trace_tokens, int64_t offset) = 0;
  virtual int64_t memory_bytes() const = 0;
};

}  // namespace mega
