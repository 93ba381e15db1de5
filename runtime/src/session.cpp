// A Session: one stream's state (its pending samples, pooling window, input
// hygiene and recovery), allocated in one block at creation, over the CPU
// backend's ops (kernels/cpu/cpu_ops.h), which run the model's one forward
// pass (kernels/ops.h).
//
// Unidirectional models run chunk by chunk: a chunk's attention only needs its
// own C tokens, and the EMA carries its state (h and the last K inputs) across
// chunks, so streaming and whole clips share one code path. Bidirectional
// models need the whole clip per layer for the backward EMA; their spans are
// sized by SessionOptions::max_clip_samples.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include <cblas.h>

#include "common/arena.h"
#include "common/denormals.h"
#include "model_data.h"
#include "ops.h"

namespace mega {

struct SessionState {
  const ModelData* md = nullptr;
  HParams hp;
  std::unique_ptr<SessionOps> ops;  // the CPU backend's (kernels/cpu)
  bool bidir = false;
  int64_t max_clip_samples = 0;

  uint8_t* block = nullptr;
  size_t block_bytes = 0;

  // streaming input: [k - s context samples | chunk samples], already scaled
  float* pending = nullptr;
  int64_t n_pending = 0;        // chunk samples received so far
  int64_t context = 0;          // k - s
  int64_t samples_seen = 0;
  // pooling window: per-chunk sums of final features
  double* pool = nullptr;       // (W x D)
  int64_t n_chunks = 0;
  float* logits = nullptr;
  ChunkResult result;
  SessionStats stats;
  float* clip = nullptr;        // bidirectional: the scaled clip with its left context
  double* rep = nullptr;        // (D) pooled sum

  void layout(Arena& a) {
    const int64_t D = hp.embed_dim;
    pending = a.take<float>(context + hp.chunk_samples());
    pool = a.take<double>(int64_t(hp.window_chunks) * D);
    logits = a.take<float>(hp.n_classes);
    clip = bidir ? a.take<float>(context + max_clip_samples) : nullptr;
    rep = a.take<double>(D);
  }

  void clear_window() { std::fill(pool, pool + int64_t(hp.window_chunks) * hp.embed_dim, 0.0); }

  void reset_stream() {
    std::fill(pending, pending + context + hp.chunk_samples(), 0.0f);
    ops->clear_state();
    clear_window();
    n_pending = samples_seen = n_chunks = 0;
    result = ChunkResult();
  }

  // Input hygiene (mega.hpp, kMaxSampleMagnitude), then the model's scaling.
  float clean_sample(float s) { return scale_sample(mega::clean_sample(s, &stats)); }

  // Non-finite logits: zero them and clear the recurrent state (EMA, window),
  // as if the stream restarted from silence; counters and positions go on.
  bool contain_non_finite(float* out) {
    const int32_t nc = hp.n_classes;
    if (std::all_of(out, out + nc, [](float y) { return std::isfinite(y); })) return false;
    std::fill(out, out + nc, 0.0f);
    std::fill(pending, pending + context, 0.0f);
    ops->clear_state();
    clear_window();
    ++stats.n_state_resets;
    return true;
  }

  float scale_sample(float s) const {
    const ModelInfo& info = md->info;
    return info.input_scaling ? (s - info.input_mean) / (info.input_std + 1e-5f) : s;
  }

  // A full chunk of samples sits in pending: run it and put its sum in the window.
  void process_pending_chunk() {
    const int32_t D = hp.embed_dim;
    Span span;
    span.n_tok = hp.chunk_size;
    span.samples = pending;
    span.sample_stride = context + hp.chunk_samples();
    span.chunk_index = &n_chunks;
    forward(*ops, hp, *md, span);  // the CPU ops do not fail
    const double* sum = ops->span_sum();
    std::copy(sum, sum + D, pool + (n_chunks % hp.window_chunks) * D);
    ++n_chunks;
    // keep the last k - s samples as the next chunk's left context
    const int64_t cs = hp.chunk_samples();
    std::memmove(pending, pending + cs, sizeof(float) * size_t(context));
    n_pending = 0;
  }

  void window_logits() {
    const int32_t D = hp.embed_dim;
    const int64_t pooled = std::min<int64_t>(n_chunks, hp.window_chunks);
    std::fill(rep, rep + D, 0.0);
    // sum oldest to newest so the order is the same for every block size
    for (int64_t i = n_chunks - pooled; i < n_chunks; ++i) {
      const double* s = pool + (i % hp.window_chunks) * D;
      for (int32_t d = 0; d < D; ++d) rep[d] += s[d];
    }
    ops->head(rep, pooled * hp.chunk_size, logits);
    result.chunk_index = n_chunks - 1;
    result.end_sample = samples_seen;
    result.n_chunks_pooled = int32_t(pooled);
    result.logits = logits;
  }
};

Session::Session() = default;
Session::~Session() {
  if (st_) std::free(st_->block);
}

std::unique_ptr<Session> Session::create(std::shared_ptr<const Model> model, const SessionOptions& opts,
                                         std::string* error, Status* status) {
  auto fail = [&](Status s, const std::string& msg) -> std::unique_ptr<Session> {
    if (error) *error = msg;
    if (status) *status = s;
    return nullptr;
  };
  if (!model) return fail(Status::invalid_argument, "no model");
  if (opts.kernels != KernelImpl::reference && opts.kernels != KernelImpl::optimized) {
    return fail(Status::invalid_argument, "unknown kernel implementation");
  }
  if (opts.max_clip_samples < 0) return fail(Status::invalid_argument, "max_clip_samples must be >= 0");
  if (opts.n_threads < 1 || opts.n_threads > kMaxThreads) {
    return fail(Status::invalid_argument, "n_threads must be in [1, " + std::to_string(kMaxThreads) + "]");
  }
  std::unique_ptr<Session> s(new (std::nothrow) Session());
  if (!s) return fail(Status::out_of_memory, "out of memory");
  s->st_.reset(new (std::nothrow) SessionState());
  if (!s->st_) return fail(Status::out_of_memory, "out of memory");
  SessionState& st = *s->st_;
  st.md = &ModelAccess::data(*model);
  st.hp = model->hparams();
  st.bidir = st.hp.ema_direction == EmaDirection::bidirectional;
  st.context = st.hp.patch_kernel - st.hp.patch_stride;
  const int64_t cs = st.hp.chunk_samples();
  int64_t max_clip = opts.max_clip_samples > 0 ? opts.max_clip_samples : st.hp.window_samples();
  max_clip = std::max(max_clip, st.hp.window_samples());
  max_clip = (max_clip + cs - 1) / cs * cs;
  if (max_clip > (int64_t(1) << 28)) return fail(Status::invalid_argument, "max_clip_samples is too large");
  st.max_clip_samples = max_clip;
  const int64_t span_tokens = st.bidir ? max_clip / st.hp.patch_stride : st.hp.chunk_size;
  st.ops = create_cpu_session_ops(st.hp, *st.md, opts.kernels, opts.n_threads, span_tokens);
  if (!st.ops) {
    return fail(Status::out_of_memory, "cannot allocate the session's buffers or start its threads");
  }

  Arena sizing(nullptr);
  st.layout(sizing);
  st.block_bytes = sizing.size();
  void* block = nullptr;
  if (::posix_memalign(&block, 64, st.block_bytes ? st.block_bytes : 64) != 0) {
    return fail(Status::out_of_memory, "cannot allocate " + std::to_string(st.block_bytes) + " bytes");
  }
  st.block = static_cast<uint8_t*>(block);
  std::memset(st.block, 0, st.block_bytes);
  Arena carve(st.block);
  st.layout(carve);
  s->model_ = std::move(model);
  st.reset_stream();
  if (status) *status = Status::ok;
  return s;
}

Status Session::push(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done) {
  SessionState& st = *st_;
  if (n_consumed) *n_consumed = 0;
  if (chunk_done) *chunk_done = false;
  if (st.bidir) return Status::not_streamable;
  if (n < 0 || (n > 0 && !samples) || !n_consumed || !chunk_done) return Status::invalid_argument;
  const int64_t cs = st.hp.chunk_samples();
  const int64_t take = std::min(n, cs - st.n_pending);
  float* dst = st.pending + st.context + st.n_pending;
  for (int64_t i = 0; i < take; ++i) dst[i] = st.clean_sample(samples[i]);
  st.n_pending += take;
  st.samples_seen += take;
  *n_consumed = take;
  if (st.n_pending == cs) {
    cpu::ScopedFlushDenormals ftz;
    st.process_pending_chunk();
    st.window_logits();
    st.contain_non_finite(st.logits);
    *chunk_done = true;
  }
  return Status::ok;
}

const ChunkResult& Session::last_result() const { return st_->result; }

void Session::reset() { st_->reset_stream(); }

int64_t Session::padded_clip_samples(int64_t n) const { return st_->hp.padded_clip_samples(n); }

Status Session::classify_clip(const float* samples, int64_t n, float* logits, float* trace) {
  SessionState& st = *st_;
  if (n < 0 || (n > 0 && !samples) || !logits) return Status::invalid_argument;
  const int64_t total = padded_clip_samples(n);
  if (st.bidir && total > st.max_clip_samples) return Status::too_long;
  const int32_t D = st.hp.embed_dim;
  const int64_t cs = st.hp.chunk_samples();
  const int64_t n_tok = total / st.hp.patch_stride;
  auto sample = [&](int64_t j) { return st.clean_sample(j < n ? samples[j] : 0.0f); };
  cpu::ScopedFlushDenormals ftz;
  st.reset_stream();
  double* sum = st.rep;
  std::fill(sum, sum + D, 0.0);
  if (!st.bidir) {
    // chunk by chunk through the streaming path, pooled over the whole clip
    for (int64_t c0 = 0; c0 < total; c0 += cs) {
      for (int64_t i = 0; i < cs; ++i) st.pending[st.context + i] = sample(c0 + i);
      st.ops->set_trace(trace, n_tok, st.n_chunks * st.hp.chunk_size);
      st.process_pending_chunk();
      const double* slot = st.pool + ((st.n_chunks - 1) % st.hp.window_chunks) * D;
      for (int32_t d = 0; d < D; ++d) sum[d] += slot[d];
    }
  } else {
    // whole clip per layer (the backward EMA looks ahead)
    std::fill(st.clip, st.clip + st.context, 0.0f);
    for (int64_t j = 0; j < total; ++j) st.clip[st.context + j] = sample(j);
    Span span;
    span.n_tok = n_tok;
    span.streaming = false;
    span.samples = st.clip;
    span.sample_stride = st.context + total;
    st.ops->set_trace(trace, n_tok, 0);
    forward(*st.ops, st.hp, *st.md, span);
    const double* clip_sum = st.ops->span_sum();
    std::copy(clip_sum, clip_sum + D, sum);
  }
  st.ops->set_trace(nullptr, 0, 0);
  st.ops->head(sum, n_tok, logits);
  st.contain_non_finite(logits);
  st.reset_stream();
  return Status::ok;
}

Status Session::self_test(float* max_abs_diff) {
  const Model& m = *model_;
  if (max_abs_diff) *max_abs_diff = 0.0f;
  if (m.self_test_input().empty()) return Status::invalid_argument;
  float* out = st_->logits;  // the window logits buffer is free between pushes
  const Status s = classify_clip(m.self_test_input().data(), int64_t(m.self_test_input().size()), out);
  return s == Status::ok ? m.check_self_test(out, max_abs_diff) : s;
}

int64_t Session::memory_bytes() const { return int64_t(st_->block_bytes) + st_->ops->memory_bytes(); }

const SessionStats& Session::stats() const { return st_->stats; }

void set_blas_threads(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

}  // namespace mega
