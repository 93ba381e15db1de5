// The CUDA backend's forward pass, written once against an Ops object that
// either launches kernels and cuBLAS on a stream (device_session.cpp) or runs
// the same element functions and a BLAS on the host (host_ops.h), so the
// host build tests the orchestration, layouts and GEMM shapes the GPU runs.
// The order of operations follows the CPU session (runtime/src/session.cpp),
// except that each step runs on all chunks of all streams at once.
#pragma once

#include <cmath>

#include "plan.h"

namespace mega::gpu {

// One cuBLAS-style GEMM (column-major, C = alpha op(A) op(B), beta 0),
// strided-batched when batch > 1. Pointers are in the storage type.
struct GemmDesc {
  bool trans_a = false;  // B is never transposed here
  float alpha = 1.0f;
  int32_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int32_t batch = 1;
};

inline GemmDesc gemm_desc(bool trans_a, int32_t m, int32_t n, int32_t k, const void* a, int64_t lda, int64_t stride_a,
                          const void* b, int64_t ldb, int64_t stride_b, void* c, int64_t ldc, int64_t stride_c,
                          int64_t batch) {
  GemmDesc g;
  g.trans_a = trans_a;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = a;
  g.lda = lda;
  g.stride_a = stride_a;
  g.b = b;
  g.ldb = ldb;
  g.stride_b = stride_b;
  g.c = c;
  g.ldc = ldc;
  g.stride_c = stride_c;
  g.batch = int32_t(batch);
  return g;
}

// y (rows, n_out) = x (rows, n_in) w^T, all row-major: column-major
// y^T = w x^T, with w read as the (n_in, n_out) column-major matrix w^T.
inline GemmDesc linear_gemm(const LinearDev& w, const void* x, int64_t rows, void* y) {
  return gemm_desc(true, w.n_out, int32_t(rows), w.n_in, w.w, w.n_in, 0, x, w.n_in, 0, y, w.n_out, 0, 1);
}

// Per chunk: scores (c, c) = q (c, z) k^T, row-major; column-major that is
// scores^T = k q^T: A = k read as (z, c) and transposed, B = q as (z, c).
inline GemmDesc scores_gemm(const void* q, const void* k, void* scores, int32_t c, int32_t z, int64_t chunks) {
  const int64_t cz = int64_t(c) * z;
  return gemm_desc(true, c, c, z, k, z, cz, q, z, cz, scores, c, int64_t(c) * c, chunks);
}

// Per chunk: o (c, h) = a (c, c) v (c, h), row-major; column-major
// o^T = v^T a^T with v as (h, c) and a as (c, c), neither transposed.
inline GemmDesc values_gemm(const void* a, const void* v, void* o, int32_t c, int32_t h, int64_t chunks) {
  const int64_t ch = int64_t(c) * h;
  return gemm_desc(false, h, c, c, v, h, ch, a, c, int64_t(c) * c, o, h, ch, chunks);
}

#define MEGA_GPU_TRY(expr)                 \
  do {                                     \
    const ::mega::Status s_ = (expr);      \
    if (s_ != ::mega::Status::ok) return s_; \
  } while (0)

// What one forward covers: n_streams spans of n_tok tokens (a multiple of C).
struct Span {
  int32_t n_streams = 1;
  int64_t n_tok = 0;
  bool streaming = true;           // causal with state (a step) or a whole clip
  const float* samples = nullptr;  // n_streams blocks of sample_stride: [ctx | n_tok * s]
  int64_t sample_stride = 0;
  const int64_t* chunk_index = nullptr;  // per stream (zeros for clips)
  int64_t rows() const { return int64_t(n_streams) * n_tok; }
};

template <typename T, typename Ops>
Status norm_into(Ops& ops, const NormDev& w, const T* x, T* y, int64_t rows, int32_t d) {
  NormParams<T> p;
  p.w = w;
  p.x = x;
  p.y = y;
  p.rows = rows;
  p.d = d;
  return ops.norm(p);
}

template <typename T, typename Ops>
Status linear_bias_act(Ops& ops, const LinearDev& w, const T* x, int64_t rows, T* y, Activation act) {
  MEGA_GPU_TRY(ops.gemm(linear_gemm(w, x, rows, y)));
  BiasActParams<T> p;
  p.y = y;
  p.bias = w.b;
  p.rows = rows;
  p.cols = w.n_out;
  p.act = act;
  return ops.bias_act(p);
}

// EMA of xn into mx, with the epilogue mx = silu(ema + omega * xn).
template <typename T, typename Ops>
Status ema_forward(Ops& ops, const Dims& dm, const Capacity& cap, const Buffers<T>& bf, const LayerDev& L,
                   int32_t layer, const Span& sp, const T* xn) {
  EmaParams<T> p;
  p.x = xn;
  p.y = bf.mx;
  p.a = L.ema.a;
  p.g = L.ema.g;
  p.qk = L.ema.qk;
  p.out = L.ema.out;
  p.omega = L.ema.omega;
  p.n_streams = sp.n_streams;
  p.n_tok = sp.n_tok;
  p.d = dm.d;
  p.n = dm.n;
  p.k = dm.k;
  p.chunk_index = sp.chunk_index;
  if (sp.streaming) {
    p.mode = EmaMode::stream;
    p.ring = bf.ring_of(dm, cap, layer);
    p.h = dm.k == 0 ? bf.h_of(dm, cap, layer) : nullptr;
    return ops.ema(p);
  }
  p.mode = EmaMode::forward;
  p.epilogue = !dm.bidir;
  MEGA_GPU_TRY(ops.ema(p));
  if (!dm.bidir) return Status::ok;
  p.mode = EmaMode::backward;
  p.row_offset = dm.d;
  p.accumulate = true;
  p.epilogue = true;
  return ops.ema(p);
}

// Chunk attention over all chunks of the span, cap.group chunks per batch:
// o = f(q k^T * scale + bias) v.
template <typename T, typename Ops>
Status attention_forward(Ops& ops, const Dims& dm, const Capacity& cap, const Buffers<T>& bf, const LayerDev& L,
                         int64_t rows) {
  const int64_t chunks = rows / dm.c;
  const float scale = dm.fn == AttentionFn::softmax ? 1.0f / std::sqrt(float(dm.z)) : 1.0f / float(dm.c);
  const bool fold_scale = sizeof(T) < sizeof(float);
  for (int64_t c0 = 0; c0 < chunks; c0 += cap.group) {
    const int64_t n = chunks - c0 < cap.group ? chunks - c0 : cap.group;
    const int64_t r0 = c0 * dm.c;
    // float16 storage: the scale goes into the GEMM, so what is stored is the
    // scaled score (a raw q.k of a long chunk overflows float16: 65504)
    GemmDesc sg = scores_gemm(bf.q + r0 * dm.z, bf.k + r0 * dm.z, bf.scores, dm.c, dm.z, n);
    if (fold_scale) sg.alpha = scale;
    MEGA_GPU_TRY(ops.gemm(sg));
    ScoreParams<T> sp;
    sp.scores = bf.scores;
    sp.rel_bias = L.rel_bias;
    sp.n_chunks = n;
    sp.c = dm.c;
    sp.fn = dm.fn;
    sp.scale = fold_scale ? 1.0f : scale;
    MEGA_GPU_TRY(ops.scores(sp));
    if (dm.fn == AttentionFn::softmax) MEGA_GPU_TRY(ops.softmax(sp));
    MEGA_GPU_TRY(ops.gemm(values_gemm(bf.scores, bf.v + r0 * dm.h, bf.o + r0 * dm.h, dm.c, dm.h, n)));
  }
  return Status::ok;
}

template <typename T, typename Ops>
Status layer_forward(Ops& ops, const Dims& dm, const Capacity& cap, const Buffers<T>& bf, const LayerDev& L,
                     int32_t layer, const Span& sp) {
  const int64_t rows = sp.rows();
  // postnorm reads x itself: nothing writes x before the residual, by which
  // time the EMA and the v projection are done with it
  const T* xn = bf.x;
  if (dm.prenorm) {
    MEGA_GPU_TRY(norm_into(ops, L.norm, bf.x, bf.xn, rows, dm.d));
    xn = bf.xn;
  }
  MEGA_GPU_TRY(linear_bias_act(ops, L.v_proj, xn, rows, bf.v, dm.act));
  MEGA_GPU_TRY(ema_forward(ops, dm, cap, bf, L, layer, sp, xn));
  MEGA_GPU_TRY(ops.gemm(linear_gemm(L.mx_proj, bf.mx, rows, bf.base)));
  SplitParams<T> split;
  split.base = bf.base;
  split.bias = L.mx_proj.b;
  split.gamma = L.qk_gamma;
  split.beta = L.qk_beta;
  split.q = bf.q;
  split.k = bf.k;
  split.rows = rows;
  split.g = dm.gate();
  MEGA_GPU_TRY(ops.split(split));
  MEGA_GPU_TRY(attention_forward(ops, dm, cap, bf, L, rows));
  OutGateParams<T> og;
  og.o = bf.o;
  og.base = bf.base;
  og.rows = rows;
  og.g = dm.gate();
  MEGA_GPU_TRY(ops.out_gate(og));
  MEGA_GPU_TRY(ops.gemm(linear_gemm(L.h_proj, bf.o, rows, bf.hb)));
  ResidualParams<T> rp;
  rp.x = bf.x;
  rp.hb = bf.hb;
  rp.bh = L.h_proj.b;
  rp.base = bf.base;
  rp.rows = rows;
  rp.g = dm.gate();
  rp.act = dm.act;
  MEGA_GPU_TRY(ops.residual(rp));
  if (!dm.prenorm) MEGA_GPU_TRY(norm_into(ops, L.norm, bf.x, bf.x, rows, dm.d));
  if (!L.has_ffn) return Status::ok;
  const T* t_in = bf.x;
  if (dm.prenorm) {
    MEGA_GPU_TRY(norm_into(ops, L.ffn_norm, bf.x, bf.xn, rows, dm.d));
    t_in = bf.xn;
  }
  MEGA_GPU_TRY(linear_bias_act(ops, L.fc1, t_in, rows, bf.ffn, dm.act));
  MEGA_GPU_TRY(ops.gemm(linear_gemm(L.fc2, bf.ffn, rows, bf.hb)));
  AddResidualParams<T> ar;
  ar.x = bf.x;
  ar.y = bf.hb;
  ar.bias = L.fc2.b;
  ar.rows = rows;
  ar.cols = dm.d;
  MEGA_GPU_TRY(ops.add_residual(ar));
  if (!dm.prenorm) MEGA_GPU_TRY(norm_into(ops, L.ffn_norm, bf.x, bf.x, rows, dm.d));
  return Status::ok;
}

// Embedding, all layers, the final norm and the pooled sums of a span.
template <typename T, typename Ops>
Status encode(Ops& ops, const Dims& dm, const Capacity& cap, const Buffers<T>& bf, const WeightsDev& w,
              const Span& sp) {
  EmbedParams<T> ep;
  ep.samples = sp.samples;
  ep.stream_stride = sp.sample_stride;
  ep.w = w.embed_w;
  ep.g = w.embed_g;
  ep.b = w.embed_b;
  ep.eps = dm.patch_eps;
  ep.x = bf.x;
  ep.n_streams = sp.n_streams;
  ep.n_tok = sp.n_tok;
  ep.d = dm.d;
  ep.k = dm.patch_k;
  ep.s = dm.patch_s;
  MEGA_GPU_TRY(ops.embed(ep));
  for (int32_t l = 0; l < dm.n_layers; ++l) MEGA_GPU_TRY(layer_forward(ops, dm, cap, bf, w.layers[size_t(l)], l, sp));
  if (dm.has_final_norm) MEGA_GPU_TRY(norm_into(ops, w.final_norm, bf.x, bf.x, sp.rows(), dm.d));
  PoolParams<T> pp;
  pp.x = bf.x;
  pp.pool = bf.pool;
  pp.total = bf.total;
  pp.chunk_index = sp.chunk_index;
  pp.n_streams = sp.n_streams;
  pp.n_tok = sp.n_tok;
  pp.d = dm.d;
  pp.w = dm.w;
  return ops.pool(pp);
}

// Logits of every stream: over its window (window = true, tokens_per_chunk =
// C) or over everything since its chunk 0.
template <typename T, typename Ops>
Status head_forward(Ops& ops, const Dims& dm, const Buffers<T>& bf, const WeightsDev& w, int32_t n_streams,
                    const int64_t* chunk_index, bool window, int64_t tokens_per_chunk, float* logits) {
  HeadParams hp;
  hp.pool = bf.pool;
  hp.total = bf.total;
  hp.chunk_index = chunk_index;
  hp.window = window;
  hp.n_streams = n_streams;
  hp.d = dm.d;
  hp.w = dm.w;
  hp.n_tok = tokens_per_chunk;
  hp.layers = w.head;
  hp.n_layers = w.n_head;
  hp.act = dm.cls_act;
  hp.scratch = bf.head_scratch;
  hp.scratch_dim = dm.d > dm.cdim ? dm.d : dm.cdim;
  hp.logits = logits;
  return ops.head(hp);
}

}  // namespace mega::gpu
