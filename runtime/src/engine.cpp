// The backend-neutral engines (mega/engine.hpp): the CPU ones over
// mega::Session, and the factory, which reaches other backends through the
// registry (backend_registry.h). The core includes no backend's header.
#include "mega/engine.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

#include "backend_registry.h"

namespace mega {

namespace {

template <typename T>
std::unique_ptr<T> fail(std::string* error, Status* status, Status s, const std::string& msg) {
  if (error) *error = msg;
  if (status) *status = s;
  return nullptr;
}

Status check_options(const EngineOptions& o, std::string* error) {
  if (o.max_in_flight < 1 || o.max_in_flight > 16) {
    if (error) *error = "max_in_flight must be in [1, 16]";
    return Status::invalid_argument;
  }
  if (o.max_clip_samples < 0) {
    if (error) *error = "max_clip_samples must be >= 0";
    return Status::invalid_argument;
  }
  return Status::ok;
}

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

class CpuEngine final : public Engine {
 public:
  static std::unique_ptr<Engine> create(std::shared_ptr<const Model> model, const EngineOptions& o,
                                        std::string* error, Status* status) {
    const Status s = check_options(o, error);
    if (s != Status::ok) return fail<Engine>(error, status, s, error ? *error : "");
    SessionOptions so;
    so.kernels = o.kernels;
    so.max_clip_samples = o.max_clip_samples;
    so.n_threads = o.n_threads;
    auto session = Session::create(model, so, error, status);
    if (!session) return nullptr;
    std::unique_ptr<CpuEngine> e(new (std::nothrow) CpuEngine());
    if (!e) return fail<Engine>(error, status, Status::out_of_memory, "out of memory");
    e->session_ = std::move(session);
    const int32_t nc = model->hparams().n_classes;
    e->queue_.init(o.max_in_flight, size_t(nc), 0);
    e->results_.assign(size_t(o.max_in_flight), ChunkResult());
    if (status) *status = Status::ok;
    return e;
  }

  const char* backend() const override { return "cpu"; }
  const Model& model() const override { return session_->model(); }
  Status push(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done) override {
    queue_.clear();
    return session_->push(samples, n, n_consumed, chunk_done);
  }
  const ChunkResult& last_result() const override { return session_->last_result(); }

  Status submit(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_submitted) override {
    if (n_consumed) *n_consumed = 0;
    if (chunk_submitted) *chunk_submitted = false;
    if (queue_.full()) return Status::busy;
    const Status s = session_->push(samples, n, n_consumed, chunk_submitted);
    if (s != Status::ok || !*chunk_submitted) return s;
    const ChunkResult& r = session_->last_result();
    float* dst = queue_.next_floats();
    std::copy(r.logits, r.logits + model().hparams().n_classes, dst);
    const int32_t slot = queue_.commit();
    results_[size_t(slot)] = r;
    results_[size_t(slot)].logits = dst;
    return Status::ok;
  }
  Status poll(ChunkResult* out, bool* ready) override {
    if (!out || !ready) return Status::invalid_argument;
    *ready = !queue_.empty();
    if (*ready) {
      *out = results_[size_t(queue_.oldest())];
      queue_.pop();
    }
    return Status::ok;
  }
  Status wait(ChunkResult* out) override {
    bool ready = false;
    const Status s = poll(out, &ready);
    if (s != Status::ok) return s;
    return ready ? Status::ok : Status::invalid_argument;
  }

  void reset() override {
    queue_.clear();
    session_->reset();
  }
  Status classify_clip(const float* samples, int64_t n, float* logits) override {
    queue_.clear();
    return session_->classify_clip(samples, n, logits);
  }
  int64_t padded_clip_samples(int64_t n) const override { return session_->padded_clip_samples(n); }
  SessionStats stats() const override { return session_->stats(); }
  int64_t memory_bytes() const override { return session_->memory_bytes() + int64_t(queue_.bytes()); }
  const char* last_error() const override { return ""; }

 private:
  CpuEngine() = default;
  std::unique_ptr<Session> session_;
  ResultQueue queue_;
  std::vector<ChunkResult> results_;
};

// B sessions stepped one after the other.
class CpuBatchEngine final : public BatchEngine {
 public:
  static std::unique_ptr<BatchEngine> create(std::shared_ptr<const Model> model, int32_t n_streams,
                                             const EngineOptions& o, std::string* error, Status* status) {
    const Status s = check_options(o, error);
    if (s != Status::ok) return fail<BatchEngine>(error, status, s, error ? *error : "");
    std::unique_ptr<CpuBatchEngine> e(new (std::nothrow) CpuBatchEngine());
    if (!e) return fail<BatchEngine>(error, status, Status::out_of_memory, "out of memory");
    SessionOptions so;
    so.kernels = o.kernels;
    for (int32_t b = 0; b < n_streams; ++b) {
      auto session = Session::create(model, so, error, status);
      if (!session) return nullptr;
      e->sessions_.push_back(std::move(session));
    }
    e->model_ = std::move(model);
    e->nc_ = e->model_->hparams().n_classes;
    e->queue_.init(o.max_in_flight, size_t(n_streams) * size_t(e->nc_), size_t(n_streams));
    e->steps_.assign(size_t(o.max_in_flight), 0);
    if (status) *status = Status::ok;
    return e;
  }

  const char* backend() const override { return "cpu"; }
  const Model& model() const override { return *model_; }
  int32_t n_streams() const override { return int32_t(sessions_.size()); }

  Status submit(const float* samples) override {
    if (!samples) return Status::invalid_argument;
    if (queue_.full()) return Status::busy;
    const int64_t cs = model_->hparams().chunk_samples();
    float* logits = queue_.next_floats();
    int64_t* index = queue_.next_indices();
    for (size_t b = 0; b < sessions_.size(); ++b) {
      int64_t used = 0;
      bool done = false;
      const Status s = sessions_[b]->push(samples + int64_t(b) * cs, cs, &used, &done);
      if (s != Status::ok) return s;
      const ChunkResult& r = sessions_[b]->last_result();
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
  Status wait(BatchResult* out) override {
    bool ready = false;
    const Status s = poll(out, &ready);
    if (s != Status::ok) return s;
    return ready ? Status::ok : Status::invalid_argument;
  }
  Status reset(int32_t b) override {
    if (b < -1 || b >= n_streams()) return Status::invalid_argument;
    for (int32_t i = 0; i < n_streams(); ++i) {
      if (b == -1 || b == i) sessions_[size_t(i)]->reset();
    }
    return Status::ok;
  }
  SessionStats stats(int32_t b) const override {
    return b >= 0 && b < n_streams() ? sessions_[size_t(b)]->stats() : SessionStats();
  }
  int64_t memory_bytes() const override {
    int64_t total = int64_t(queue_.bytes());
    for (const auto& s : sessions_) total += s->memory_bytes();
    return total;
  }
  const char* last_error() const override { return ""; }

 private:
  CpuBatchEngine() = default;
  std::shared_ptr<const Model> model_;
  std::vector<std::unique_ptr<Session>> sessions_;
  int32_t nc_ = 0;
  ResultQueue queue_;
  std::vector<int64_t> steps_;
  int64_t step_ = 0;
};

}  // namespace

Status Engine::self_test(float* max_abs_diff) {
  const Model& m = model();
  if (max_abs_diff) *max_abs_diff = 0.0f;
  if (m.self_test_input().empty()) return Status::invalid_argument;
  std::vector<float> out(size_t(m.hparams().n_classes));
  const Status s = classify_clip(m.self_test_input().data(), int64_t(m.self_test_input().size()), out.data());
  return s == Status::ok ? m.check_self_test(out.data(), max_abs_diff) : s;
}

namespace {

// The backend of that name if it can make engines here.
const BackendInterface* usable_backend(const std::string& name, std::string* why) {
  const BackendInterface* b = find_backend(name, why);
  return b && b->available(why) ? b : nullptr;
}

std::unique_ptr<Engine> make_engine(const std::string& backend, std::shared_ptr<const Model> model,
                                    const EngineOptions& opts, std::string* error, Status* status) {
  if (!model) return fail<Engine>(error, status, Status::invalid_argument, "no model");
  const Status s = check_options(opts, error);
  if (s != Status::ok) return fail<Engine>(error, status, s, error ? *error : "");
  if (backend == "cpu") return CpuEngine::create(std::move(model), opts, error, status);
  std::string why;
  const BackendInterface* b = find_backend(backend, &why);
  if (!b) return fail<Engine>(error, status, backend == "cuda" ? Status::no_device : Status::invalid_argument, why);
  return b->create_engine(std::move(model), opts, error, status);
}

std::unique_ptr<BatchEngine> make_batch_engine(const std::string& backend, std::shared_ptr<const Model> model,
                                               int32_t n_streams, const EngineOptions& opts, std::string* error,
                                               Status* status) {
  if (!model) return fail<BatchEngine>(error, status, Status::invalid_argument, "no model");
  if (n_streams < 1 || n_streams > (1 << 20)) {
    return fail<BatchEngine>(error, status, Status::invalid_argument, "n_streams must be in [1, 2^20]");
  }
  if (!model->streamable()) {
    return fail<BatchEngine>(error, status, Status::not_streamable,
                             "batched streams need a streaming (unidirectional) model");
  }
  const Status s = check_options(opts, error);
  if (s != Status::ok) return fail<BatchEngine>(error, status, s, error ? *error : "");
  if (backend == "cpu") return CpuBatchEngine::create(std::move(model), n_streams, opts, error, status);
  std::string why;
  const BackendInterface* b = find_backend(backend, &why);
  if (!b) {
    return fail<BatchEngine>(error, status, backend == "cuda" ? Status::no_device : Status::invalid_argument, why);
  }
  return b->create_batch_engine(std::move(model), n_streams, opts, error, status);
}

}  // namespace

// The factories' containers may throw bad_alloc; nothing escapes the API.
std::unique_ptr<Engine> create_engine(const std::string& backend, std::shared_ptr<const Model> model,
                                      const EngineOptions& opts, std::string* error, Status* status) {
  try {
    return make_engine(backend, std::move(model), opts, error, status);
  } catch (const std::bad_alloc&) {
    return fail<Engine>(error, status, Status::out_of_memory, "out of memory");
  }
}

std::unique_ptr<BatchEngine> create_batch_engine(const std::string& backend, std::shared_ptr<const Model> model,
                                                 int32_t n_streams, const EngineOptions& opts, std::string* error,
                                                 Status* status) {
  try {
    return make_batch_engine(backend, std::move(model), n_streams, opts, error, status);
  } catch (const std::bad_alloc&) {
    return fail<BatchEngine>(error, status, Status::out_of_memory, "out of memory");
  }
}

bool backend_available(const std::string& backend, std::string* why) {
  if (backend == "cpu") {
    if (why) *why = "cpu";
    return true;
  }
  std::string reason;
  const bool ok = usable_backend(backend, &reason) != nullptr;
  if (why) *why = reason;
  return ok;
}

const char* default_backend() { return backend_available("cuda") ? "cuda" : "cpu"; }

}  // namespace mega
