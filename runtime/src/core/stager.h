// SPDX-License-Identifier: Apache-2.0
// The framing of B streams into steps, the core's (stream.cpp) for every
// backend: per stream the next chunk index and the last k - s scaled samples
// (the patch embedding's left context), and a step's input block per stream,
// [context | chunk], cleaned (mega::clean_sample) and scaled (scale_input).
// All memory is the caller's.
#pragma once

#include <algorithm>
#include <cstdint>

#include "mega/mega.hpp"
#include "ops.h"

namespace mega {

class Stager {
 public:
  // ctx: k - s; tails: n_streams * ctx floats, next: n_streams counters.
  void init(const ModelInfo& info, int64_t ctx, int64_t chunk_samples, int32_t n_streams, float* tails,
            int64_t* next) {
    info_ = &info;
    ctx_ = ctx;
    cs_ = chunk_samples;
    n_streams_ = n_streams;
    tails_ = tails;
    next_ = next;
    for (int32_t b = 0; b < n_streams; ++b) reset(b);
  }

  // Floats per stream in a step's block.
  int64_t stride() const { return ctx_ + cs_; }
  int64_t context() const { return ctx_; }
  // One raw sample as the model reads it, counted in *stats.
  float clean(float raw, StreamStats* stats) const { return scale_input(*info_, clean_sample(raw, stats)); }

  // Stream b starts afresh: chunk 0 (a backend reads no state for it), silence before.
  void reset(int32_t b) {
    clear_context(b);
    next_[b] = 0;
  }
  // Stream b's patch context back to silence; its position goes on.
  void clear_context(int32_t b) { std::fill(tails_ + int64_t(b) * ctx_, tails_ + int64_t(b + 1) * ctx_, 0.0f); }

  // Stream b's chunk stands cleaned and scaled at block + ctx: puts its
  // context in front, keeps its last ctx samples for the next, gives it its
  // index and advances the stream.
  void close(int32_t b, float* block, int64_t* index) {
    float* tail = tails_ + int64_t(b) * ctx_;
    std::copy(tail, tail + ctx_, block);
    std::copy(block + cs_, block + cs_ + ctx_, tail);
    *index = next_[b]++;
  }

  // A whole step: samples, n_streams * chunk_samples raw samples,
  // stream-major, into dst (stride() floats per stream) and index.
  void stage(const float* samples, float* dst, int64_t* index, StreamStats* stats) {
    for (int32_t b = 0; b < n_streams_; ++b) {
      float* block = dst + int64_t(b) * stride();
      const float* in = samples + int64_t(b) * cs_;
      for (int64_t i = 0; i < cs_; ++i) block[ctx_ + i] = clean(in[i], &stats[b]);
      close(b, block, index + b);
    }
  }

  // A whole clip for one span: [ctx zeros | scaled samples, zero-padded to
  // total]; scaling applies to the padding too.
  void stage_clip(const float* samples, int64_t n, int64_t total, float* dst, StreamStats* stats) const {
    std::fill(dst, dst + ctx_, 0.0f);
    for (int64_t j = 0; j < total; ++j) {
      dst[ctx_ + j] = scale_input(*info_, j < n ? clean_sample(samples[j], stats) : 0.0f);
    }
  }

 private:
  const ModelInfo* info_ = nullptr;
  int64_t ctx_ = 0, cs_ = 0;
  int32_t n_streams_ = 0;
  float* tails_ = nullptr;
  int64_t* next_ = nullptr;
};

}  // namespace mega
