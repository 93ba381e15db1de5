// The CPU backend's ops for one stream, as its engine (cpu_engine.cpp) runs
// them: the ops interface's steps (ops.h) plus the stream's state, its pooled
// sums and the classifier head. Implemented by CpuOps (cpu_ops.h).
#pragma once

#include <cstdint>
#include <memory>

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

namespace cpu {
class PackedWeights;
}

// The CPU backend's StreamOps: impl picks the scalar references or the
// optimized kernels; n_threads (1..kMaxThreads) share each chunk;
// max_span_tokens is the longest span (C, or a bidirectional clip); packed:
// the optimized kernels' projections, shared (null: packed for these ops
// alone). Null if memory or threads cannot be had. Everything is allocated
// here.
std::unique_ptr<StreamOps> create_cpu_stream_ops(const HParams& hp, const ModelWeights& w, KernelImpl impl,
                                                   int32_t n_threads, int64_t max_span_tokens,
                                                   std::shared_ptr<const cpu::PackedWeights> packed = nullptr);

}  // namespace mega
