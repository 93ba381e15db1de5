// SPDX-License-Identifier: Apache-2.0
// The CPU backend's ops (cpu_ops.h).
#include "cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "arena.h"

namespace mega::cpu {

namespace {

// Chunks shorter than this run on the calling thread alone: waking a worker
// costs more than their share of the work (the demo model's 25-token chunks
// took 3x longer on two threads).
constexpr int32_t kMinParallelChunk = 128;


}  // namespace

CpuOps::~CpuOps() { std::free(block_); }

}  // namespace mega::cpu

namespace mega {

std::unique_ptr<StreamOps> create_cpu_stream_ops(const HParams& hp, const ModelWeights& w, KernelImpl impl,
                                                   int32_t n_threads, int64_t max_span_tokens,
                                                   std::shared_ptr<const cpu::PackedWeights> packed) {
  std::unique_ptr<cpu::CpuOps> ops(new (std::nothrow) cpu::CpuOps());
  if (!ops || !ops->init(hp, w, impl == KernelImpl::optimized, n_threads, max_span_tokens, std::move(packed))) {
    return nullptr;
  }
  return ops;
}

}  // namespace mega

namespace mega::cpu {

template <typename A>
void CpuOps::layout(A& a) {
  const int64_t D = hp_.embed_dim, H = hp_.hidden_dim, Z = hp_.z_dim, C = hp_.chunk_size;
  const int64_t F = hp_.ffn_hidden_dim, N = hp_.n_dim, K = hp_.truncation;
  for (LayerState& ls : layers_) {
    ls.h = a.template take<double>(D * N);
    ls.ring = a.template take<float>(K * D);
    const int64_t rows = bidir_ ? 2 * D : D;
    ls.ref_kernel = !optimized_ && K > 0 ? a.template take<double>(rows * K) : nullptr;
  }
  x_ = a.template take<float>(span_tokens_ * D);
  xn_ = a.template take<float>(span_tokens_ * D);
  mx_ = a.template take<float>(span_tokens_ * D);
  v_ = a.template take<float>(C * H);
  base_ = a.template take<float>(C * (2 * D + Z + H));
  q_ = a.template take<float>(C * Z);
  k_ = a.template take<float>(C * Z);
  scores_ = fused_attention_ ? nullptr : a.template take<float>(C * C);
  o_ = a.template take<float>(C * H);
  hb_ = a.template take<float>(C * D);
  ffn_ = a.template take<float>(C * std::max<int64_t>(F, 1));
  ema_scratch_ = a.template take<double>(N);
  attn_partial_ = fused_attention_ ? a.template take<float>(attention_partial_floats(int32_t(H))) : nullptr;
  for (int32_t t = 0; t < n_threads_ && simd_; ++t) {
    attn_scratch_[t] = fused_attention_ ? a.template take<float>(attention_scratch_floats(int32_t(C), int32_t(Z)))
                                        : nullptr;
    simd_ema_scratch_[t] = a.template take<double>(ema_scratch_doubles(int32_t(N)));
  }
  sum_ = a.template take<double>(D);
  embed_mean_ = w_->embed_m0 ? a.template take<float>(D) : nullptr;
  embed_filt_ = a.template take<float>(kEmbedBlock * int64_t(w_->embed_filters.n_out));
  const bool teacher = w_->has_teacher;
  embed_win_ = a.template take<float>(teacher ? span_tokens_ * teacher::kEmbedding
                                              : kEmbedBlock * int64_t(hp_.patch_kernel));
  const int64_t context = hp_.patch_kernel - hp_.patch_stride;
  teacher_in_ = teacher ? a.template take<float>(std::max(span_tokens_ * hp_.patch_stride, context)) : nullptr;
  mel_power_ = w_->embed_bands ? a.template take<float>(hp_.patch_bins) : nullptr;
  mel_log_ = w_->embed_bands ? a.template take<float>(hp_.patch_bands) : nullptr;
  head_a_ = a.template take<float>(std::max<int64_t>(D, hp_.classifier_dim));
  head_b_ = a.template take<float>(std::max<int64_t>(D, hp_.classifier_dim));
}

bool CpuOps::init(const HParams& hp, const ModelWeights& w, bool optimized, int32_t n_threads,
                  int64_t max_span_tokens, std::shared_ptr<const PackedWeights> packed) {
  hp_ = hp;
  w_ = &w;
  optimized_ = optimized;
  math_ = optimized ? KernelImpl::optimized : KernelImpl::reference;
  if (optimized) {
    simd_ = &simd_kernels();
    fused_attention_ = hp.attention_fn != AttentionFn::softmax;
    if (!packed) {
      packed = PackedWeights::create(w);
      if (!packed) return false;
      own_packed_bytes_ = packed->bytes();
    }
    packed_ = std::move(packed);
  }
  n_threads_ = hp.chunk_size < kMinParallelChunk ? 1 : n_threads;
  bidir_ = hp.ema_direction == EmaDirection::bidirectional;
  span_tokens_ = max_span_tokens;
  layers_.resize(size_t(hp.n_layers));
  Arena sizing(nullptr);
  layout(sizing);
  block_bytes_ = sizing.size();
  void* block = nullptr;
  if (::posix_memalign(&block, 64, block_bytes_ ? block_bytes_ : 64) != 0) return false;
  block_ = static_cast<uint8_t*>(block);
  std::memset(block_, 0, block_bytes_);
  Arena carve(block_);
  layout(carve);
  const char* why = nullptr;
  if (w.has_teacher && teacher::TeacherFrontEnd::create(w.teacher, math_, &front_, &why) != Status::ok) return false;
  clear_state();
  if (!optimized && hp.truncation > 0) {
    for (size_t l = 0; l < layers_.size(); ++l) ema_lag_kernel(w.layers[l].ema, layers_[l].ref_kernel);
  }
  return workers_.start(n_threads_);
}

void CpuOps::clear_state() {
  const int64_t D = hp_.embed_dim, N = hp_.n_dim, K = hp_.truncation;
  for (LayerState& ls : layers_) {
    std::fill(ls.h, ls.h + D * N, 0.0);
    std::fill(ls.ring, ls.ring + K * D, 0.0f);
  }
  if (embed_mean_) std::copy(w_->embed_m0, w_->embed_m0 + D, embed_mean_);
  if (front_) seed_teacher();
}

// A stream starts after digital silence: the front end is given the first
// token's context as zeros (as the stream's pending samples hold it), so that
// each span of n tokens gives n embeddings.
void CpuOps::seed_teacher() {
  const int64_t context = hp_.patch_kernel - hp_.patch_stride;
  std::fill(teacher_in_, teacher_in_ + context, 0.0f);
  front_->reset();
  int64_t made = 0;
  front_->push(teacher_in_, context, nullptr, 0, &made);  // completes no window (kTokenSpan)
}

const NormWeights& CpuOps::norm_weights(NormSite site, int32_t layer) const {
  if (site == NormSite::final) return w_->final_norm;
  const LayerWeights& L = w_->layers[size_t(layer)];
  return site == NormSite::layer ? L.norm : L.ffn_norm;
}

const PackedLinear& CpuOps::packed(int32_t layer, PackedLinear PackedWeights::Layer::*proj) const {
  static const PackedLinear none;
  return packed_ ? packed_->layers[size_t(layer)].*proj : none;
}

void CpuOps::linear(const float* in, int64_t n, const LinearWeights& w, const PackedLinear& pw, float* out) const {
  LinearParams p;
  p.x = in;
  p.n = n;
  p.w = &w;
  p.y = out;
  p.packed = pw.w;
  p.ld = pw.ld;
  if (!optimized_) {
    linear_ref(p);
  } else if (p.packed) {
    simd_->linear(p);
  } else {
    linear_blas(p);
  }
}

// Row tasks of a chunk: about 8 (enough to balance two threads when one is
// preempted), whole multiples of 16 rows.
template <typename F>
void CpuOps::for_rows(int64_t r0, int64_t rows, F&& f) {
  const int64_t C = hp_.chunk_size;
  const int64_t step = std::max<int64_t>(16, (C + 127) / 128 * 16);
  const int32_t n_tasks = int32_t((C + step - 1) / step);
  for (int64_t c0 = r0; c0 < r0 + rows; c0 += C) {
    auto task = [&](int32_t t, int32_t) { f(c0 + t * step, c0 + std::min<int64_t>(C, (t + 1) * step)); };
    workers_.run(n_tasks, task);
  }
}

// kernel(params, unit, unit + 1, scratch) for units [0, n_units) (query
// blocks, channel groups), one task each, with each thread's scratch.
template <typename P, typename S>
void CpuOps::run_units(const P& params, int32_t n_units, void (*kernel)(const P&, int32_t, int32_t, S*),
                       S* const* scratch) {
  auto task = [&](int32_t unit, int32_t thread) { kernel(params, unit, unit + 1, scratch[thread]); };
  workers_.run(n_units, task);
}

// Tokens of x from scaled samples laid out as [k - s context | n_tok * s],
// kEmbedBlock tokens at a time: first every filter's output for each token
// (embed_rows), then the features from them (embed_token). With a running
// mean (PatchNorm), a stream carries it from span to span; a clip (not
// streaming) starts it afresh.
Status CpuOps::embed(const Span& span) {
  if (front_) return embed_teacher(span);
  const int32_t D = hp_.embed_dim;
  float* mean = embed_mean_;
  if (mean && !span.streaming) std::copy(w_->embed_m0, w_->embed_m0 + D, mean);
  for (int64_t j0 = 0; j0 < span.n_tok; j0 += kEmbedBlock) {
    const int64_t n = std::min<int64_t>(kEmbedBlock, span.n_tok - j0);
    embed_windows(span.samples + j0 * hp_.patch_stride, n);
    embed_rows(embed_win_, n, x_ + j0 * D);
  }
  return Status::ok;
}

// The teacher's front end: the span's new samples (after the context, which
// the front end holds itself) at int16 scale give one embedding per token,
// projected to x. A stream's spans come in order from clear_state() on.
Status CpuOps::embed_teacher(const Span& span) {
  const int64_t n = span.n_tok * hp_.patch_stride;
  const float* s = span.samples + (hp_.patch_kernel - hp_.patch_stride);
  for (int64_t i = 0; i < n; ++i) teacher_in_[i] = s[i] * teacher::kInputScale;
  int64_t made = 0;
  MEGA_TRY(front_->push(teacher_in_, n, embed_win_, span.n_tok, &made));
  for (int64_t j0 = 0; j0 < made; j0 += kEmbedBlock) {
    const int64_t m = std::min<int64_t>(kEmbedBlock, made - j0);
    embed_rows(embed_win_ + j0 * teacher::kEmbedding, m, x_ + j0 * hp_.embed_dim);
  }
  return Status::ok;
}

// n rows of embed_filters' input through it into embed_filt_, then each
// token's features into x (n x D).
void CpuOps::embed_rows(const float* rows, int64_t n, float* x) {
  static const PackedLinear none;
  linear(rows, n, w_->embed_filters, packed_ ? packed_->embed_filters : none, embed_filt_);
  const int32_t F = w_->embed_filters.n_out;
  for (int64_t j = 0; j < n; ++j) embed_token(embed_filt_ + j * F, x + j * hp_.embed_dim);
}

// embed_win_ (n x k): the window of token j, which starts at samples + j * s,
// as row j (embed_rows then runs every filter over each: the reference
// kernel's dot products in index order, or the packed SIMD projection).
void CpuOps::embed_windows(const float* samples, int64_t n) {
  const int32_t kk = hp_.patch_kernel, s = hp_.patch_stride;
  for (int64_t j = 0; j < n; ++j) std::copy(samples + j * s, samples + j * s + kk, embed_win_ + j * kk);
}

// One token's features xt (D) from its filter outputs f (F):
//   linear:    x_d = f_d + b_d
//   log power: p_d = log(f_d^2 + f_{D+d}^2 + eps), less its running mean if
//              any; x_d = g_d * p_d + b_d
//   log mel:   the P bins' powers f_i^2 + f_{P+i}^2, the bands' log energies
//              e_b = log(sum_i M_bi p_i + eps), x_d = sum_b mix_db e_b + b_d.
// Each sum runs in index order from zero (the CUDA kernels skip M's zeros,
// which adds the same +0 terms).
void CpuOps::embed_token(const float* f, float* xt) {
  const int32_t D = hp_.embed_dim;
  if (w_->embed_bands) {
    const int32_t P = hp_.patch_bins, B = hp_.patch_bands;
    for (int32_t i = 0; i < P; ++i) mel_power_[i] = f[i] * f[i] + f[P + i] * f[P + i];
    for (int32_t b = 0; b < B; ++b) {
      const float* m = w_->embed_bands + int64_t(b) * P;
      float acc = 0.0f;
      for (int32_t i = 0; i < P; ++i) acc += m[i] * mel_power_[i];
      mel_log_[b] = std::log(acc + hp_.patch_log_eps);
    }
    for (int32_t d = 0; d < D; ++d) {
      const float* mix = w_->embed_mix + int64_t(d) * B;
      float acc = 0.0f;
      for (int32_t b = 0; b < B; ++b) acc += mix[b] * mel_log_[b];
      xt[d] = acc + w_->embed_b[d];
    }
    return;
  }
  if (w_->embed_g == nullptr) {
    for (int32_t d = 0; d < D; ++d) xt[d] = f[d] + w_->embed_b[d];
    return;
  }
  float* mean = embed_mean_;
  const float decay = hp_.patch_norm_decay;
  for (int32_t d = 0; d < D; ++d) {
    float p = std::log(f[d] * f[d] + f[D + d] * f[D + d] + hp_.patch_log_eps);
    if (mean) {
      mean[d] += decay * (p - mean[d]);
      p -= mean[d];
    }
    xt[d] = w_->embed_g[d] * p + w_->embed_b[d];
  }
}

Status CpuOps::norm(NormSite site, int32_t layer, Act in, Act out, int64_t r0, int64_t rows) {
  const NormWeights& nw = norm_weights(site, layer);
  const int32_t D = hp_.embed_dim;
  const float* src = act(in);
  float* dst = act(out);
  for_rows(r0, rows, [&](int64_t t0, int64_t t1) { norm_apply(nw, src + t0 * D, dst + t0 * D, t1 - t0, D); });
  return Status::ok;
}

Status CpuOps::ema(int32_t layer, Act in, const Span& span) {
  const LayerWeights& L = w_->layers[size_t(layer)];
  LayerState& ls = layers_[size_t(layer)];
  const float* xin = act(in);
  EmaParams ep;
  ep.w = &L.ema;
  ep.d = hp_.embed_dim;
  ep.n = span.n_tok;
  ep.x = xin;
  ep.y = mx_;
  ep.h = ls.h;
  ep.ring = ls.ring;
  ep.tokens_seen = span.streaming ? span.chunk_index[0] * hp_.chunk_size : 0;
  ep.ref_kernel = ls.ref_kernel;
  ep.scratch = ema_scratch_;
  if (bidir_) {
    optimized_ ? ema_bidir_fast(ep) : ema_bidir_ref(ep);
  } else if (!optimized_) {
    ema_causal_ref(ep);
  } else {
    const int32_t group = simd_->ema_group;
    run_units(ep, (hp_.embed_dim + group - 1) / group, simd_->ema_causal, simd_ema_scratch_);
  }
  // mx = silu(EMA + omega * in)
  const int64_t D = hp_.embed_dim;
  for_rows(0, span.rows(), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t d = 0; d < D; ++d) mx_[t * D + d] += L.ema.omega[d] * xin[t * D + d];
    }
    vec_silu(math_, mx_ + t0 * D, mx_ + t0 * D, (t1 - t0) * D);
  });
  return Status::ok;
}

Status CpuOps::gate_inputs(int32_t layer, Act in, int64_t r0, int64_t rows) {
  const LayerWeights& L = w_->layers[size_t(layer)];
  const int64_t D = hp_.embed_dim, H = hp_.hidden_dim, Z = hp_.z_dim;
  const int64_t W = 2 * D + Z + H;
  const float* xin = act(in) + r0 * D;
  const float* mxc = mx_ + r0 * D;
  for_rows(0, rows, [&](int64_t t0, int64_t t1) {
    const int64_t n = t1 - t0;
    linear(xin + t0 * D, n, L.v_proj, packed(layer, &PackedWeights::Layer::v_proj), v_ + t0 * H);
    activation_apply(math_, hp_.activation, v_ + t0 * H, n * H);
    linear(mxc + t0 * D, n, L.mx_proj, packed(layer, &PackedWeights::Layer::mx_proj), base_ + t0 * W);
    for (int64_t t = t0; t < t1; ++t) {
      float* b = base_ + t * W;
      vec_sigmoid(math_, b, b, D);          // u
      vec_silu(math_, b + D, b + D, Z + H);  // z, r
      for (int64_t i = 0; i < Z; ++i) {
        q_[t * Z + i] = b[D + i] * L.qk_gamma[i] + L.qk_beta[i];
        k_[t * Z + i] = b[D + i] * L.qk_gamma[Z + i] + L.qk_beta[Z + i];
      }
    }
  });
  return Status::ok;
}

Status CpuOps::attention(int32_t layer, int64_t r0, int64_t rows) {
  AttentionParams ap;
  ap.q = q_;
  ap.k = k_;
  ap.v = v_;
  ap.rel_pos_bias = w_->layers[size_t(layer)].rel_pos_bias;
  ap.chunk = hp_.chunk_size;
  ap.c = hp_.chunk_size;
  ap.z = hp_.z_dim;
  ap.hdim = hp_.hidden_dim;
  ap.fn = hp_.attention_fn;
  ap.scores = scores_;
  ap.o = o_;
  if (!optimized_) {
    attention_ref(ap);
  } else if (!fused_attention_) {
    attention_blas(ap, math_);
  } else {
    ap.partial = attn_partial_;
    run_units(ap, attention_units(*simd_, hp_.chunk_size), simd_->attention, attn_scratch_);
    attention_finish(*simd_, ap);
  }
  return Status::ok;
}

Status CpuOps::gate_output(int32_t layer, int64_t r0, int64_t rows) {
  const LayerWeights& L = w_->layers[size_t(layer)];
  const int64_t D = hp_.embed_dim, H = hp_.hidden_dim, Z = hp_.z_dim;
  const int64_t W = 2 * D + Z + H;
  float* xc = x_ + r0 * D;
  for_rows(0, rows, [&](int64_t t0, int64_t t1) {
    const int64_t n = t1 - t0;
    for (int64_t t = t0; t < t1; ++t) {
      const float* r = base_ + t * W + D + Z;
      for (int64_t i = 0; i < H; ++i) o_[t * H + i] *= r[i];
    }
    linear(o_ + t0 * H, n, L.h_proj, packed(layer, &PackedWeights::Layer::h_proj), hb_ + t0 * D);
    for (int64_t t = t0; t < t1; ++t) {
      const float* hx = base_ + t * W + D + Z + H;
      for (int64_t i = 0; i < D; ++i) hb_[t * D + i] += hx[i];
    }
    activation_apply(math_, hp_.activation, hb_ + t0 * D, n * D);
    for (int64_t t = t0; t < t1; ++t) {
      const float* u = base_ + t * W;
      for (int64_t i = 0; i < D; ++i) {
        const float res = xc[t * D + i];
        xc[t * D + i] = res + u[i] * (hb_[t * D + i] - res);
      }
    }
  });
  return Status::ok;
}

Status CpuOps::ffn(int32_t layer, Act in, int64_t r0, int64_t rows) {
  const LayerWeights& L = w_->layers[size_t(layer)];
  const int64_t D = hp_.embed_dim, F = hp_.ffn_hidden_dim;
  const float* fin = act(in) + r0 * D;
  float* xc = x_ + r0 * D;
  for_rows(0, rows, [&](int64_t t0, int64_t t1) {
    const int64_t n = t1 - t0;
    linear(fin + t0 * D, n, L.fc1, packed(layer, &PackedWeights::Layer::fc1), ffn_ + t0 * F);
    activation_apply(math_, hp_.activation, ffn_ + t0 * F, n * F);
    linear(ffn_ + t0 * F, n, L.fc2, packed(layer, &PackedWeights::Layer::fc2), hb_ + t0 * D);
    for (int64_t i = t0 * D; i < t1 * D; ++i) xc[i] += hb_[i];
  });
  return Status::ok;
}

// The span's tokens summed in token order (one chunk when streaming).
Status CpuOps::pool(const Span& span) {
  const int32_t D = hp_.embed_dim;
  std::fill(sum_, sum_ + D, 0.0);
  for (int64_t t = 0; t < span.rows(); ++t) {
    for (int32_t d = 0; d < D; ++d) sum_[d] += x_[t * D + d];
  }
  return Status::ok;
}

void CpuOps::trace(int32_t slot, const Span& span) {
  if (!trace_) return;
  const int32_t D = hp_.embed_dim;
  float* dst = trace_ + (int64_t(slot) * trace_tokens_ + trace_offset_) * D;
  std::memcpy(dst, x_, sizeof(float) * size_t(span.rows() * D));
}

void CpuOps::head(const double* sum, int64_t n_tok, float* out) {
  const int32_t D = hp_.embed_dim;
  for (int32_t d = 0; d < D; ++d) head_a_[d] = float(sum[d] / double(n_tok));
  float* in = head_a_;
  float* nxt = head_b_;
  for (const LinearWeights& cl : w_->classifier) {
    LinearParams p;
    p.x = in;
    p.n = 1;
    p.w = &cl;
    p.y = nxt;
    linear_ref(p);
    activation_apply(math_, hp_.classifier_activation, nxt, cl.n_out);
    std::swap(in, nxt);
  }
  LinearParams p;
  p.x = in;
  p.n = 1;
  p.w = &w_->projection;
  p.y = out;
  linear_ref(p);
}

}  // namespace mega::cpu
