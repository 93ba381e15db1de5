// SPDX-License-Identifier: Apache-2.0
// The core's stream (stream.h). Streams is B streams over a backend's step
// (step_ops.h): their framing (Stager), the slots in flight in order, the
// recovery from non-finite logits, the hygiene counts, clips. StreamEngine is
// one stream (mega::Engine) on it, BatchStreams B of them (mega::BatchEngine).
// Host memory is allocated at creation; a step allocates nothing.
//
// Unidirectional models run chunk by chunk: a chunk's attention only needs its
// own C tokens, and the EMA carries its state (h and the last K inputs) across
// chunks, so streaming and whole clips share one code path. Bidirectional
// models need the whole clip per layer for the backward EMA: one span, sized
// by EngineOptions::max_clip_samples.
#include "stream.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <vector>

#include "backend.h"

namespace mega {

void Stager::init(const ModelInfo& info, int64_t ctx, int64_t chunk_samples, int32_t n_streams, float* tails,
                  int64_t* next) {
  info_ = &info;
  ctx_ = ctx;
  cs_ = chunk_samples;
  n_streams_ = n_streams;
  tails_ = tails;
  next_ = next;
  for (int32_t b = 0; b < n_streams; ++b) reset(b);
}

int64_t Stager::stride() const { return ctx_ + cs_; }
int64_t Stager::context() const { return ctx_; }
float Stager::clean(float raw, StreamStats* stats) const { return scale_input(*info_, clean_sample(raw, stats)); }

void Stager::reset(int32_t b) {
  clear_context(b);
  next_[b] = 0;
}

void Stager::clear_context(int32_t b) {
  std::fill(tails_ + int64_t(b) * ctx_, tails_ + int64_t(b + 1) * ctx_, 0.0f);
}

void Stager::close(int32_t b, float* block, int64_t* index) {
  float* tail = tails_ + int64_t(b) * ctx_;
  std::copy(tail, tail + ctx_, block);
  std::copy(block + cs_, block + cs_ + ctx_, tail);
  *index = next_[b]++;
}

void Stager::stage(const float* samples, float* dst, int64_t* index, StreamStats* stats) {
  for (int32_t b = 0; b < n_streams_; ++b) {
    float* block = dst + int64_t(b) * stride();
    const float* in = samples + int64_t(b) * cs_;
    for (int64_t i = 0; i < cs_; ++i) block[ctx_ + i] = clean(in[i], &stats[b]);
    close(b, block, index + b);
  }
}

void Stager::stage_clip(const float* samples, int64_t n, int64_t total, float* dst, StreamStats* stats) const {
  std::fill(dst, dst + ctx_, 0.0f);
  for (int64_t j = 0; j < total; ++j) {
    dst[ctx_ + j] = scale_input(*info_, j < n ? clean_sample(samples[j], stats) : 0.0f);
  }
}

namespace {

bool all_finite(const float* v, int32_t n) {
  return std::all_of(v, v + n, [](float y) { return std::isfinite(y); });
}

class Streams {
 public:
  void init(std::shared_ptr<const Model> model, int32_t n_streams, std::unique_ptr<StepOps> step) {
    model_ = std::move(model);
    hp_ = model_->hparams();
    step_ = std::move(step);
    n_streams_ = n_streams;
    nc_ = hp_.n_classes;
    bidir_ = hp_.ema_direction == EmaDirection::bidirectional;
    const int64_t ctx = hp_.patch_kernel - hp_.patch_stride;
    tails_.assign(size_t(int64_t(n_streams) * ctx), 0.0f);
    next_.assign(size_t(n_streams), 0);
    stats_.assign(size_t(n_streams), StreamStats());
    step_of_.assign(size_t(step_->n_slots()), 0);
    checked_.assign(size_t(step_->n_slots()), 0);
    stager_.init(model_->info(), ctx, hp_.chunk_samples(), n_streams, tails_.data(), next_.data());
  }

  const Model& model() const { return *model_; }
  const HParams& hparams() const { return hp_; }
  bool bidir() const { return bidir_; }
  int32_t n_streams() const { return n_streams_; }
  Stager& stager() { return stager_; }
  StreamStats* stats() { return stats_.data(); }
  StreamStats stats(int32_t b) const { return b >= 0 && b < n_streams_ ? stats_[size_t(b)] : StreamStats(); }
  int64_t memory_bytes() const {
    return step_->memory_bytes() + int64_t(sizeof(float) * tails_.size() + sizeof(StreamStats) * stats_.size() +
                                           sizeof(int64_t) * (next_.size() + step_of_.size()) + checked_.size());
  }
  const char* last_error() const { return step_->last_error(); }

  bool full() const { return queued_ == step_->n_slots(); }
  // The slot the next step goes to (free unless full()).
  StepSlot head() { return step_->slot(head_); }

  // Launches the head slot, its streams' chunks closed (Stager). A step
  // the backend has already finished is checked at once, so a host backend
  // recovers before the next chunk as a stream computed in place would.
  Status launch() {
    const int32_t r = head_;
    checked_[size_t(r)] = 0;
    MEGA_TRY(step_->launch(r));
    step_of_[size_t(r)] = steps_++;
    head_ = (head_ + 1) % step_->n_slots();
    ++queued_;
    bool done = false;
    MEGA_TRY(step_->ready(r, &done));
    if (done) MEGA_TRY(contain(r));
    return Status::ok;
  }

  // The oldest step, if done (*slot: its slot, then freed).
  Status poll(int32_t* slot, bool* ready) {
    *ready = false;
    if (queued_ == 0) return Status::ok;
    const int32_t r = oldest();
    MEGA_TRY(step_->ready(r, ready));
    if (!*ready) return Status::ok;
    return collect(r, slot);
  }
  // The same, waiting; invalid_argument if nothing is queued.
  Status wait(int32_t* slot) {
    if (queued_ == 0) return Status::invalid_argument;
    const int32_t r = oldest();
    MEGA_TRY(step_->finish(r));
    return collect(r, slot);
  }
  // Waits for every queued step and drops its results.
  Status drain() {
    int32_t r = 0;
    while (queued_ > 0) MEGA_TRY(wait(&r));
    return Status::ok;
  }

  int64_t step_of(int32_t r) const { return step_of_[size_t(r)]; }
  StepSlot slot(int32_t r) { return step_->slot(r); }

  // Offline logits of a clip on stream 0 (one-stream sets), which starts
  // afresh before and after.
  Status classify(const float* samples, int64_t n, float* logits, float* trace);

 private:
  int32_t oldest() const { return (head_ - queued_ + step_->n_slots()) % step_->n_slots(); }
  Status collect(int32_t r, int32_t* slot) {
    MEGA_TRY(contain(r));
    --queued_;
    *slot = r;
    return Status::ok;
  }
  // A done step's non-finite logits: zeroed, counted, and that stream's state
  // (patch context, recurrent state, window) cleared as if it restarted from
  // silence; its position goes on. Once per step; a clip's chunks are not
  // checked (only its final logits are).
  Status contain(int32_t r) {
    if (checked_[size_t(r)] || in_clip_) return Status::ok;
    checked_[size_t(r)] = 1;
    float* logits = step_->slot(r).logits;
    for (int32_t b = 0; b < n_streams_; ++b) {
      float* row = logits + int64_t(b) * nc_;
      if (all_finite(row, nc_)) continue;
      std::fill(row, row + nc_, 0.0f);
      ++stats_[size_t(b)].n_state_resets;
      stager_.clear_context(b);
      MEGA_TRY(step_->clear_state(b));
    }
    return Status::ok;
  }
  Status stream_clip(const float* samples, int64_t n, int64_t total, float* logits);
  Status span_clip(const float* samples, int64_t n, int64_t total, float* logits);

  std::shared_ptr<const Model> model_;
  HParams hp_;
  std::unique_ptr<StepOps> step_;
  int32_t n_streams_ = 0, nc_ = 0;
  bool bidir_ = false;
  Stager stager_;
  std::vector<float> tails_;
  std::vector<int64_t> next_;
  std::vector<StreamStats> stats_;
  std::vector<int64_t> step_of_;  // per slot: the step it holds
  std::vector<uint8_t> checked_;  // per slot: its logits contained
  int32_t head_ = 0, queued_ = 0;
  int64_t steps_ = 0;
  bool in_clip_ = false;
};

Status Streams::classify(const float* samples, int64_t n, float* logits, float* trace) {
  if (n < 0 || (n > 0 && !samples) || !logits) return Status::invalid_argument;
  if (n_streams_ != 1) return Status::invalid_argument;
  MEGA_TRY(drain());
  const int64_t total = hp_.padded_clip_samples(n);
  step_->set_trace(trace, total / hp_.patch_stride);
  const Status s = bidir_ ? span_clip(samples, n, total, logits) : stream_clip(samples, n, total, logits);
  step_->set_trace(nullptr, 0);
  stager_.reset(0);
  if (s != Status::ok) return s;
  if (!all_finite(logits, nc_)) {  // zeroed and counted; the stream starts afresh anyway
    std::fill(logits, logits + nc_, 0.0f);
    ++stats_[0].n_state_resets;
  }
  return Status::ok;
}

// A unidirectional clip is a stream from a fresh start, pooled over all of it.
Status Streams::stream_clip(const float* samples, int64_t n, int64_t total, float* logits) {
  const int64_t cs = hp_.chunk_samples(), ctx = stager_.context();
  stager_.reset(0);
  in_clip_ = true;
  Status s = Status::ok;
  for (int64_t c0 = 0; c0 < total && s == Status::ok; c0 += cs) {
    int32_t r = 0;
    if (full()) s = wait(&r);
    if (s != Status::ok) break;
    const StepSlot slot = head();
    for (int64_t i = 0; i < cs; ++i) {
      slot.samples[ctx + i] = stager_.clean(c0 + i < n ? samples[c0 + i] : 0.0f, &stats_[0]);
    }
    stager_.close(0, slot.samples, slot.index);
    s = launch();
  }
  const int32_t last = (head_ - 1 + step_->n_slots()) % step_->n_slots();
  if (s == Status::ok) s = drain();
  in_clip_ = false;
  return s == Status::ok ? step_->clip_head(last, logits) : s;
}

// A bidirectional clip: one span over all of it.
Status Streams::span_clip(const float* samples, int64_t n, int64_t total, float* logits) {
  const int64_t n_tok = total / hp_.patch_stride;
  if (n_tok > step_->clip_tokens()) return Status::too_long;
  stager_.stage_clip(samples, n, total, step_->clip_samples(), &stats_[0]);
  return step_->classify_span(n_tok, logits);
}

// One stream: samples go straight into the next slot's block, cleaned and
// scaled as they come; a full chunk becomes a step.
class StreamEngine final : public Engine {
 public:
  StreamEngine(const char* backend, std::shared_ptr<const Model> model, std::unique_ptr<StepOps> step)
      : backend_(backend) {
    set_.init(std::move(model), 1, std::move(step));
    logits_.assign(size_t(set_.hparams().n_classes), 0.0f);
  }

  const char* backend() const override { return backend_; }
  const Model& model() const override { return set_.model(); }

  Status push(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done) override {
    if (n_consumed) *n_consumed = 0;
    if (chunk_done) *chunk_done = false;
    if (set_.bidir()) return Status::not_streamable;
    if (n < 0 || (n > 0 && !samples) || !n_consumed || !chunk_done) return Status::invalid_argument;
    MEGA_TRY(take_error());
    MEGA_TRY(set_.drain());  // the synchronous contract: nothing of submit() is kept
    bool full = false;
    MEGA_TRY(take(samples, n, n_consumed, &full));
    if (!full) return Status::ok;
    int32_t r = 0;
    MEGA_TRY(set_.wait(&r));
    to_result(r, &last_);
    *chunk_done = true;
    return Status::ok;
  }
  const ChunkResult& last_result() const override { return last_; }

  Status submit(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_submitted) override {
    if (n_consumed) *n_consumed = 0;
    if (chunk_submitted) *chunk_submitted = false;
    if (set_.bidir()) return Status::not_streamable;
    if (n < 0 || (n > 0 && !samples) || !n_consumed || !chunk_submitted) return Status::invalid_argument;
    MEGA_TRY(take_error());
    if (set_.full()) return Status::busy;
    return take(samples, n, n_consumed, chunk_submitted);
  }
  // The oldest result's logits are copied out, so no later submission can
  // overwrite what the caller reads.
  Status poll(ChunkResult* out, bool* ready) override {
    if (!out || !ready) return Status::invalid_argument;
    *ready = false;
    MEGA_TRY(take_error());
    int32_t r = 0;
    MEGA_TRY(set_.poll(&r, ready));
    if (*ready) to_result(r, out);
    return Status::ok;
  }
  Status wait(ChunkResult* out) override {
    if (!out) return Status::invalid_argument;
    MEGA_TRY(take_error());
    int32_t r = 0;
    MEGA_TRY(set_.wait(&r));
    to_result(r, out);
    return Status::ok;
  }

  // A failed drain (a device error) is reported by the next call.
  void reset() override {
    const Status s = set_.drain();
    if (s != Status::ok) error_ = s;
    set_.stager().reset(0);
    n_pending_ = 0;
    last_ = ChunkResult();
  }
  Status classify_clip(const float* samples, int64_t n, float* logits) override {
    return classify(samples, n, logits, nullptr);
  }
  Status classify(const float* samples, int64_t n, float* logits, float* trace) {
    n_pending_ = 0;
    MEGA_TRY(take_error());
    return set_.classify(samples, n, logits, trace);
  }

  StreamStats stats() const override { return set_.stats(0); }
  int64_t memory_bytes() const override {
    return set_.memory_bytes() + int64_t(sizeof(float) * logits_.size()) + int64_t(sizeof(*this));
  }
  const char* last_error() const override { return set_.last_error(); }

 private:
  // Up to the end of the chunk into the head slot; a whole chunk is launched.
  Status take(const float* samples, int64_t n, int64_t* n_consumed, bool* launched) {
    const int64_t cs = set_.hparams().chunk_samples();
    const int64_t k = std::min(n, cs - n_pending_);
    Stager& st = set_.stager();
    const StepSlot slot = set_.head();
    float* dst = slot.samples + st.context() + n_pending_;
    for (int64_t i = 0; i < k; ++i) dst[i] = st.clean(samples[i], set_.stats());
    n_pending_ += k;
    *n_consumed = k;
    if (n_pending_ < cs) return Status::ok;
    n_pending_ = 0;
    st.close(0, slot.samples, slot.index);
    MEGA_TRY(set_.launch());
    *launched = true;
    return Status::ok;
  }
  void to_result(int32_t r, ChunkResult* out) {
    const HParams& hp = set_.hparams();
    const StepSlot slot = set_.slot(r);
    const int64_t index = slot.index[0];
    out->chunk_index = index;
    out->end_sample = (index + 1) * hp.chunk_samples();
    out->n_chunks_pooled = int32_t(std::min<int64_t>(index + 1, hp.window_chunks));
    std::copy(slot.logits, slot.logits + hp.n_classes, logits_.begin());
    out->logits = logits_.data();
  }
  Status take_error() {
    const Status e = error_;
    error_ = Status::ok;
    return e;
  }

  const char* backend_;
  Streams set_;
  int64_t n_pending_ = 0;      // samples of the next chunk in the head slot
  std::vector<float> logits_;  // the last collected result's
  ChunkResult last_;
  Status error_ = Status::ok;  // from reset(), reported by the next call
};

// B streams: one chunk each per step, staged together.
class BatchStreams final : public BatchEngine {
 public:
  BatchStreams(const char* backend, std::shared_ptr<const Model> model, int32_t n_streams,
               std::unique_ptr<StepOps> step)
      : backend_(backend) {
    set_.init(std::move(model), n_streams, std::move(step));
  }

  const char* backend() const override { return backend_; }
  const Model& model() const override { return set_.model(); }
  int32_t n_streams() const override { return set_.n_streams(); }

  Status submit(const float* samples) override {
    if (!samples) return Status::invalid_argument;
    if (set_.bidir()) return Status::not_streamable;
    if (set_.full()) return Status::busy;
    const StepSlot slot = set_.head();
    set_.stager().stage(samples, slot.samples, slot.index, set_.stats());
    return set_.launch();
  }
  Status poll(BatchResult* out, bool* ready) override {
    if (!out || !ready) return Status::invalid_argument;
    int32_t r = 0;
    MEGA_TRY(set_.poll(&r, ready));
    if (*ready) fill(r, out);
    return Status::ok;
  }
  Status wait(BatchResult* out) override {
    if (!out) return Status::invalid_argument;
    int32_t r = 0;
    MEGA_TRY(set_.wait(&r));
    fill(r, out);
    return Status::ok;
  }
  Status reset(int32_t b) override {
    if (b < -1 || b >= n_streams()) return Status::invalid_argument;
    for (int32_t i = 0; i < n_streams(); ++i) {
      if (b == -1 || b == i) set_.stager().reset(i);
    }
    return Status::ok;
  }
  StreamStats stats(int32_t b) const override { return set_.stats(b); }
  int64_t memory_bytes() const override { return set_.memory_bytes() + int64_t(sizeof(*this)); }
  const char* last_error() const override { return set_.last_error(); }

 private:
  void fill(int32_t r, BatchResult* out) {
    const StepSlot slot = set_.slot(r);
    out->step = set_.step_of(r);
    out->n_streams = n_streams();
    out->n_classes = set_.hparams().n_classes;
    out->chunk_index = slot.index;
    out->logits = slot.logits;
  }

  const char* backend_;
  Streams set_;
};

// The longest clip a host step's span must hold: a bidirectional model's
// max_clip_samples (at least one window, whole chunks), in tokens; C otherwise.
bool span_tokens(const HParams& hp, const EngineOptions& o, int64_t* tokens, std::string* error) {
  if (hp.ema_direction != EmaDirection::bidirectional) {
    *tokens = hp.chunk_size;
    return true;
  }
  const int64_t cs = hp.chunk_samples();
  int64_t max_clip = std::max(o.max_clip_samples > 0 ? o.max_clip_samples : hp.window_samples(), hp.window_samples());
  max_clip = (max_clip + cs - 1) / cs * cs;
  if (max_clip > (int64_t(1) << 28)) {
    if (error) *error = "max_clip_samples is too large";
    return false;
  }
  *tokens = max_clip / hp.patch_stride;
  return true;
}

template <typename E>
std::unique_ptr<E> host_step_failed(std::string* error, Status* status) {
  return creation_failed<E>(error, status, Status::out_of_memory,
                            "cannot allocate the engine's buffers or start its threads");
}

}  // namespace

std::unique_ptr<Engine> create_stream(const char* backend, std::shared_ptr<const Model> model,
                                      std::unique_ptr<StepOps> step, std::string* error, Status* status) {
  if (!step) return creation_failed<Engine>(error, status, Status::out_of_memory, "out of memory");
  std::unique_ptr<Engine> e(new (std::nothrow) StreamEngine(backend, std::move(model), std::move(step)));
  if (!e) return creation_failed<Engine>(error, status, Status::out_of_memory, "out of memory");
  if (status) *status = Status::ok;
  return e;
}

std::unique_ptr<BatchEngine> create_batch_streams(const char* backend, std::shared_ptr<const Model> model,
                                                  int32_t n_streams, std::unique_ptr<StepOps> step,
                                                  std::string* error, Status* status) {
  if (!step) return creation_failed<BatchEngine>(error, status, Status::out_of_memory, "out of memory");
  std::unique_ptr<BatchEngine> e(new (std::nothrow)
                                     BatchStreams(backend, std::move(model), n_streams, std::move(step)));
  if (!e) return creation_failed<BatchEngine>(error, status, Status::out_of_memory, "out of memory");
  if (status) *status = Status::ok;
  return e;
}

std::unique_ptr<Engine> create_stream(const char* backend, std::shared_ptr<const Model> model,
                                      const EngineOptions& opts, const MakeStreamOps& make_ops, std::string* error,
                                      Status* status) {
  int64_t tokens = 0;
  if (!span_tokens(model->hparams(), opts, &tokens, error)) {
    return creation_failed<Engine>(error, status, Status::invalid_argument, error ? *error : "");
  }
  auto step = create_host_step(*model, 1, opts.max_in_flight, tokens, make_ops, 0);
  if (!step) return host_step_failed<Engine>(error, status);
  return create_stream(backend, std::move(model), std::move(step), error, status);
}

std::unique_ptr<BatchEngine> create_batch_streams(const char* backend, std::shared_ptr<const Model> model,
                                                  int32_t n_streams, const EngineOptions& opts,
                                                  const MakeStreamOps& make_ops, int64_t shared_bytes,
                                                  std::string* error, Status* status) {
  int64_t tokens = 0;
  if (!span_tokens(model->hparams(), opts, &tokens, error)) {
    return creation_failed<BatchEngine>(error, status, Status::invalid_argument, error ? *error : "");
  }
  auto step = create_host_step(*model, n_streams, opts.max_in_flight, tokens, make_ops, shared_bytes);
  if (!step) return host_step_failed<BatchEngine>(error, status);
  return create_batch_streams(backend, std::move(model), n_streams, std::move(step), error, status);
}

Status classify_clip_traced(Engine& e, const float* samples, int64_t n, float* logits, float* trace) {
  auto* stream = dynamic_cast<StreamEngine*>(&e);
  return stream ? stream->classify(samples, n, logits, trace) : Status::invalid_argument;
}

}  // namespace mega
