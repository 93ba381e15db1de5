// SPDX-License-Identifier: Apache-2.0
// A stream, the core's (stream.cpp): everything a stream is, written once for
// every backend: chunk framing with the patch embedding's left context, the
// input hygiene and scaling (Stager, below), the slots of steps in flight and the
// push/submit/poll/wait result queue over them, the recovery from non-finite
// logits, offline clips; one stream (mega::Engine) and B streams stepped
// together (mega::BatchEngine) through the same code. A backend supplies its
// batched step (step_ops.h: its memory, its kernels, the streams' state,
// windows and head); the stream gives the rest (whisper.cpp's whisper_state
// over ggml's backends).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "mega/engine.hpp"
#include "ops.h"
#include "step_ops.h"
#include "stream_ops.h"

namespace mega {

// The framing of B streams into steps, the stream's own (stream.cpp), which
// the CUDA backend's host emulation shares: per stream the next chunk index
// and the last k - s scaled samples (the patch embedding's left context), and
// a step's input block per stream, [context | chunk], cleaned
// (mega::clean_sample) and scaled (scale_input). All memory is the caller's.
class Stager {
 public:
  // ctx: k - s; tails: n_streams * ctx floats, next: n_streams counters.
  void init(const ModelInfo& info, int64_t ctx, int64_t chunk_samples, int32_t n_streams, float* tails,
            int64_t* next);
  // Floats per stream in a step's block.
  int64_t stride() const;
  int64_t context() const;
  // One raw sample as the model reads it, counted in *stats.
  float clean(float raw, StreamStats* stats) const;
  // Stream b starts afresh: chunk 0 (a backend reads no state for it), silence before.
  void reset(int32_t b);
  // Stream b's patch context back to silence; its position goes on.
  void clear_context(int32_t b);
  // Stream b's chunk stands cleaned and scaled at block + ctx: puts its
  // context in front, keeps its last ctx samples for the next, gives it its
  // index and advances the stream.
  void close(int32_t b, float* block, int64_t* index);
  // A whole step: samples, n_streams * chunk_samples raw samples,
  // stream-major, into dst (stride() floats per stream) and index.
  void stage(const float* samples, float* dst, int64_t* index, StreamStats* stats);
  // A whole clip for one span: [ctx zeros | scaled samples, zero-padded to
  // total]; scaling applies to the padding too.
  void stage_clip(const float* samples, int64_t n, int64_t total, float* dst, StreamStats* stats) const;

 private:
  const ModelInfo* info_ = nullptr;
  int64_t ctx_ = 0, cs_ = 0;
  int32_t n_streams_ = 0;
  float* tails_ = nullptr;
  int64_t* next_ = nullptr;
};

// One stream (mega::Engine) over a backend's step for one stream; backend:
// its name, a string that outlives the engine.
std::unique_ptr<Engine> create_stream(const char* backend, std::shared_ptr<const Model> model,
                                      std::unique_ptr<StepOps> step, std::string* error, Status* status);
// n_streams streams (mega::BatchEngine) over a backend's step for n_streams.
std::unique_ptr<BatchEngine> create_batch_streams(const char* backend, std::shared_ptr<const Model> model,
                                                  int32_t n_streams, std::unique_ptr<StepOps> step,
                                                  std::string* error, Status* status);

// Backends that compute on the calling thread supply per-stream ops instead
// (stream_ops.h): a backend's ops for one stream whose longest span is
// max_span_tokens (C, or a bidirectional clip); null if its memory or threads
// cannot be had. Called at creation only.
using MakeStreamOps = std::function<std::unique_ptr<StreamOps>(int64_t max_span_tokens)>;
// The step over them (host_step.cpp); shared_bytes: memory the backend shares
// between the streams' ops (counted in memory_bytes()). Null without memory.
std::unique_ptr<StepOps> create_host_step(const Model& model, int32_t n_streams, int32_t n_slots,
                                          int64_t span_tokens, const MakeStreamOps& make_ops, int64_t shared_bytes);
// The streams over a host step; options are checked (EngineOptions ranges).
std::unique_ptr<Engine> create_stream(const char* backend, std::shared_ptr<const Model> model,
                                      const EngineOptions& opts, const MakeStreamOps& make_ops, std::string* error,
                                      Status* status);
std::unique_ptr<BatchEngine> create_batch_streams(const char* backend, std::shared_ptr<const Model> model,
                                                  int32_t n_streams, const EngineOptions& opts,
                                                  const MakeStreamOps& make_ops, int64_t shared_bytes,
                                                  std::string* error, Status* status);

// Tests (parity): classify_clip() of a core stream, also writing the embedding
// and each layer's output into trace, (n_layers + 1) x tokens x D floats with
// tokens = padded_clip_samples(n) / patch_stride (backends with traces: the
// host step). invalid_argument if e is not a core stream.
Status classify_clip_traced(Engine& e, const float* samples, int64_t n, float* logits, float* trace);

}  // namespace mega
