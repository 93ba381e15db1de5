// A Session: one stream's state and scratch, allocated in one block at
// creation, plus the forward pass over chunks.
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

#include "cpu/denormals.h"
#include "cpu/kernels.h"
#include "cpu/simd_kernels.h"
#include "cpu/worker_pool.h"
#include "model_data.h"

namespace mega {

namespace {

constexpr int32_t k_max_threads = 16;
// Chunks shorter than this run on the calling thread alone: waking a worker
// costs more than their share of the work (the demo model's 25-token chunks
// took 3x longer on two threads).
constexpr int32_t k_min_parallel_chunk = 128;

// Carves one allocation into aligned arrays. Run once without memory to size
// the block, then again to hand out pointers.
class Arena {
 public:
  explicit Arena(uint8_t* base) : base_(base) {}
  template <typename T>
  T* take(int64_t count) {
    off_ = (off_ + 63) & ~size_t(63);
    T* p = base_ ? reinterpret_cast<T*>(base_ + off_) : nullptr;
    off_ += sizeof(T) * size_t(count);
    return p;
  }
  size_t size() const { return off_; }

 private:
  uint8_t* base_;
  size_t off_ = 0;
};

struct LayerState {
  double* h = nullptr;       // (D x N) EMA state (causal)
  float* ring = nullptr;     // (K x D) last K EMA inputs
  double* ref_kernel = nullptr;  // (rows x K), reference kernels only
};

}  // namespace

struct SessionState {
  const ModelData* md = nullptr;
  HParams hp;
  KernelImpl impl = KernelImpl::optimized;
  cpu::MathImpl math = cpu::MathImpl::Fast;
  const cpu::SimdKernels* simd = nullptr;  // optimized kernels only
  bool fused_attention = false;            // simd->attention serves the model's attention function
  cpu::WorkerPool workers;                 // SessionOptions::n_threads, the caller included
  int32_t n_threads = 1;
  bool bidir = false;
  int64_t span_tokens = 0;      // tokens per forward span: C, or max clip tokens (bidirectional)
  int64_t max_clip_samples = 0;

  uint8_t* block = nullptr;
  size_t block_bytes = 0;

  // streaming input: [k - s context samples | chunk samples], already scaled
  float* pending = nullptr;
  int64_t n_pending = 0;        // chunk samples received so far
  int64_t context = 0;          // k - s
  int64_t samples_seen = 0;
  int64_t tokens_seen = 0;
  std::vector<LayerState> layers;  // sized at creation, never resized
  // pooling window: per-chunk sums of final features
  double* pool = nullptr;       // (W x D)
  int64_t n_chunks = 0;
  float* logits = nullptr;
  ChunkResult result;
  SessionStats stats;

  // scratch
  float *x = nullptr, *xn = nullptr, *mx = nullptr;       // (span x D)
  float *v = nullptr, *base = nullptr, *q = nullptr, *k = nullptr;
  float *scores = nullptr, *o = nullptr, *hb = nullptr, *ffn = nullptr;
  double* ema_scratch = nullptr;   // bidirectional fast EMA
  float* attn_scratch[k_max_threads] = {};     // per thread: fused attention
  float* attn_partial = nullptr;                // fused attention: the split last block's halves
  double* simd_ema_scratch[k_max_threads] = {};  // per thread: SIMD causal EMA
  float* clip = nullptr;        // bidirectional: the scaled clip with its left context
  double* rep = nullptr;        // (D) pooled sum
  float *head_a = nullptr, *head_b = nullptr;

  void layout(Arena& a) {
    const int64_t D = hp.embed_dim, H = hp.hidden_dim, Z = hp.z_dim, C = hp.chunk_size;
    const int64_t F = hp.ffn_hidden_dim, N = hp.n_dim, K = hp.truncation;
    pending = a.take<float>(context + hp.chunk_samples());
    for (size_t l = 0; l < layers.size(); ++l) {
      LayerState& ls = layers[l];
      ls.h = a.take<double>(D * N);
      ls.ring = a.take<float>(K * D);
      const int64_t rows = bidir ? 2 * D : D;
      ls.ref_kernel = impl == KernelImpl::reference && K > 0 ? a.take<double>(rows * K) : nullptr;
    }
    pool = a.take<double>(int64_t(hp.window_chunks) * D);
    logits = a.take<float>(hp.n_classes);
    x = a.take<float>(span_tokens * D);
    xn = a.take<float>(span_tokens * D);
    mx = a.take<float>(span_tokens * D);
    v = a.take<float>(C * H);
    base = a.take<float>(C * (2 * D + Z + H));
    q = a.take<float>(C * Z);
    k = a.take<float>(C * Z);
    scores = fused_attention ? nullptr : a.take<float>(C * C);
    o = a.take<float>(C * H);
    hb = a.take<float>(C * D);
    ffn = a.take<float>(C * std::max<int64_t>(F, 1));
    ema_scratch = a.take<double>(N);
    attn_partial = fused_attention ? a.take<float>(cpu::attention_partial_floats(int32_t(H))) : nullptr;
    for (int32_t t = 0; t < n_threads && simd; ++t) {
      attn_scratch[t] = fused_attention ? a.take<float>(cpu::attention_scratch_floats(int32_t(C), int32_t(Z))) : nullptr;
      simd_ema_scratch[t] = a.take<double>(cpu::ema_scratch_doubles(int32_t(N)));
    }
    clip = bidir ? a.take<float>(context + max_clip_samples) : nullptr;
    rep = a.take<double>(D);
    head_a = a.take<float>(std::max<int64_t>(D, hp.classifier_dim));
    head_b = a.take<float>(std::max<int64_t>(D, hp.classifier_dim));
  }

  void reset_stream() {
    const int64_t D = hp.embed_dim, N = hp.n_dim, K = hp.truncation;
    std::fill(pending, pending + context + hp.chunk_samples(), 0.0f);
    for (LayerState& ls : layers) {
      std::fill(ls.h, ls.h + D * N, 0.0);
      std::fill(ls.ring, ls.ring + K * D, 0.0f);
    }
    std::fill(pool, pool + int64_t(hp.window_chunks) * D, 0.0);
    n_pending = samples_seen = tokens_seen = n_chunks = 0;
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
    const int64_t D = hp.embed_dim, N = hp.n_dim, K = hp.truncation;
    std::fill(pending, pending + context, 0.0f);
    for (LayerState& ls : layers) {
      std::fill(ls.h, ls.h + D * N, 0.0);
      std::fill(ls.ring, ls.ring + K * D, 0.0f);
    }
    std::fill(pool, pool + int64_t(hp.window_chunks) * D, 0.0);
    ++stats.n_state_resets;
    return true;
  }

  float scale_sample(float s) const {
    const ModelInfo& info = md->info;
    return info.input_scaling ? (s - info.input_mean) / (info.input_std + 1e-5f) : s;
  }

  // Tokens [0, n_tok) of x from scaled samples laid out as [k - s context | n_tok * s].
  void embed(const float* samples, int64_t n_tok, float* out) const {
    const int32_t D = hp.embed_dim, kk = hp.patch_kernel, s = hp.patch_stride;
    const auto dot = [kk](const float* w, const float* win) {
      float acc = 0.0f;
      for (int32_t i = 0; i < kk; ++i) acc += w[i] * win[i];
      return acc;
    };
    for (int64_t j = 0; j < n_tok; ++j) {
      const float* win = samples + j * s;
      float* xt = out + j * D;
      for (int32_t d = 0; d < D; ++d) {
        const float a = dot(md->embed_w + int64_t(d) * kk, win);
        if (md->embed_g == nullptr) {
          xt[d] = a + md->embed_b[d];
        } else {  // log power of the filter pair (d, D + d)
          const float b = dot(md->embed_w + int64_t(D + d) * kk, win);
          xt[d] = md->embed_g[d] * std::log(a * a + b * b + hp.patch_log_eps) + md->embed_b[d];
        }
      }
    }
  }

  void linear(const float* in, int64_t n, const LinearWeights& w, float* out) const {
    cpu::LinearParams p;
    p.x = in;
    p.n = n;
    p.w = &w;
    p.y = out;
    if (impl == KernelImpl::reference) {
      cpu::linear_ref(p);
    } else if (w.packed) {
      simd->linear(p);
    } else {
      cpu::linear_blas(p);
    }
  }

  // Row tasks of a chunk: about 8 (enough to balance two threads when one
  // is preempted), whole multiples of 16 rows.
  int64_t row_task_rows() const { return std::max<int64_t>(16, (hp.chunk_size + 127) / 128 * 16); }
  int32_t row_tasks() const { return int32_t((hp.chunk_size + row_task_rows() - 1) / row_task_rows()); }

  // f(r0, r1) over the row tasks of a chunk, on all threads.
  template <typename F>
  void for_rows(F&& f) {
    const int64_t step = row_task_rows(), C = hp.chunk_size;
    auto task = [&](int32_t t, int32_t) { f(t * step, std::min<int64_t>(C, (t + 1) * step)); };
    workers.run(row_tasks(), task);
  }

  // kernel(params, unit, unit + 1, scratch) for units [0, n_units) (query
  // blocks, channel groups), one task each, with each thread's scratch.
  template <typename P, typename S>
  void run_units(const P& params, int32_t n_units, void (*kernel)(const P&, int32_t, int32_t, S*),
                 S* const* scratch) {
    auto task = [&](int32_t unit, int32_t thread) { kernel(params, unit, unit + 1, scratch[thread]); };
    workers.run(n_units, task);
  }

  // Rows [r0, r1) of one chunk up to the attention: mx = silu(EMA + omega xn),
  // v, and base = (u, z, r, hx) with q and k from z.
  void rows_before_attention(const LayerWeights& L, const float* xnc, float* mxc, int64_t r0, int64_t r1) {
    const int64_t D = hp.embed_dim, H = hp.hidden_dim, Z = hp.z_dim;
    const int64_t W = 2 * D + Z + H, n = r1 - r0;
    for (int64_t t = r0; t < r1; ++t) {
      for (int64_t d = 0; d < D; ++d) mxc[t * D + d] += L.ema.omega[d] * xnc[t * D + d];
    }
    cpu::vec_silu(math, mxc + r0 * D, mxc + r0 * D, n * D);
    linear(xnc + r0 * D, n, L.v_proj, v + r0 * H);
    cpu::activation_apply(math, hp.activation, v + r0 * H, n * H);
    linear(mxc + r0 * D, n, L.mx_proj, base + r0 * W);
    for (int64_t t = r0; t < r1; ++t) {
      float* b = base + t * W;
      cpu::vec_sigmoid(math, b, b, D);          // u
      cpu::vec_silu(math, b + D, b + D, Z + H);  // z, r
      for (int64_t i = 0; i < Z; ++i) {
        q[t * Z + i] = b[D + i] * L.qk_gamma[i] + L.qk_beta[i];
        k[t * Z + i] = b[D + i] * L.qk_gamma[Z + i] + L.qk_beta[Z + i];
      }
    }
  }

  void attention(const LayerWeights& L) {
    cpu::AttentionParams ap;
    ap.q = q;
    ap.k = k;
    ap.v = v;
    ap.rel_pos_bias = L.rel_pos_bias;
    ap.chunk = hp.chunk_size;
    ap.c = hp.chunk_size;
    ap.z = hp.z_dim;
    ap.hdim = hp.hidden_dim;
    ap.fn = hp.attention_fn;
    ap.scores = scores;
    ap.o = o;
    if (impl == KernelImpl::reference) {
      cpu::attention_ref(ap);
    } else if (!fused_attention) {
      cpu::attention_blas(ap, math);
    } else {
      ap.partial = attn_partial;
      run_units(ap, cpu::attention_units(*simd, hp.chunk_size), simd->attention, attn_scratch);
      cpu::attention_finish(*simd, ap);
    }
  }

  // Rows [r0, r1) of one chunk after the attention: the gate, the output
  // projection, the residual and the FFN sublayer; x (C x D) updated in place.
  void rows_after_attention(const LayerWeights& L, float* xc, int64_t r0, int64_t r1) {
    const int64_t D = hp.embed_dim, H = hp.hidden_dim, Z = hp.z_dim, F = hp.ffn_hidden_dim;
    const int64_t W = 2 * D + Z + H, n = r1 - r0;
    for (int64_t t = r0; t < r1; ++t) {
      const float* r = base + t * W + D + Z;
      for (int64_t i = 0; i < H; ++i) o[t * H + i] *= r[i];
    }
    linear(o + r0 * H, n, L.h_proj, hb + r0 * D);
    for (int64_t t = r0; t < r1; ++t) {
      const float* hx = base + t * W + D + Z + H;
      for (int64_t i = 0; i < D; ++i) hb[t * D + i] += hx[i];
    }
    cpu::activation_apply(math, hp.activation, hb + r0 * D, n * D);
    for (int64_t t = r0; t < r1; ++t) {
      const float* u = base + t * W;
      for (int64_t i = 0; i < D; ++i) {
        const float res = xc[t * D + i];
        xc[t * D + i] = res + u[i] * (hb[t * D + i] - res);
      }
    }
    float* xr = xc + r0 * D;
    if (!hp.prenorm) cpu::norm_apply(L.norm, xr, xr, n, hp.embed_dim);
    if (!L.has_ffn) return;
    // FFN sublayer; hb is free again
    float* t_in = hb + r0 * D;
    if (hp.prenorm) {
      cpu::norm_apply(L.ffn_norm, xr, t_in, n, hp.embed_dim);
    } else {
      std::memcpy(t_in, xr, sizeof(float) * size_t(n * D));
    }
    linear(t_in, n, L.fc1, ffn + r0 * F);
    cpu::activation_apply(math, hp.activation, ffn + r0 * F, n * F);
    linear(ffn + r0 * F, n, L.fc2, t_in);
    for (int64_t i = 0; i < n * D; ++i) xr[i] += t_in[i];
    if (!hp.prenorm) cpu::norm_apply(L.ffn_norm, xr, xr, n, hp.embed_dim);
  }

  // Everything after the EMA for one chunk: x (C x D) updated in place.
  void chunk_rest(const LayerWeights& L, float* xc, const float* xnc, float* mxc) {
    for_rows([&](int64_t r0, int64_t r1) { rows_before_attention(L, xnc, mxc, r0, r1); });
    attention(L);
    for_rows([&](int64_t r0, int64_t r1) { rows_after_attention(L, xc, r0, r1); });
  }

  void ema(const LayerWeights& L, LayerState& ls, int64_t n_tok) {
    cpu::EmaParams ep;
    ep.w = &L.ema;
    ep.d = hp.embed_dim;
    ep.n = n_tok;
    ep.x = xn;
    ep.y = mx;
    ep.h = ls.h;
    ep.ring = ls.ring;
    ep.tokens_seen = tokens_seen;
    ep.ref_kernel = ls.ref_kernel;
    ep.scratch = ema_scratch;
    if (bidir) {
      impl == KernelImpl::reference ? cpu::ema_bidir_ref(ep) : cpu::ema_bidir_fast(ep);
    } else if (impl == KernelImpl::reference) {
      cpu::ema_causal_ref(ep);
    } else {
      const int32_t group = simd->ema_group;
      run_units(ep, (hp.embed_dim + group - 1) / group, simd->ema_causal, simd_ema_scratch);
    }
  }

  // One layer over a span of n_tok tokens (a multiple of C) held in x.
  void layer_forward(size_t l, int64_t n_tok) {
    const LayerWeights& L = md->layers[l];
    const int32_t D = hp.embed_dim;
    if (hp.prenorm) {
      cpu::norm_apply(L.norm, x, xn, n_tok, D);
    } else {
      std::memcpy(xn, x, sizeof(float) * size_t(n_tok * D));
    }
    ema(L, layers[l], n_tok);
    const int64_t C = hp.chunk_size;
    for (int64_t c0 = 0; c0 < n_tok; c0 += C) {
      chunk_rest(L, x + c0 * D, xn + c0 * D, mx + c0 * D);
    }
  }

  // All layers over x (n_tok tokens), then the final norm. trace (tests):
  // slot l of (n_layers + 1) x trace_tokens x D gets layer l's input.
  void forward_span(int64_t n_tok, float* trace, int64_t trace_tokens, int64_t trace_off) {
    const int32_t D = hp.embed_dim;
    auto record = [&](int64_t slot) {
      if (!trace) return;
      float* dst = trace + (slot * trace_tokens + trace_off) * D;
      std::memcpy(dst, x, sizeof(float) * size_t(n_tok * D));
    };
    record(0);
    for (size_t l = 0; l < layers.size(); ++l) {
      layer_forward(l, n_tok);
      record(int64_t(l) + 1);
    }
    if (md->has_final_norm) cpu::norm_apply(md->final_norm, x, x, n_tok, D);
    tokens_seen += n_tok;
  }

  void chunk_sum(const float* feats, double* out) const {
    const int32_t D = hp.embed_dim;
    std::fill(out, out + D, 0.0);
    for (int64_t t = 0; t < hp.chunk_size; ++t) {
      for (int32_t d = 0; d < D; ++d) out[d] += feats[t * D + d];
    }
  }

  // logits from a pooled sum over n_tok tokens
  void head(const double* sum, int64_t n_tok, float* out) {
    const int32_t D = hp.embed_dim;
    for (int32_t d = 0; d < D; ++d) head_a[d] = float(sum[d] / double(n_tok));
    float* in = head_a;
    float* nxt = head_b;
    for (const LinearWeights& cl : md->classifier) {
      cpu::LinearParams p;
      p.x = in;
      p.n = 1;
      p.w = &cl;
      p.y = nxt;
      cpu::linear_ref(p);
      cpu::activation_apply(math, hp.classifier_activation, nxt, cl.n_out);
      std::swap(in, nxt);
    }
    cpu::LinearParams p;
    p.x = in;
    p.n = 1;
    p.w = &md->projection;
    p.y = out;
    cpu::linear_ref(p);
  }

  // A full chunk of samples sits in pending: run it and update the window.
  void process_pending_chunk(float* trace, int64_t trace_tokens) {
    const int32_t D = hp.embed_dim;
    const int64_t C = hp.chunk_size;
    embed(pending, C, x);
    forward_span(C, trace, trace_tokens, tokens_seen);
    double* slot = pool + (n_chunks % hp.window_chunks) * D;
    chunk_sum(x, slot);
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
    head(rep, pooled * hp.chunk_size, logits);
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
  if (opts.n_threads < 1 || opts.n_threads > k_max_threads) {
    return fail(Status::invalid_argument, "n_threads must be in [1, " + std::to_string(k_max_threads) + "]");
  }
  std::unique_ptr<Session> s(new (std::nothrow) Session());
  if (!s) return fail(Status::out_of_memory, "out of memory");
  s->st_.reset(new (std::nothrow) SessionState());
  if (!s->st_) return fail(Status::out_of_memory, "out of memory");
  SessionState& st = *s->st_;
  st.md = &ModelAccess::data(*model);
  st.hp = model->hparams();
  st.impl = opts.kernels;
  st.math = opts.kernels == KernelImpl::reference ? cpu::MathImpl::Reference : cpu::MathImpl::Fast;
  if (st.impl == KernelImpl::optimized) {
    st.simd = &cpu::simd_kernels();
    st.fused_attention = st.hp.attention_fn != AttentionFn::softmax;
  }
  st.n_threads = st.hp.chunk_size < k_min_parallel_chunk ? 1 : opts.n_threads;
  st.bidir = st.hp.ema_direction == EmaDirection::bidirectional;
  st.context = st.hp.patch_kernel - st.hp.patch_stride;
  const int64_t cs = st.hp.chunk_samples();
  int64_t max_clip = opts.max_clip_samples > 0 ? opts.max_clip_samples : st.hp.window_samples();
  max_clip = std::max(max_clip, st.hp.window_samples());
  max_clip = (max_clip + cs - 1) / cs * cs;
  if (max_clip > (int64_t(1) << 28)) return fail(Status::invalid_argument, "max_clip_samples is too large");
  st.max_clip_samples = max_clip;
  st.span_tokens = st.bidir ? max_clip / st.hp.patch_stride : st.hp.chunk_size;
  st.layers.resize(size_t(st.hp.n_layers));

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
  if (st.impl == KernelImpl::reference && st.hp.truncation > 0) {
    for (size_t l = 0; l < st.layers.size(); ++l) cpu::ema_lag_kernel(st.md->layers[l].ema, st.layers[l].ref_kernel);
  }
  if (!st.workers.start(st.n_threads)) return fail(Status::out_of_memory, "cannot start the worker threads");
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
    st.process_pending_chunk(nullptr, 0);
    st.window_logits();
    st.contain_non_finite(st.logits);
    *chunk_done = true;
  }
  return Status::ok;
}

const ChunkResult& Session::last_result() const { return st_->result; }

void Session::reset() { st_->reset_stream(); }

int64_t Session::padded_clip_samples(int64_t n) const {
  const int64_t cs = st_->hp.chunk_samples();
  const int64_t padded = (std::max<int64_t>(n, 1) + cs - 1) / cs * cs;
  return std::max(padded, st_->hp.window_samples());
}

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
      st.process_pending_chunk(trace, n_tok);
      const double* slot = st.pool + ((st.n_chunks - 1) % st.hp.window_chunks) * D;
      for (int32_t d = 0; d < D; ++d) sum[d] += slot[d];
    }
  } else {
    // whole clip per layer (the backward EMA looks ahead)
    std::fill(st.clip, st.clip + st.context, 0.0f);
    for (int64_t j = 0; j < total; ++j) st.clip[st.context + j] = sample(j);
    st.embed(st.clip, n_tok, st.x);
    st.forward_span(n_tok, trace, n_tok, 0);
    for (int64_t t = 0; t < n_tok; ++t) {
      for (int32_t d = 0; d < D; ++d) sum[d] += st.x[t * D + d];
    }
  }
  st.head(sum, n_tok, logits);
  st.contain_non_finite(logits);
  st.reset_stream();
  return Status::ok;
}

Status Session::self_test(float* max_abs_diff) {
  const Model& m = *model_;
  if (max_abs_diff) *max_abs_diff = 0.0f;
  if (m.self_test_input().empty()) return Status::invalid_argument;
  const int32_t nc = m.hparams().n_classes;
  float* out = st_->logits;  // the window logits buffer is free between pushes
  Status s = classify_clip(m.self_test_input().data(), int64_t(m.self_test_input().size()), out);
  if (s != Status::ok) return s;
  float worst = 0.0f;
  for (int32_t i = 0; i < nc; ++i) {
    const float d = std::fabs(out[i] - m.self_test_logits()[size_t(i)]);
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  if (max_abs_diff) *max_abs_diff = worst;
  return worst <= m.self_test_tolerance() ? Status::ok : Status::self_test_failed;
}

int64_t Session::memory_bytes() const { return int64_t(st_->block_bytes); }

const SessionStats& Session::stats() const { return st_->stats; }

void set_blas_threads(int n) { openblas_set_num_threads(n > 0 ? n : 1); }

}  // namespace mega
