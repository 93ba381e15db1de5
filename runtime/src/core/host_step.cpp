// SPDX-License-Identifier: Apache-2.0
// The host step (stream.h, create_host_step): a backend's batched step made
// from its per-stream ops (stream_ops.h), for backends that compute on the
// calling thread (cpu, reference). Each stream of a step runs the model's one
// forward pass (forward_pass.h) over its chunk in turn; its pooling window,
// clip total and the head call are here, in host memory allocated in one
// block at creation. A step is done when launch() returns.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "arena.h"
#include "backend.h"
#include "denormals.h"
#include "forward_pass.h"
#include "stream.h"

namespace mega {

namespace {

class HostStep final : public StepOps {
 public:
  ~HostStep() override { std::free(block_); }

  bool init(const Model& model, int32_t n_streams, int32_t n_slots, int64_t span_tokens,
            const MakeStreamOps& make_ops, int64_t shared_bytes) {
    hp_ = model.hparams();
    w_ = &model_weights(model);
    n_streams_ = n_streams;
    n_slots_ = n_slots;
    span_tokens_ = span_tokens;
    shared_bytes_ = shared_bytes;
    bidir_ = hp_.ema_direction == EmaDirection::bidirectional;
    for (int32_t b = 0; b < n_streams; ++b) {
      ops_.push_back(make_ops(span_tokens));
      if (!ops_.back()) return false;
    }
    Arena sizing(nullptr);
    layout(sizing);
    bytes_ = sizing.size();
    void* block = nullptr;
    if (::posix_memalign(&block, 64, bytes_ ? bytes_ : 64) != 0) return false;
    block_ = static_cast<uint8_t*>(block);
    std::memset(block_, 0, bytes_);
    Arena carve(block_);
    layout(carve);
    return true;
  }

  int32_t n_slots() const override { return n_slots_; }
  StepSlot slot(int32_t r) override { return slots_[size_t(r)]; }

  Status launch(int32_t r) override {
    ScopedFlushDenormals ftz;
    const StepSlot& s = slots_[size_t(r)];
    const int64_t stride = context() + hp_.chunk_samples();
    for (int32_t b = 0; b < n_streams_; ++b) {
      step_stream(b, s.samples + b * stride, s.index[b]);
      window_logits(b, s.index[b], s.logits + int64_t(b) * hp_.n_classes);
    }
    return Status::ok;
  }
  Status ready(int32_t, bool* done) override {
    *done = true;
    return Status::ok;
  }
  Status finish(int32_t) override { return Status::ok; }

  Status clear_state(int32_t b) override {
    clear(b);
    return Status::ok;
  }

  Status clip_head(int32_t r, float* logits) override {
    ScopedFlushDenormals ftz;
    const int64_t chunks = slots_[size_t(r)].index[0] + 1;
    ops_[0]->head(total(0), chunks * hp_.chunk_size, logits);
    return Status::ok;
  }
  float* clip_samples() override { return clip_; }
  int64_t clip_tokens() const override { return bidir_ ? span_tokens_ : 0; }
  Status classify_span(int64_t n_tok, float* logits) override {
    ScopedFlushDenormals ftz;
    Span span;
    span.n_tok = n_tok;
    span.streaming = false;
    span.samples = clip_;
    span.sample_stride = context() + n_tok * hp_.patch_stride;
    ops_[0]->set_trace(trace_, trace_tokens_, 0);
    forward(*ops_[0], hp_, *w_, span);  // the host ops do not fail
    ops_[0]->head(ops_[0]->span_sum(), n_tok, logits);
    clear(0);
    return Status::ok;
  }

  void set_trace(float* trace, int64_t trace_tokens) override {
    trace_ = trace;
    trace_tokens_ = trace_tokens;
    if (!trace) ops_[0]->set_trace(nullptr, 0, 0);
  }

  int64_t memory_bytes() const override {
    int64_t bytes = int64_t(bytes_) + shared_bytes_;
    for (const auto& o : ops_) bytes += o->memory_bytes();
    return bytes;
  }

 private:
  int64_t context() const { return hp_.patch_kernel - hp_.patch_stride; }
  double* window(int32_t b) { return pool_ + int64_t(b) * hp_.window_chunks * hp_.embed_dim; }
  double* total(int32_t b) { return totals_ + int64_t(b) * hp_.embed_dim; }

  void layout(Arena& a) {
    const int64_t B = n_streams_, D = hp_.embed_dim;
    slots_.assign(size_t(n_slots_), StepSlot());
    for (StepSlot& s : slots_) {
      s.samples = a.take<float>(B * (context() + hp_.chunk_samples()));
      s.index = a.take<int64_t>(B);
      s.logits = a.take<float>(B * hp_.n_classes);
    }
    pool_ = a.take<double>(B * hp_.window_chunks * D);
    totals_ = a.take<double>(B * D);
    rep_ = a.take<double>(D);
    clip_ = bidir_ ? a.take<float>(context() + span_tokens_ * hp_.patch_stride) : nullptr;
  }

  void clear(int32_t b) {
    ops_[size_t(b)]->clear_state();
    std::fill(window(b), window(b) + int64_t(hp_.window_chunks) * hp_.embed_dim, 0.0);
    std::fill(total(b), total(b) + hp_.embed_dim, 0.0);
  }

  // One stream's chunk: the forward pass, its sum into the window and the total.
  void step_stream(int32_t b, const float* block, int64_t index) {
    if (index == 0) clear(b);
    StreamOps& ops = *ops_[size_t(b)];
    Span span;
    span.n_tok = hp_.chunk_size;
    span.samples = block;
    span.sample_stride = context() + hp_.chunk_samples();
    span.chunk_index = &index;
    if (trace_) ops.set_trace(trace_, trace_tokens_, index * hp_.chunk_size);
    forward(ops, hp_, *w_, span);  // the host ops do not fail
    const int32_t D = hp_.embed_dim;
    const double* sum = ops.span_sum();
    std::copy(sum, sum + D, window(b) + (index % hp_.window_chunks) * D);
    double* t = total(b);
    for (int32_t d = 0; d < D; ++d) t[d] += sum[d];
  }

  // The head over the stream's last min(index + 1, W) chunks, summed oldest
  // to newest so that the order is the same for every block size.
  void window_logits(int32_t b, int64_t index, float* out) {
    const int32_t D = hp_.embed_dim;
    const int64_t pooled = std::min<int64_t>(index + 1, hp_.window_chunks);
    std::fill(rep_, rep_ + D, 0.0);
    for (int64_t i = index + 1 - pooled; i <= index; ++i) {
      const double* s = window(b) + (i % hp_.window_chunks) * D;
      for (int32_t d = 0; d < D; ++d) rep_[d] += s[d];
    }
    ops_[size_t(b)]->head(rep_, pooled * hp_.chunk_size, out);
  }

  HParams hp_;
  const ModelWeights* w_ = nullptr;
  int32_t n_streams_ = 0, n_slots_ = 0;
  int64_t span_tokens_ = 0, shared_bytes_ = 0;
  bool bidir_ = false;
  std::vector<std::unique_ptr<StreamOps>> ops_;
  uint8_t* block_ = nullptr;
  size_t bytes_ = 0;
  std::vector<StepSlot> slots_;
  double* pool_ = nullptr;    // (B x W x D) per-chunk sums
  double* totals_ = nullptr;  // (B x D) since chunk 0
  double* rep_ = nullptr;     // (D) a window's sum
  float* clip_ = nullptr;     // bidirectional: [ctx | clip]
  float* trace_ = nullptr;
  int64_t trace_tokens_ = 0;
};

}  // namespace

std::unique_ptr<StepOps> create_host_step(const Model& model, int32_t n_streams, int32_t n_slots,
                                          int64_t span_tokens, const MakeStreamOps& make_ops, int64_t shared_bytes) {
  std::unique_ptr<HostStep> s(new (std::nothrow) HostStep());
  if (!s || !s->init(model, n_streams, n_slots, span_tokens, make_ops, shared_bytes)) return nullptr;
  return s;
}

}  // namespace mega
