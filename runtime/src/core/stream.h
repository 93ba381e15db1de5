// SPDX-License-Identifier: Apache-2.0
// A stream, the core's (stream.cpp): everything a stream is, written once for
// every backend that supplies StreamOps (stream_ops.h): chunk framing with the
// patch embedding's left context, the input hygiene and scaling, the pooling
// window over the last W chunks, the head over the pooled sum, the recovery
// from non-finite logits, the push/submit/poll/wait result queue, offline
// clips; and batches as many such streams stepped together. A backend gives
// its ops (its kernels, its memory); the stream gives the rest (whisper.cpp's
// whisper_state over ggml's backends).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "mega/engine.hpp"
#include "stream_ops.h"

namespace mega {

// A backend's ops for one stream whose longest span is max_span_tokens (C,
// or a bidirectional clip); null if its memory or threads cannot be had.
// Called at creation only.
using MakeStreamOps = std::function<std::unique_ptr<StreamOps>(int64_t max_span_tokens)>;

// One stream (mega::Engine) on a backend's ops; backend: its name, a string
// that outlives the engine. Options are checked (EngineOptions ranges).
std::unique_ptr<Engine> create_stream(const char* backend, std::shared_ptr<const Model> model,
                                      const EngineOptions& opts, const MakeStreamOps& make_ops, std::string* error,
                                      Status* status);
// n_streams streams stepped one after the other, one chunk each per step;
// make_ops is called once per stream; shared_bytes: memory the backend
// shares between the streams' ops (counted in memory_bytes()).
std::unique_ptr<BatchEngine> create_batch_streams(const char* backend, std::shared_ptr<const Model> model,
                                                  int32_t n_streams, const EngineOptions& opts,
                                                  const MakeStreamOps& make_ops, int64_t shared_bytes,
                                                  std::string* error, Status* status);

// Tests (parity): classify_clip() of a core stream, also writing the embedding
// and each layer's output into trace, (n_layers + 1) x tokens x D floats with
// tokens = padded_clip_samples(n) / patch_stride. invalid_argument if e is not
// a core stream.
Status classify_clip_traced(Engine& e, const float* samples, int64_t n, float* logits, float* trace);

}  // namespace mega
