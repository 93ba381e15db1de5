// SPDX-License-Identifier: Apache-2.0
// The core's stream (stream.h). A Stream is one stream: its pending samples,
// pooling window, input hygiene and recovery, allocated in one block at
// creation, over a backend's ops (stream_ops.h), which run the model's one
// forward pass (forward_pass.h). BatchStreams steps B of them in turn. What
// they read of a model: the public API and model_weights().
//
// Unidirectional models run chunk by chunk: a chunk's attention only needs its
// own C tokens, and the EMA carries its state (h and the last K inputs) across
// chunks, so streaming and whole clips share one code path. Bidirectional
// models need the whole clip per layer for the backward EMA; their spans are
// sized by EngineOptions::max_clip_samples.
#include "stream.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "arena.h"
#include "backend.h"
#include "denormals.h"
#include "forward_pass.h"

namespace mega {

namespace {

// A fixed ring of results: what submit() produced and poll() has not yet
// collected. Sized at creation.
class ResultQueue {
 public:
  void init(int32_t slots, size_t floats_per_slot, size_t indices_per_slot) {
    slots_ = slots;
    floats_.assign(size_t(slots) * floats_per_slot, 0.0f);
    indices_.assign(size_t(slots) * indices_per_slot, 0);
    per_f_ = floats_per_slot;
    per_i_ = indices_per_slot;
  }
  bool full() const { return count_ == slots_; }
  bool empty() const { return count_ == 0; }
  // The slot the next result goes to; commit() makes it visible.
  float* next_floats() { return floats_.data() + size_t(head_) * per_f_; }
  int64_t* next_indices() { return indices_.data() + size_t(head_) * per_i_; }
  int32_t commit() {
    const int32_t s = head_;
    head_ = (head_ + 1) % slots_;
    ++count_;
    return s;
  }
  int32_t oldest() const { return (head_ - count_ + slots_) % slots_; }
  const float* floats(int32_t s) const { return floats_.data() + size_t(s) * per_f_; }
  const int64_t* indices(int32_t s) const { return indices_.data() + size_t(s) * per_i_; }
  void pop() { --count_; }
  void clear() { count_ = 0; }
  size_t bytes() const { return floats_.size() * sizeof(float) + indices_.size() * sizeof(int64_t); }

 private:
  int32_t slots_ = 1, head_ = 0, count_ = 0;
  size_t per_f_ = 0, per_i_ = 0;
  std::vector<float> floats_;
  std::vector<int64_t> indices_;
};

// wait() of a stream or a batch: their steps are done by submit(), so the
// oldest result is ready or nothing is queued (invalid_argument).
template <typename Streams, typename Result>
Status wait_on(Streams& streams, Result* out) {
  bool ready = false;
  const Status s = streams.poll(out, &ready);
  if (s != Status::ok) return s;
  return ready ? Status::ok : Status::invalid_argument;
}

class Stream final : public Engine {
 public:
  static std::unique_ptr<Stream> create(const char* backend, std::shared_ptr<const Model> model,
                                        const EngineOptions& o, const MakeStreamOps& make_ops, std::string* error,
                                        Status* status);
  ~Stream() override { std::free(block_); }

  const char* backend() const override { return backend_; }
  const Model& model() const override { return *model_; }

  Status push(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done) override {
    queue_.clear();
    return consume(samples, n, n_consumed, chunk_done);
  }
  const ChunkResult& last_result() const override { return result_; }

  Status submit(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_submitted) override;
  Status poll(ChunkResult* out, bool* ready) override {
    if (!out || !ready) return Status::invalid_argument;
    *ready = !queue_.empty();
    if (*ready) {
      *out = results_[size_t(queue_.oldest())];
      queue_.pop();
    }
    return Status::ok;
  }
  Status wait(ChunkResult* out) override { return wait_on(*this, out); }

  void reset() override {
    queue_.clear();
    reset_stream();
  }
  Status classify_clip(const float* samples, int64_t n, float* logits) override {
    return classify(samples, n, logits, nullptr);
  }
  Status classify(const float* samples, int64_t n, float* logits, float* trace);

  StreamStats stats() const override { return stats_; }
  int64_t memory_bytes() const override {
    return int64_t(block_bytes_) + ops_->memory_bytes() + int64_t(queue_.bytes());
  }
  const char* last_error() const override { return ""; }

  // Push without touching the result queue (the batch engine's streams).
  Status consume(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done);

 private:
  Stream() = default;
  void layout(Arena& a);
  void clear_window() { std::fill(pool_, pool_ + int64_t(hp_.window_chunks) * hp_.embed_dim, 0.0); }
  void reset_stream();
  // Input hygiene (mega.hpp, kMaxSampleMagnitude), then the model's scaling.
  float clean(float s) { return scale_input(*info_, clean_sample(s, &stats_)); }
  bool contain_non_finite(float* out);
  void process_pending_chunk();
  void window_logits();

  const char* backend_ = "";
  std::shared_ptr<const Model> model_;
  const ModelInfo* info_ = nullptr;
  const ModelWeights* w_ = nullptr;
  HParams hp_;
  std::unique_ptr<StreamOps> ops_;  // the backend's
  bool bidir_ = false;
  int64_t max_clip_samples_ = 0;

  uint8_t* block_ = nullptr;
  size_t block_bytes_ = 0;
  // streaming input: [k - s context samples | chunk samples], already scaled
  float* pending_ = nullptr;
  int64_t n_pending_ = 0;  // chunk samples received so far
  int64_t context_ = 0;    // k - s
  int64_t samples_seen_ = 0;
  // pooling window: per-chunk sums of final features
  double* pool_ = nullptr;  // (W x D)
  int64_t n_chunks_ = 0;
  float* logits_ = nullptr;
  ChunkResult result_;
  StreamStats stats_;
  float* clip_ = nullptr;  // bidirectional: the scaled clip with its left context
  double* rep_ = nullptr;  // (D) pooled sum

  // submit()/poll(): results not yet collected
  ResultQueue queue_;
  std::vector<ChunkResult> results_;
};

std::unique_ptr<Stream> Stream::create(const char* backend, std::shared_ptr<const Model> model,
                                       const EngineOptions& o, const MakeStreamOps& make_ops, std::string* error,
                                       Status* status) {
  std::unique_ptr<Stream> e(new (std::nothrow) Stream());
  if (!e) return creation_failed<Stream>(error, status, Status::out_of_memory, "out of memory");
  e->backend_ = backend;
  e->info_ = &model->info();
  e->w_ = &model_weights(*model);
  e->hp_ = model->hparams();
  const HParams& hp = e->hp_;
  e->bidir_ = hp.ema_direction == EmaDirection::bidirectional;
  e->context_ = hp.patch_kernel - hp.patch_stride;
  const int64_t cs = hp.chunk_samples();
  int64_t max_clip = o.max_clip_samples > 0 ? o.max_clip_samples : hp.window_samples();
  max_clip = std::max(max_clip, hp.window_samples());
  max_clip = (max_clip + cs - 1) / cs * cs;
  if (max_clip > (int64_t(1) << 28)) {
    return creation_failed<Stream>(error, status, Status::invalid_argument, "max_clip_samples is too large");
  }
  e->max_clip_samples_ = max_clip;
  const int64_t span_tokens = e->bidir_ ? max_clip / hp.patch_stride : hp.chunk_size;
  e->ops_ = make_ops(span_tokens);
  if (!e->ops_) {
    return creation_failed<Stream>(error, status, Status::out_of_memory,
                                      "cannot allocate the engine's buffers or start its threads");
  }

  Arena sizing(nullptr);
  e->layout(sizing);
  e->block_bytes_ = sizing.size();
  void* block = nullptr;
  if (::posix_memalign(&block, 64, e->block_bytes_ ? e->block_bytes_ : 64) != 0) {
    return creation_failed<Stream>(error, status, Status::out_of_memory,
                                   "cannot allocate " + std::to_string(e->block_bytes_) + " bytes");
  }
  e->block_ = static_cast<uint8_t*>(block);
  std::memset(e->block_, 0, e->block_bytes_);
  Arena carve(e->block_);
  e->layout(carve);
  e->queue_.init(o.max_in_flight, size_t(hp.n_classes), 0);
  e->results_.assign(size_t(o.max_in_flight), ChunkResult());
  e->model_ = std::move(model);
  e->reset_stream();
  if (status) *status = Status::ok;
  return e;
}

void Stream::layout(Arena& a) {
  const int64_t D = hp_.embed_dim;
  pending_ = a.take<float>(context_ + hp_.chunk_samples());
  pool_ = a.take<double>(int64_t(hp_.window_chunks) * D);
  logits_ = a.take<float>(hp_.n_classes);
  clip_ = bidir_ ? a.take<float>(context_ + max_clip_samples_) : nullptr;
  rep_ = a.take<double>(D);
}

void Stream::reset_stream() {
  std::fill(pending_, pending_ + context_ + hp_.chunk_samples(), 0.0f);
  ops_->clear_state();
  clear_window();
  n_pending_ = samples_seen_ = n_chunks_ = 0;
  result_ = ChunkResult();
}

// Non-finite logits: zero them and clear the recurrent state (EMA, window),
// as if the stream restarted from silence; counters and positions go on.
bool Stream::contain_non_finite(float* out) {
  const int32_t nc = hp_.n_classes;
  if (std::all_of(out, out + nc, [](float y) { return std::isfinite(y); })) return false;
  std::fill(out, out + nc, 0.0f);
  std::fill(pending_, pending_ + context_, 0.0f);
  ops_->clear_state();
  clear_window();
  ++stats_.n_state_resets;
  return true;
}

// A full chunk of samples sits in pending: run it and put its sum in the window.
void Stream::process_pending_chunk() {
  const int32_t D = hp_.embed_dim;
  Span span;
  span.n_tok = hp_.chunk_size;
  span.samples = pending_;
  span.sample_stride = context_ + hp_.chunk_samples();
  span.chunk_index = &n_chunks_;
  forward(*ops_, hp_, *w_, span);  // the CPU ops do not fail
  const double* sum = ops_->span_sum();
  std::copy(sum, sum + D, pool_ + (n_chunks_ % hp_.window_chunks) * D);
  ++n_chunks_;
  // keep the last k - s samples as the next chunk's left context
  const int64_t cs = hp_.chunk_samples();
  std::memmove(pending_, pending_ + cs, sizeof(float) * size_t(context_));
  n_pending_ = 0;
}

void Stream::window_logits() {
  const int32_t D = hp_.embed_dim;
  const int64_t pooled = std::min<int64_t>(n_chunks_, hp_.window_chunks);
  std::fill(rep_, rep_ + D, 0.0);
  // sum oldest to newest so the order is the same for every block size
  for (int64_t i = n_chunks_ - pooled; i < n_chunks_; ++i) {
    const double* s = pool_ + (i % hp_.window_chunks) * D;
    for (int32_t d = 0; d < D; ++d) rep_[d] += s[d];
  }
  ops_->head(rep_, pooled * hp_.chunk_size, logits_);
  result_.chunk_index = n_chunks_ - 1;
  result_.end_sample = samples_seen_;
  result_.n_chunks_pooled = int32_t(pooled);
  result_.logits = logits_;
}

Status Stream::consume(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done) {
  if (n_consumed) *n_consumed = 0;
  if (chunk_done) *chunk_done = false;
  if (bidir_) return Status::not_streamable;
  if (n < 0 || (n > 0 && !samples) || !n_consumed || !chunk_done) return Status::invalid_argument;
  const int64_t cs = hp_.chunk_samples();
  const int64_t take = std::min(n, cs - n_pending_);
  float* dst = pending_ + context_ + n_pending_;
  for (int64_t i = 0; i < take; ++i) dst[i] = clean(samples[i]);
  n_pending_ += take;
  samples_seen_ += take;
  *n_consumed = take;
  if (n_pending_ == cs) {
    ScopedFlushDenormals ftz;
    process_pending_chunk();
    window_logits();
    contain_non_finite(logits_);
    *chunk_done = true;
  }
  return Status::ok;
}

Status Stream::submit(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_submitted) {
  if (n_consumed) *n_consumed = 0;
  if (chunk_submitted) *chunk_submitted = false;
  if (queue_.full()) return Status::busy;
  const Status s = consume(samples, n, n_consumed, chunk_submitted);
  if (s != Status::ok || !*chunk_submitted) return s;
  float* dst = queue_.next_floats();
  std::copy(result_.logits, result_.logits + hp_.n_classes, dst);
  const int32_t slot = queue_.commit();
  results_[size_t(slot)] = result_;
  results_[size_t(slot)].logits = dst;
  return Status::ok;
}

Status Stream::classify(const float* samples, int64_t n, float* logits, float* trace) {
  if (n < 0 || (n > 0 && !samples) || !logits) return Status::invalid_argument;
  queue_.clear();
  const int64_t total = hp_.padded_clip_samples(n);
  if (bidir_ && total > max_clip_samples_) return Status::too_long;
  const int32_t D = hp_.embed_dim;
  const int64_t cs = hp_.chunk_samples();
  const int64_t n_tok = total / hp_.patch_stride;
  auto sample = [&](int64_t j) { return clean(j < n ? samples[j] : 0.0f); };
  ScopedFlushDenormals ftz;
  reset_stream();
  double* sum = rep_;
  std::fill(sum, sum + D, 0.0);
  if (!bidir_) {
    // chunk by chunk through the streaming path, pooled over the whole clip
    for (int64_t c0 = 0; c0 < total; c0 += cs) {
      for (int64_t i = 0; i < cs; ++i) pending_[context_ + i] = sample(c0 + i);
      ops_->set_trace(trace, n_tok, n_chunks_ * hp_.chunk_size);
      process_pending_chunk();
      const double* slot = pool_ + ((n_chunks_ - 1) % hp_.window_chunks) * D;
      for (int32_t d = 0; d < D; ++d) sum[d] += slot[d];
    }
  } else {
    // whole clip per layer (the backward EMA looks ahead)
    std::fill(clip_, clip_ + context_, 0.0f);
    for (int64_t j = 0; j < total; ++j) clip_[context_ + j] = sample(j);
    Span span;
    span.n_tok = n_tok;
    span.streaming = false;
    span.samples = clip_;
    span.sample_stride = context_ + total;
    ops_->set_trace(trace, n_tok, 0);
    forward(*ops_, hp_, *w_, span);
    const double* clip_sum = ops_->span_sum();
    std::copy(clip_sum, clip_sum + D, sum);
  }
  ops_->set_trace(nullptr, 0, 0);
  ops_->head(sum, n_tok, logits);
  contain_non_finite(logits);
  reset_stream();
  return Status::ok;
}

// B streams stepped one after the other.
class BatchStreams final : public BatchEngine {
 public:
  static std::unique_ptr<BatchEngine> create(const char* backend, std::shared_ptr<const Model> model,
                                             int32_t n_streams, const EngineOptions& o, const MakeStreamOps& make_ops,
                                             int64_t shared_bytes, std::string* error, Status* status) {
    std::unique_ptr<BatchStreams> e(new (std::nothrow) BatchStreams());
    if (!e) return creation_failed<BatchEngine>(error, status, Status::out_of_memory, "out of memory");
    e->backend_ = backend;
    e->memory_ = shared_bytes;
    EngineOptions one = o;
    one.max_in_flight = 1;  // the streams' own queues go unused
    for (int32_t b = 0; b < n_streams; ++b) {
      auto stream = Stream::create(backend, model, one, make_ops, error, status);
      if (!stream) return nullptr;
      e->memory_ += stream->memory_bytes();
      e->streams_.push_back(std::move(stream));
    }
    e->model_ = std::move(model);
    e->nc_ = e->model_->hparams().n_classes;
    e->queue_.init(o.max_in_flight, size_t(n_streams) * size_t(e->nc_), size_t(n_streams));
    e->steps_.assign(size_t(o.max_in_flight), 0);
    if (status) *status = Status::ok;
    return e;
  }

  const char* backend() const override { return backend_; }
  const Model& model() const override { return *model_; }
  int32_t n_streams() const override { return int32_t(streams_.size()); }

  Status submit(const float* samples) override {
    if (!samples) return Status::invalid_argument;
    if (queue_.full()) return Status::busy;
    const int64_t cs = model_->hparams().chunk_samples();
    float* logits = queue_.next_floats();
    int64_t* index = queue_.next_indices();
    for (size_t b = 0; b < streams_.size(); ++b) {
      int64_t used = 0;
      bool done = false;
      const Status s = streams_[b]->consume(samples + int64_t(b) * cs, cs, &used, &done);
      if (s != Status::ok) return s;
      const ChunkResult& r = streams_[b]->last_result();
      std::copy(r.logits, r.logits + nc_, logits + int64_t(b) * nc_);
      index[b] = r.chunk_index;
    }
    steps_[size_t(queue_.commit())] = step_++;
    return Status::ok;
  }
  Status poll(BatchResult* out, bool* ready) override {
    if (!out || !ready) return Status::invalid_argument;
    *ready = !queue_.empty();
    if (!*ready) return Status::ok;
    const int32_t s = queue_.oldest();
    out->step = steps_[size_t(s)];
    out->n_streams = n_streams();
    out->n_classes = nc_;
    out->chunk_index = queue_.indices(s);
    out->logits = queue_.floats(s);
    queue_.pop();
    return Status::ok;
  }
  Status wait(BatchResult* out) override { return wait_on(*this, out); }
  Status reset(int32_t b) override {
    if (b < -1 || b >= n_streams()) return Status::invalid_argument;
    for (int32_t i = 0; i < n_streams(); ++i) {
      if (b == -1 || b == i) streams_[size_t(i)]->reset();
    }
    return Status::ok;
  }
  StreamStats stats(int32_t b) const override {
    return b >= 0 && b < n_streams() ? streams_[size_t(b)]->stats() : StreamStats();
  }
  int64_t memory_bytes() const override { return memory_ + int64_t(queue_.bytes()); }
  const char* last_error() const override { return ""; }

 private:
  BatchStreams() = default;
  const char* backend_ = "";
  std::shared_ptr<const Model> model_;
  std::vector<std::unique_ptr<Stream>> streams_;
  int64_t memory_ = 0;
  int32_t nc_ = 0;
  ResultQueue queue_;
  std::vector<int64_t> steps_;
  int64_t step_ = 0;
};

}  // namespace

std::unique_ptr<Engine> create_stream(const char* backend, std::shared_ptr<const Model> model,
                                      const EngineOptions& opts, const MakeStreamOps& make_ops, std::string* error,
                                      Status* status) {
  return Stream::create(backend, std::move(model), opts, make_ops, error, status);
}

std::unique_ptr<BatchEngine> create_batch_streams(const char* backend, std::shared_ptr<const Model> model,
                                                  int32_t n_streams, const EngineOptions& opts,
                                                  const MakeStreamOps& make_ops, int64_t shared_bytes,
                                                  std::string* error, Status* status) {
  return BatchStreams::create(backend, std::move(model), n_streams, opts, make_ops, shared_bytes, error, status);
}

Status classify_clip_traced(Engine& e, const float* samples, int64_t n, float* logits, float* trace) {
  auto* stream = dynamic_cast<Stream*>(&e);
  return stream ? stream->classify(samples, n, logits, trace) : Status::invalid_argument;
}

}  // namespace mega
