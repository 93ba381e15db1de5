// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's forward pass emulated on the host (forward.h over
// host_ops.h, or another host launcher derived from HostOps): the same memory
// plan, weight packing, staging (the core's Stager, stream.h) and forward as the
// device step, in host memory and without graphs or streams. Float storage. The tests run it
// against the golden fixtures (tests/kernels/cuda/test_gpu_host.cpp); the float16 range
// check (fp16_range.h) measures a model's activations with it.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "host_ops.h"
#include "stream.h"  // the core's Stager (runtime/src/core)

namespace mega::gpu {

template <typename Launch = HostOps>
class HostEmulation {
 public:
  HostEmulation(std::shared_ptr<const mega::Model> model, int32_t n_streams, int64_t max_clip_samples = 0,
                 int64_t group = 3)
      : model_(std::move(model)) {
    const mega::ModelWeights& md = mega::model_weights(*model_);
    const mega::HParams& hp = model_->hparams();
    dm_ = make_dims(model_->hparams(), md);
    cap_.n_streams = n_streams;
    if (dm_.bidir) {
      const int64_t clip = std::max(max_clip_samples, hp.window_samples());
      cap_.clip_tokens = hp.padded_clip_samples(clip) / dm_.patch_s;
    }
    cap_.rows = std::max(int64_t(n_streams) * dm_.c, cap_.clip_tokens);
    cap_.group = group;
    teacher_capacity(dm_, &cap_);
    Carver sizing(0);
    carve_buffers(sizing, dm_, cap_, 0, &bf_);
    block_.assign(sizing.size() / sizeof(double) + 1, 0.0);
    Carver carve(reinterpret_cast<uintptr_t>(block_.data()));
    carve_buffers(carve, dm_, cap_, 0, &bf_);
    WeightPacker size_pk(nullptr, 0);
    pack_weights<float>(size_pk, md, dm_, &w_);
    weights_.assign(size_pk.size() / sizeof(double) + 1, 0.0);
    WeightPacker pk(reinterpret_cast<uint8_t*>(weights_.data()), reinterpret_cast<uintptr_t>(weights_.data()));
    pack_weights<float>(pk, md, dm_, &w_);
    tails_.assign(size_t(int64_t(n_streams) * dm_.ctx), 0.0f);
    next_.assign(size_t(n_streams), 0);
    stager_.init(model_->info(), dm_.ctx, dm_.chunk_samples, n_streams, tails_.data(), next_.data());
  }

  const mega::gpu::Dims& dims() const { return dm_; }
  // The backend's steps (runtime/src/core/ops.h) over this emulation's memory, and that
  // memory: for the backend-comparison harness (test_backend_ops.cpp).
  mega::gpu::GpuOps<float, Launch> ops() { return {ops_, dm_, cap_, bf_, w_}; }
  Launch& launcher() { return ops_; }
  const mega::gpu::Buffers<float>& buffers() const { return bf_; }

  // One chunk for every stream (n_streams * chunk_samples raw samples);
  // logits: n_streams * n_classes over each stream's window.
  mega::Status step(const float* samples, float* logits) {
    mega::Span sp = step_span();
    stats_.resize(size_t(cap_.n_streams));
    stager_.stage(samples, bf_.input, bf_.input_index, stats_.data());
    MEGA_TRY(mega::gpu::encode(ops_, *model_, dm_, cap_, bf_, w_, sp));
    return mega::gpu::head_forward(ops_, dm_, bf_, w_, cap_.n_streams, bf_.input_index, true, dm_.c, logits);
  }

  void reset(int32_t b) { stager_.reset(b); }

  // Offline logits of a clip on stream 0 (which is reset before and after).
  // Unidirectional models stream the clip; chunk_logits (may be null) then
  // gets each chunk's window logits.
  mega::Status classify(const float* samples, int64_t n, float* logits, std::vector<float>* chunk_logits = nullptr) {
    const mega::HParams& hp = model_->hparams();
    const int64_t total = hp.padded_clip_samples(n);
    const int64_t cs = hp.chunk_samples();
    if (!dm_.bidir) {
      if (cap_.n_streams != 1) return mega::Status::invalid_argument;
      reset(0);
      std::vector<float> chunk(static_cast<size_t>(cs)), window(static_cast<size_t>(dm_.n_classes));
      for (int64_t c0 = 0; c0 < total; c0 += cs) {
        for (int64_t i = 0; i < cs; ++i) chunk[size_t(i)] = c0 + i < n ? samples[c0 + i] : 0.0f;
        MEGA_TRY(step(chunk.data(), window.data()));
        if (chunk_logits) chunk_logits->insert(chunk_logits->end(), window.begin(), window.end());
      }
      const mega::Status s =
          mega::gpu::head_forward(ops_, dm_, bf_, w_, 1, bf_.input_index, false, dm_.c, logits);
      reset(0);
      return s;
    }
    if (total / dm_.patch_s > cap_.clip_tokens) return mega::Status::too_long;
    stats_.resize(1);
    stager_.stage_clip(samples, n, total, bf_.clip, stats_.data());
    mega::Span sp;
    sp.n_streams = 1;
    sp.n_tok = total / dm_.patch_s;
    sp.streaming = false;
    sp.samples = bf_.clip;
    sp.sample_stride = 0;
    sp.chunk_index = bf_.zero_index;
    MEGA_TRY(mega::gpu::encode(ops_, *model_, dm_, cap_, bf_, w_, sp));
    return mega::gpu::head_forward(ops_, dm_, bf_, w_, 1, bf_.zero_index, false, sp.n_tok, logits);
  }

 private:
  mega::Span step_span() const {
    mega::Span sp;
    sp.n_streams = cap_.n_streams;
    sp.n_tok = dm_.c;
    sp.streaming = true;
    sp.samples = bf_.input;
    sp.sample_stride = mega::gpu::step_stride(dm_);
    sp.chunk_index = bf_.input_index;
    return sp;
  }

  std::shared_ptr<const mega::Model> model_;
  mega::gpu::Dims dm_;
  mega::gpu::Capacity cap_;
  mega::gpu::Buffers<float> bf_;
  mega::gpu::WeightsDev w_;
  Launch ops_;
  mega::Stager stager_;
  std::vector<double> block_, weights_;
  std::vector<float> tails_;
  std::vector<int64_t> next_;
  std::vector<mega::StreamStats> stats_;  // input hygiene counts per stream
};

}  // namespace mega::gpu
