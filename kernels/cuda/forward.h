// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's ops (runtime/src/core/ops.h): GpuOps runs each step of the one
// forward pass (mega::forward) through a launcher that either launches
// kernels and cuBLAS on a stream (CudaOps, device_plan.h) or runs the
// same element functions and a BLAS on the host (HostOps, host_ops.h), so
// the host build tests the steps, layouts and GEMM shapes the GPU runs. One
// pass covers the whole span: each step runs on all chunks of all streams at
// once.
#pragma once

#include <cmath>

#include "forward_pass.h"
#include "ops.h"
#include "plan.h"
#include "teacher_forward.h"

namespace mega::gpu {

// One cuBLAS-style GEMM (column-major, C = alpha op(A) op(B), beta 0),
// strided-batched when batch > 1. Pointers are in the storage type, except
// where ab_f32 (A and B) or c_f32 (C) say float32.
struct GemmDesc {
  bool trans_a = false;  // B is never transposed here
  bool ab_f32 = false, c_f32 = false;
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

template <typename T, typename Launch>
Status norm_into(Launch& ops, const NormDev& w, const T* x, T* y, int64_t rows, int32_t d, float xs) {
  NormParams<T> p;
  p.w = w;
  p.x = x;
  p.y = y;
  p.rows = rows;
  p.d = d;
  p.xs = xs;
  return ops.norm(p);
}

// x is stored as value / in_scale, y is written as value / out_scale.
template <typename T, typename Launch>
Status linear_bias_act(Launch& ops, const LinearDev& w, const T* x, int64_t rows, T* y, Activation act,
                       float in_scale, float out_scale) {
  MEGA_TRY(ops.gemm(linear_gemm(w, x, rows, y)));
  BiasActParams<T> p;
  p.y = y;
  p.bias = w.b;
  p.rows = rows;
  p.cols = w.n_out;
  p.act = act;
  p.in_scale = in_scale;
  p.out_scale = out_scale;
  return ops.bias_act(p);
}

// EMA of xn into mx, with the epilogue mx = silu(ema + omega * xn).
template <typename T, typename Launch>
Status ema_forward(Launch& ops, const Dims& dm, const Capacity& cap, const Buffers<T>& bf, const LayerDev& L,
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
  p.xs = dm.x_scale;
  p.chunk_index = sp.chunk_index;
  if (sp.streaming) {
    p.mode = EmaMode::stream;
    p.ring = bf.ring_of(dm, cap, layer);
    p.h = dm.k == 0 ? bf.h_of(dm, cap, layer) : nullptr;
    p.hd = dm.k > 0 ? bf.hd_of(dm, cap, layer) : nullptr;  // the recurrent form (ema.cuh)
    return ops.ema(p);
  }
  p.mode = EmaMode::forward;
  p.epilogue = !dm.bidir;
  MEGA_TRY(ops.ema(p));
  if (!dm.bidir) return Status::ok;
  p.mode = EmaMode::backward;
  p.row_offset = dm.d;
  p.accumulate = true;
  p.epilogue = true;
  return ops.ema(p);
}

// Chunk attention over all chunks of the span, cap.group chunks per batch:
// o = f(q k^T * scale + bias) v.
template <typename T, typename Launch>
Status attention_forward(Launch& ops, const Dims& dm, const Capacity& cap, const Buffers<T>& bf, const LayerDev& L,
                         int64_t row0, int64_t rows) {
  const int64_t chunks = rows / dm.c;
  const float scale = dm.fn == AttentionFn::softmax ? 1.0f / std::sqrt(float(dm.z)) : 1.0f / float(dm.c);
  const bool fold_scale = sizeof(T) < sizeof(float);
  for (int64_t c0 = 0; c0 < chunks; c0 += cap.group) {
    const int64_t n = chunks - c0 < cap.group ? chunks - c0 : cap.group;
    const int64_t r0 = row0 + c0 * dm.c;
    // float16 storage: the scale goes into the GEMM, so what is stored is the
    // scaled score (a raw q.k of a long chunk overflows float16: 65504)
    GemmDesc sg = scores_gemm(bf.q + r0 * dm.z, bf.k + r0 * dm.z, bf.scores, dm.c, dm.z, n);
    if (fold_scale) sg.alpha = scale;
    MEGA_TRY(ops.gemm(sg));
    ScoreParams<T> sp;
    sp.scores = bf.scores;
    sp.rel_bias = L.rel_bias;
    sp.n_chunks = n;
    sp.c = dm.c;
    sp.fn = dm.fn;
    sp.scale = fold_scale ? 1.0f : scale;
    MEGA_TRY(ops.scores(sp));
    if (dm.fn == AttentionFn::softmax) MEGA_TRY(ops.softmax(sp));
    GemmDesc vg = values_gemm(bf.scores, bf.v + r0 * dm.h, bf.o + r0 * dm.h, dm.c, dm.h, n);
    vg.c_f32 = true;  // o sums over the chunk: float32 (gating.cuh)
    MEGA_TRY(ops.gemm(vg));
  }
  return Status::ok;
}

// Where an activation of runtime/src/core/ops.h lives in the memory plan (rows x D).
template <typename T>
T* activation(const Buffers<T>& bf, Act a) {
  return a == Act::x ? bf.x : a == Act::xn ? bf.xn : bf.mx;
}

// The steps of runtime/src/core/ops.h over a launcher (CudaOps or HostOps) and the
// backend's memory plan (plan.h). The launcher is named Launch here; its
// methods (gemm, norm, split, ...) are single kernels or GEMMs.
template <typename T, typename Launch>
class GpuOps final : public mega::Ops {
 public:
  GpuOps(Launch& launch, const Dims& dm, const Capacity& cap, const Buffers<T>& bf, const WeightsDev& w)
      : launch_(launch), dm_(dm), cap_(cap), bf_(bf), w_(w) {}

  int64_t pass_rows(const Span& sp) const override { return sp.rows(); }

  Status embed(const Span& sp) override {
    if (dm_.teacher) return teacher_embed(launch_, dm_, cap_, bf_, w_, sp);
    EmbedParams<T> ep;
    ep.samples = sp.samples;
    ep.stream_stride = sp.sample_stride;
    ep.w = w_.embed_w;
    ep.g = w_.embed_g;
    ep.b = w_.embed_b;
    ep.eps = dm_.patch_eps;
    ep.m0 = w_.embed_m0;
    ep.bands = w_.embed_bands;
    ep.mix = w_.embed_mix;
    ep.n_bins = dm_.patch_bins;
    ep.n_bands = dm_.patch_bands;
    ep.mean = bf_.embed_mean;
    ep.power = bf_.embed_power;
    ep.chunk_index = sp.chunk_index;
    ep.streaming = sp.streaming;
    ep.decay = dm_.patch_norm_decay;
    ep.x = bf_.x;
    ep.n_streams = sp.n_streams;
    ep.n_tok = sp.n_tok;
    ep.d = dm_.d;
    ep.k = dm_.patch_k;
    ep.s = dm_.patch_s;
    ep.xs = dm_.x_scale;
    return launch_.embed(ep);
  }

  Status norm(NormSite site, int32_t layer, Act in, Act out, int64_t r0, int64_t rows) override {
    const NormDev& nw = site == NormSite::final ? w_.final_norm
                        : site == NormSite::layer ? w_.layers[size_t(layer)].norm
                                                  : w_.layers[size_t(layer)].ffn_norm;
    return norm_into(launch_, nw, act(in) + r0 * dm_.d, act(out) + r0 * dm_.d, rows, dm_.d, dm_.x_scale);
  }

  Status ema(int32_t layer, Act in, const Span& sp) override {
    return ema_forward(launch_, dm_, cap_, bf_, w_.layers[size_t(layer)], layer, sp, act(in));
  }

  Status gate_inputs(int32_t layer, Act in, int64_t r0, int64_t rows) override {
    const LayerDev& L = w_.layers[size_t(layer)];
    MEGA_TRY(linear_bias_act(launch_, L.v_proj, act(in) + r0 * dm_.d, rows, bf_.v + r0 * dm_.h, dm_.act,
                             dm_.x_scale, 1.0f));
    T* base = bf_.base + r0 * dm_.base_cols();
    MEGA_TRY(launch_.gemm(linear_gemm(L.mx_proj, bf_.mx + r0 * dm_.d, rows, base)));
    SplitParams<T> split;
    split.base = base;
    split.bias = L.mx_proj.b;
    split.gamma = L.qk_gamma;
    split.beta = L.qk_beta;
    split.q = bf_.q + r0 * dm_.z;
    split.k = bf_.k + r0 * dm_.z;
    split.rows = rows;
    split.g = dm_.gate();
    return launch_.split(split);
  }

  Status attention(int32_t layer, int64_t r0, int64_t rows) override {
    return attention_forward(launch_, dm_, cap_, bf_, w_.layers[size_t(layer)], r0, rows);
  }

  Status gate_output(int32_t layer, int64_t r0, int64_t rows) override {
    const LayerDev& L = w_.layers[size_t(layer)];
    T* base = bf_.base + r0 * dm_.base_cols();
    OutGateParams<T> og;
    og.o = bf_.o + r0 * dm_.h;
    og.base = base;
    og.rows = rows;
    og.g = dm_.gate();
    MEGA_TRY(launch_.out_gate(og));
    GemmDesc hg = linear_gemm(L.h_proj, og.o, rows, bf_.hb + r0 * dm_.d);
    hg.ab_f32 = hg.c_f32 = true;  // o * r and h_proj's weights are float32
    MEGA_TRY(launch_.gemm(hg));
    ResidualParams<T> rp;
    rp.x = bf_.x + r0 * dm_.d;
    rp.hb = bf_.hb + r0 * dm_.d;
    rp.bh = L.h_proj.b;
    rp.base = base;
    rp.rows = rows;
    rp.g = dm_.gate();
    rp.act = dm_.act;
    rp.xs = dm_.x_scale;
    return launch_.residual(rp);
  }

  Status ffn(int32_t layer, Act in, int64_t r0, int64_t rows) override {
    const LayerDev& L = w_.layers[size_t(layer)];
    T* hidden = bf_.ffn + r0 * dm_.f;
    float* out = bf_.hb + r0 * dm_.d;
    MEGA_TRY(linear_bias_act(launch_, L.fc1, act(in) + r0 * dm_.d, rows, hidden, dm_.act, dm_.x_scale,
                             dm_.x_scale));
    GemmDesc fg = linear_gemm(L.fc2, hidden, rows, out);
    fg.c_f32 = true;
    MEGA_TRY(launch_.gemm(fg));
    AddResidualParams<T> ar;
    ar.x = bf_.x + r0 * dm_.d;
    ar.y = out;
    ar.bias = L.fc2.b;
    ar.rows = rows;
    ar.cols = dm_.d;
    ar.xs = dm_.x_scale;
    return launch_.add_residual(ar);
  }

  Status pool(const Span& sp) override {
    PoolParams<T> pp;
    pp.x = bf_.x;
    pp.pool = bf_.pool;
    pp.total = bf_.total;
    pp.chunk_index = sp.chunk_index;
    pp.n_streams = sp.n_streams;
    pp.n_tok = sp.n_tok;
    pp.d = dm_.d;
    pp.w = dm_.w;
    pp.xs = dm_.x_scale;
    return launch_.pool(pp);
  }

 private:
  T* act(Act a) const { return activation(bf_, a); }

  Launch& launch_;
  const Dims& dm_;
  const Capacity& cap_;
  const Buffers<T>& bf_;
  const WeightsDev& w_;
};

// The model's forward pass (mega::forward) over a span, on this backend.
template <typename T, typename Launch>
Status encode(Launch& launch, const Model& model, const Dims& dm, const Capacity& cap, const Buffers<T>& bf,
              const WeightsDev& w, const Span& sp) {
  GpuOps<T, Launch> ops(launch, dm, cap, bf, w);
  return mega::forward(ops, model.hparams(), model_weights(model), sp);
}

// Logits of every stream: over its window (window = true, tokens_per_chunk =
// C) or over everything since its chunk 0.
template <typename T, typename Launch>
Status head_forward(Launch& ops, const Dims& dm, const Buffers<T>& bf, const WeightsDev& w, int32_t n_streams,
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
