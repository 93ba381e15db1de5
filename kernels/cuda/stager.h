// SPDX-License-Identifier: Apache-2.0
// Host-side bookkeeping of a batch of streams, shared by the device session
// and its host emulation: per stream the next chunk index and the last k - s
// scaled samples (the patch embedding's left context), and the staging of one
// step's input block [context | scaled chunk] per stream.
#pragma once

#include <algorithm>
#include <cstdint>

#include "mega/mega.hpp"
#include "ops.h"
#include "plan.h"

namespace mega::gpu {

class Stager {
 public:
  // tails: n_streams * ctx floats, next: n_streams counters (caller's memory).
  void init(const ModelInfo& info, const Dims& dm, int32_t n_streams, float* tails, int64_t* next) {
    info_ = &info;
    dm_ = dm;
    n_streams_ = n_streams;
    tails_ = tails;
    next_ = next;
    for (int32_t b = 0; b < n_streams; ++b) reset(b);
  }

  float scale(float s) const { return scale_input(*info_, s); }

  void reset(int32_t b) {
    clear_context(b);
    next_[b] = 0;
  }
  // Stream b's patch context back to silence; its position goes on.
  void clear_context(int32_t b) { std::fill(tails_ + int64_t(b) * dm_.ctx, tails_ + int64_t(b + 1) * dm_.ctx, 0.0f); }

  // samples: n_streams * chunk_samples raw samples, stream-major. Writes
  // step_stride(dm) floats per stream into dst and the chunk indices into
  // index, and advances the streams.
  // Samples are cleaned first (mega::clean_sample: NaN/Inf -> 0, clipped to
  // full scale), counted in stats[b].
  void stage(const float* samples, float* dst, int64_t* index, StreamStats* stats) {
    const int64_t cs = dm_.chunk_samples, ctx = dm_.ctx, stride = step_stride(dm_);
    for (int32_t b = 0; b < n_streams_; ++b) {
      float* out = dst + int64_t(b) * stride;
      float* tail = tails_ + int64_t(b) * ctx;
      const float* in = samples + int64_t(b) * cs;
      std::copy(tail, tail + ctx, out);
      for (int64_t i = 0; i < cs; ++i) out[ctx + i] = scale(clean_sample(in[i], &stats[b]));
      std::copy(out + cs, out + cs + ctx, tail);
      index[b] = next_[b]++;
    }
  }

  // A whole clip for the span path: [ctx zeros | scaled samples, zero-padded
  // to total]; scaling applies to the padding as on the CPU.
  void stage_clip(const float* samples, int64_t n, int64_t total, float* dst, StreamStats* stats) const {
    std::fill(dst, dst + dm_.ctx, 0.0f);
    for (int64_t j = 0; j < total; ++j) dst[dm_.ctx + j] = scale(j < n ? clean_sample(samples[j], stats) : 0.0f);
  }

  int64_t next_chunk(int32_t b) const { return next_[b]; }

 private:
  const ModelInfo* info_ = nullptr;
  Dims dm_;
  int32_t n_streams_ = 0;
  float* tails_ = nullptr;
  int64_t* next_ = nullptr;
};

}  // namespace mega::gpu
