// SPDX-License-Identifier: Apache-2.0
// mega::Engine and mega::BatchEngine on the CUDA backend (device_session.h).
#include "cuda_engine.h"

#include <algorithm>
#include <new>
#include <vector>

#include "device_session.h"
#include "stager.h"

namespace mega::gpu {

namespace {

DeviceOptions device_options(const EngineOptions& o, int32_t n_streams) {
  DeviceOptions d;
  d.n_streams = n_streams;
  d.fp16 = o.fp16;
  d.device = o.device;
  d.max_in_flight = o.max_in_flight;
  d.max_clip_samples = o.max_clip_samples;
  return d;
}

// One stream: samples gather in a chunk buffer; a full chunk becomes a step.
class CudaEngine final : public Engine {
 public:
  explicit CudaEngine(std::unique_ptr<DeviceSession> ds)
      : ds_(std::move(ds)),
        chunk_(size_t(ds_->model().hparams().chunk_samples()), 0.0f),
        logits_(size_t(ds_->model().hparams().n_classes), 0.0f) {}

  const char* backend() const override { return "cuda"; }
  const Model& model() const override { return ds_->model(); }

  Status push(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done) override {
    if (n_consumed) *n_consumed = 0;
    if (chunk_done) *chunk_done = false;
    if (!model().streamable()) return Status::not_streamable;
    if (n < 0 || (n > 0 && !samples) || !n_consumed || !chunk_done) return Status::invalid_argument;
    Status s = take_error();
    if (s != Status::ok) return s;
    s = ds_->drain();  // the synchronous contract: nothing of submit() is kept
    if (s != Status::ok) return s;
    if (!full_) take(samples, n, n_consumed);
    if (!full_) return Status::ok;
    s = ds_->submit(chunk_.data());
    if (s != Status::ok) return s;
    full_ = false;
    StepResult r;
    s = ds_->wait(&r);
    if (s != Status::ok) return s;
    to_chunk_result(r, &last_);
    *chunk_done = true;
    return Status::ok;
  }
  const ChunkResult& last_result() const override { return last_; }

  Status submit(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_submitted) override {
    if (n_consumed) *n_consumed = 0;
    if (chunk_submitted) *chunk_submitted = false;
    if (!model().streamable()) return Status::not_streamable;
    if (n < 0 || (n > 0 && !samples) || !n_consumed || !chunk_submitted) return Status::invalid_argument;
    if (const Status e = take_error(); e != Status::ok) return e;
    if (full_) {  // a chunk from an earlier call still waits for a free slot
      const Status s = flush(chunk_submitted);
      if (s != Status::ok) return s;
    }
    take(samples, n, n_consumed);
    if (!full_) return Status::ok;
    const Status s = flush(chunk_submitted);
    return s == Status::busy ? Status::ok : s;  // consumed; it goes at the next call
  }
  // A chunk waiting for a slot goes first (into a slot an earlier call
  // freed), then the oldest result is collected: its logits are copied out,
  // so no later submission can overwrite what the caller reads, and an error
  // never comes together with a result.
  Status poll(ChunkResult* out, bool* ready) override {
    if (!out || !ready) return Status::invalid_argument;
    *ready = false;
    if (const Status e = take_error(); e != Status::ok) return e;
    if (const Status f = flush_if_full(); f != Status::ok) return f;
    StepResult r;
    const Status s = ds_->poll(&r, ready);
    if (s != Status::ok) {
      *ready = false;
      return s;
    }
    if (*ready) to_chunk_result(r, out);
    return Status::ok;
  }
  Status wait(ChunkResult* out) override {
    if (!out) return Status::invalid_argument;
    if (const Status e = take_error(); e != Status::ok) return e;
    if (const Status f = flush_if_full(); f != Status::ok) return f;
    StepResult r;
    const Status s = ds_->wait(&r);
    if (s == Status::ok) to_chunk_result(r, out);
    return s;
  }

  // A failed drain leaves the device session broken (it says so at the next
  // call); the error is also kept for the next call here.
  void reset() override {
    const Status s = ds_->drain();
    if (s != Status::ok) error_ = s;
    ds_->reset(0);
    n_chunk_ = 0;
    full_ = false;
    last_ = ChunkResult();
  }
  Status classify_clip(const float* samples, int64_t n, float* logits) override {
    n_chunk_ = 0;
    full_ = false;
    return ds_->classify_clip(samples, n, logits);
  }
  int64_t memory_bytes() const override {
    return ds_->device_bytes() + ds_->host_bytes() + int64_t(sizeof(float) * (chunk_.size() + logits_.size()));
  }
  const char* last_error() const override { return ds_->last_error(); }
  // Samples are cleaned and non-finite logits contained by the device
  // session, streamed or as a clip (mega.hpp).
  StreamStats stats() const override { return ds_->stats(0); }

 private:
  void take(const float* samples, int64_t n, int64_t* n_consumed) {
    const int64_t cs = int64_t(chunk_.size());
    const int64_t k = std::min(n, cs - n_chunk_);
    std::copy(samples, samples + k, chunk_.begin() + n_chunk_);
    n_chunk_ += k;
    *n_consumed = k;
    if (n_chunk_ == cs) {
      full_ = true;
      n_chunk_ = 0;
    }
  }
  Status flush(bool* sent) {
    const Status s = ds_->submit(chunk_.data());
    if (s == Status::ok) {
      full_ = false;
      *sent = true;
    }
    return s;
  }
  // A chunk that submit() could not start (busy) goes now if there is room;
  // still busy is no error for a caller collecting results.
  Status flush_if_full() {
    bool sent = false;
    const Status f = full_ ? flush(&sent) : Status::ok;
    return f == Status::busy ? Status::ok : f;
  }
  void to_chunk_result(const StepResult& r, ChunkResult* out) {
    const HParams& hp = model().hparams();
    out->chunk_index = r.chunk_index[0];
    out->end_sample = (r.chunk_index[0] + 1) * hp.chunk_samples();
    out->n_chunks_pooled = int32_t(std::min<int64_t>(r.chunk_index[0] + 1, hp.window_chunks));
    std::copy(r.logits, r.logits + logits_.size(), logits_.begin());
    out->logits = logits_.data();
  }
  Status take_error() {
    const Status e = error_;
    error_ = Status::ok;
    return e;
  }

  std::unique_ptr<DeviceSession> ds_;
  std::vector<float> chunk_;
  int64_t n_chunk_ = 0;
  bool full_ = false;  // chunk_ holds a whole chunk not yet submitted
  std::vector<float> logits_;  // the last collected result's logits
  ChunkResult last_;
  Status error_ = Status::ok;  // from reset(), reported by the next call
};

class CudaBatchEngine final : public BatchEngine {
 public:
  explicit CudaBatchEngine(std::unique_ptr<DeviceSession> ds) : ds_(std::move(ds)) {}

  const char* backend() const override { return "cuda"; }
  const Model& model() const override { return ds_->model(); }
  int32_t n_streams() const override { return ds_->n_streams(); }
  Status submit(const float* samples) override { return ds_->submit(samples); }
  Status poll(BatchResult* out, bool* ready) override {
    if (!out || !ready) return Status::invalid_argument;
    StepResult r;
    const Status s = ds_->poll(&r, ready);
    if (s == Status::ok && *ready) fill(r, out);
    return s;
  }
  Status wait(BatchResult* out) override {
    if (!out) return Status::invalid_argument;
    StepResult r;
    const Status s = ds_->wait(&r);
    if (s == Status::ok) fill(r, out);
    return s;
  }
  Status reset(int32_t b) override { return ds_->reset(b); }
  StreamStats stats(int32_t b) const override { return ds_->stats(b); }
  int64_t memory_bytes() const override { return ds_->device_bytes() + ds_->host_bytes(); }
  const char* last_error() const override { return ds_->last_error(); }

 private:
  void fill(const StepResult& r, BatchResult* out) const {
    out->step = r.step;
    out->n_streams = ds_->n_streams();
    out->n_classes = model().hparams().n_classes;
    out->chunk_index = r.chunk_index;
    out->logits = r.logits;
  }
  std::unique_ptr<DeviceSession> ds_;
};

}  // namespace

std::unique_ptr<Engine> create_cuda_engine(std::shared_ptr<const Model> model, const EngineOptions& opts,
                                           std::string* error, Status* status) {
  auto ds = DeviceSession::create(std::move(model), device_options(opts, 1), error, status);
  if (!ds) return nullptr;
  std::unique_ptr<Engine> e(new (std::nothrow) CudaEngine(std::move(ds)));
  if (!e && status) *status = Status::out_of_memory;
  return e;
}

std::unique_ptr<BatchEngine> create_cuda_batch_engine(std::shared_ptr<const Model> model, int32_t n_streams,
                                                      const EngineOptions& opts, std::string* error,
                                                      Status* status) {
  auto ds = DeviceSession::create(std::move(model), device_options(opts, n_streams), error, status);
  if (!ds) return nullptr;
  std::unique_ptr<BatchEngine> e(new (std::nothrow) CudaBatchEngine(std::move(ds)));
  if (!e && status) *status = Status::out_of_memory;
  return e;
}

bool cuda_available(std::string* why) { return cuda_device_present(why); }

}  // namespace mega::gpu
