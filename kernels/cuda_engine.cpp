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
      : ds_(std::move(ds)), chunk_(size_t(ds_->model().hparams().chunk_samples()), 0.0f) {}

  const char* backend() const override { return "cuda"; }
  const Model& model() const override { return ds_->model(); }

  Status push(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done) override {
    if (n_consumed) *n_consumed = 0;
    if (chunk_done) *chunk_done = false;
    if (!model().streamable()) return Status::not_streamable;
    if (n < 0 || (n > 0 && !samples) || !n_consumed || !chunk_done) return Status::invalid_argument;
    Status s = ds_->drain();  // the synchronous contract: nothing of submit() is kept
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
    if (full_) {  // a chunk from an earlier call still waits for a free slot
      const Status s = flush(chunk_submitted);
      if (s != Status::ok) return s;
    }
    take(samples, n, n_consumed);
    if (!full_) return Status::ok;
    const Status s = flush(chunk_submitted);
    return s == Status::busy ? Status::ok : s;  // consumed; it goes at the next call
  }
  Status poll(ChunkResult* out, bool* ready) override {
    if (!out || !ready) return Status::invalid_argument;
    StepResult r;
    Status s = ds_->poll(&r, ready);
    if (s != Status::ok) return s;
    if (*ready) to_chunk_result(r, out);
    bool sent = false;
    if (full_ && *ready) s = flush(&sent);  // the slot just freed takes the waiting chunk
    return s == Status::busy ? Status::ok : s;
  }
  Status wait(ChunkResult* out) override {
    if (!out) return Status::invalid_argument;
    bool sent = false;
    if (full_ && ds_->queued() == 0) {
      const Status s = flush(&sent);
      if (s != Status::ok) return s;
    }
    StepResult r;
    const Status s = ds_->wait(&r);
    if (s == Status::ok) to_chunk_result(r, out);
    return s;
  }

  void reset() override {
    ds_->drain();
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
  int64_t padded_clip_samples(int64_t n) const override {
    return mega::gpu::padded_clip_samples(model().hparams(), n);
  }
  int64_t memory_bytes() const override {
    return ds_->device_bytes() + ds_->host_bytes() + int64_t(sizeof(float) * chunk_.size());
  }
  const char* last_error() const override { return ds_->last_error(); }
  // Streamed samples are cleaned here (mega.hpp); the clip path and non-finite
  // logits are not checked on the GPU yet.
  SessionStats stats() const override { return stats_; }

 private:
  void take(const float* samples, int64_t n, int64_t* n_consumed) {
    const int64_t cs = int64_t(chunk_.size());
    const int64_t k = std::min(n, cs - n_chunk_);
    for (int64_t i = 0; i < k; ++i) chunk_[size_t(n_chunk_ + i)] = clean_sample(samples[i], &stats_);
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
  void to_chunk_result(const StepResult& r, ChunkResult* out) const {
    const HParams& hp = model().hparams();
    out->chunk_index = r.chunk_index[0];
    out->end_sample = (r.chunk_index[0] + 1) * hp.chunk_samples();
    out->n_chunks_pooled = int32_t(std::min<int64_t>(r.chunk_index[0] + 1, hp.window_chunks));
    out->logits = r.logits;
  }

  std::unique_ptr<DeviceSession> ds_;
  std::vector<float> chunk_;
  int64_t n_chunk_ = 0;
  bool full_ = false;  // chunk_ holds a whole chunk not yet submitted
  ChunkResult last_;
  SessionStats stats_;
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
