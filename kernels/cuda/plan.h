// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's memory plan, shared by the device step and its host
// emulation (host_ops.h): model sizes, the activation/state buffers carved
// from one allocation, and the weights packed into another. Plain C++: the
// pointers are device addresses in the step, host addresses in the
// emulation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attention.cuh"
#include "ema.cuh"
#include "embed.cuh"
#include "gating.cuh"
#include "weights.h"
#include "norm.cuh"
#include "pool.cuh"
#include "teacher.cuh"

namespace mega::gpu {

struct Dims {
  int32_t d = 0, h = 0, z = 0, n = 0, f = 0, c = 0, k = 0, w = 0;
  int32_t n_layers = 0, n_classes = 0, cdim = 0;
  int32_t patch_k = 1, patch_s = 1;
  float patch_eps = 0.0f;  // log-power features (WeightsDev::embed_g set)
  bool patch_norm = false;  // log power less its running mean (WeightsDev::embed_m0 set)
  float patch_norm_decay = 0.0f;
  int32_t patch_bins = 0, patch_bands = 0;  // log-mel features (WeightsDev::embed_bands set); 0 otherwise
  int64_t ctx = 0;            // k - s samples of left context per stream
  int64_t chunk_samples = 0;  // C * s
  bool teacher = false;       // PatchFeatures::teacher_embedding (WeightsDev::teacher set)
  bool bidir = false, prenorm = true, has_final_norm = false;
  AttentionFn fn = AttentionFn::laplace;
  Activation act = Activation::silu;
  Activation cls_act = Activation::gelu;
  // The residual stream's scale: x, xn, the FFN hidden layer and v_proj's raw
  // output are stored as value / x_scale (a power of two). 1 in float32; with
  // float16 storage, what the range check (fp16_range.h) chooses so that they
  // fit float16 (16 for the base model).
  float x_scale = 1.0f;
  int32_t base_cols() const { return 2 * d + z + h; }
  GateDims gate() const {
    GateDims g;
    g.d = d;
    g.z = z;
    g.h = h;
    return g;
  }
};

inline Dims make_dims(const HParams& hp, const ModelWeights& md) {
  Dims dm;
  dm.d = hp.embed_dim;
  dm.h = hp.hidden_dim;
  dm.z = hp.z_dim;
  dm.n = hp.n_dim;
  dm.f = hp.ffn_hidden_dim;
  dm.c = hp.chunk_size;
  dm.k = hp.truncation;
  dm.w = hp.window_chunks;
  dm.n_layers = hp.n_layers;
  dm.n_classes = hp.n_classes;
  dm.cdim = hp.classifier_dim;
  dm.patch_k = hp.patch_kernel;
  dm.patch_s = hp.patch_stride;
  dm.patch_eps = hp.patch_log_eps;
  dm.patch_norm = md.embed_m0 != nullptr;
  dm.patch_norm_decay = hp.patch_norm_decay;
  if (md.embed_bands) {
    dm.patch_bins = hp.patch_bins;
    dm.patch_bands = hp.patch_bands;
  }
  dm.teacher = md.has_teacher;
  dm.ctx = hp.patch_kernel - hp.patch_stride;
  dm.chunk_samples = hp.chunk_samples();
  dm.bidir = hp.ema_direction == EmaDirection::bidirectional;
  dm.prenorm = hp.prenorm;
  dm.has_final_norm = md.has_final_norm;
  dm.fn = hp.attention_fn;
  dm.act = hp.activation;
  dm.cls_act = hp.classifier_activation;
  return dm;
}

// Carves one block into 256-byte aligned arrays; run once with base 0 to
// size it (take() then returns null).
class Carver {
 public:
  explicit Carver(uintptr_t base) : base_(base) {}
  template <typename U>
  size_t reserve(int64_t count) {
    off_ = (off_ + 255) & ~size_t(255);
    const size_t at = off_;
    off_ += sizeof(U) * size_t(count > 0 ? count : 0);
    return at;
  }
  template <typename U>
  U* take(int64_t count) {
    const size_t at = reserve<U>(count);
    return base_ ? reinterpret_cast<U*>(base_ + at) : nullptr;
  }
  size_t size() const { return off_; }

 private:
  uintptr_t base_;
  size_t off_ = 0;
};

// What a step is sized for.
struct Capacity {
  int32_t n_streams = 1;
  int64_t rows = 0;        // tokens per forward, all streams: max(n_streams * C, clip tokens)
  int64_t group = 1;       // chunks per attention GEMM batch (scores buffer), <= kMaxGemmBatch
  int64_t clip_tokens = 0; // bidirectional clips (0: none)
  // The teacher's front end (Dims::teacher): tokens per stream a span may
  // have, and streams per pass of the front end (its scratch holds that many
  // streams' frames and activations; a batch of more takes several passes)
  int64_t teacher_tok = 0;
  int32_t teacher_streams = 0;
};

// The front end's scratch for a whole batch is each stream's first layers'
// activations (over 300 KB); beyond this budget it goes in passes.
constexpr int64_t kTeacherBytes = int64_t(256) << 20;

// The frames of a span of n_tok tokens per stream: the 8 frames of each of
// its n_tok + 9 steps (each token's window reads the 10 steps from its own).
inline int64_t teacher_span_frames(int64_t n_tok) {
  return (n_tok + teacher::kWindowSteps - 1) * teacher::kStepFrames;
}

// The frames the embedding graph reads for n_tok tokens: their windows, one
// every kStepFrames frames, as one image; its output has n_tok rows.
inline int32_t teacher_graph_rows(int64_t n_tok) {
  return int32_t((n_tok - 1) * teacher::kStepFrames + teacher::kWindowFrames);
}

// The largest activation of the embedding graph over `rows` frames (floats),
// before its max-pool.
inline int64_t teacher_act_floats(int32_t rows) {
  int64_t most = 0;
  int32_t h = rows, w = teacher::kMel;
  for (const teacher::ConvSpec& s : teacher::kConvSpecs) {
    h = h - s.kh + 1;
    w = w + 2 * s.pad_w - s.kw + 1;
    most = most > int64_t(s.c_out) * h * w ? most : int64_t(s.c_out) * h * w;
    if (s.pool_h) {
      h /= s.pool_h;
      w /= s.pool_w;
    }
  }
  return most;
}

// Bytes of the front end's scratch per stream of n_tok tokens.
inline int64_t teacher_stream_bytes(int64_t n_tok) {
  const int64_t frames = teacher_span_frames(n_tok);
  return frames * (teacher::kBins * 8 + teacher::kMel * (8 + 4)) + 2 * teacher_act_floats(teacher_graph_rows(n_tok)) * 4;
}

// Sizes the front end's passes once cap->rows and n_streams are set.
inline void teacher_capacity(const Dims& dm, Capacity* cap) {
  if (!dm.teacher) return;
  cap->teacher_tok = cap->rows / cap->n_streams;
  const int64_t fit = kTeacherBytes / teacher_stream_bytes(cap->teacher_tok);
  cap->teacher_streams = int32_t(fit < 1 ? 1 : fit < cap->n_streams ? fit : cap->n_streams);
}

// The most GEMMs one strided-batched cuBLAS call is given: the batch maps to
// a grid dimension that stops at 65535.
constexpr int64_t kMaxGemmBatch = 65535;

// Chunks per attention GEMM batch: every chunk of the rows at most, the
// scores of a group within attention_bytes, and kMaxGemmBatch.
inline int64_t attention_group(int64_t rows, int32_t c, int64_t attention_bytes, int64_t elem_bytes) {
  const int64_t per_chunk = int64_t(c) * c * elem_bytes;
  int64_t g = rows / c < attention_bytes / per_chunk ? rows / c : attention_bytes / per_chunk;
  if (g > kMaxGemmBatch) g = kMaxGemmBatch;
  return g < 1 ? 1 : g;
}

template <typename T>
struct Buffers {
  T *x = nullptr, *xn = nullptr, *mx = nullptr, *v = nullptr, *base = nullptr;
  T *q = nullptr, *k = nullptr, *ffn = nullptr, *scores = nullptr;
  // float32 whatever T: the attention output (o, then o * r) and what h_proj
  // and fc2 make of it (hb) exceed float16 on long chunks (gating.cuh)
  float *o = nullptr, *hb = nullptr;
  T* ring = nullptr;          // n_layers x (n_streams, K, d)
  float* h = nullptr;         // n_layers x (n_streams, d, N), untruncated
  double* hd = nullptr;       // n_layers x (n_streams, d, N), truncated: the recurrent EMA's h (ema.cuh)
  double* pool = nullptr;     // (n_streams, W, d)
  double* total = nullptr;    // (n_streams, d)
  float* embed_mean = nullptr;  // (n_streams, d) the log power's running mean (Dims::patch_norm)
  float* embed_power = nullptr; // (rows, d) the log powers before it (Dims::patch_norm); log mel: (rows, bands)
  float* head_scratch = nullptr;
  float* logits = nullptr;    // (n_streams, n_classes)
  int64_t* zero_index = nullptr;  // (n_streams) zeros: the clip path's chunk indices
  float* input = nullptr;     // device copy of a step's samples (discrete GPUs)
  int64_t* input_index = nullptr;
  float* clip = nullptr;      // a clip's samples (bidirectional path)
  // the teacher's front end, for Capacity::teacher_streams streams at a time
  double* t_power = nullptr;  // (frames, kBins)
  double* t_db = nullptr;     // (frames, kMel)
  float* t_frames = nullptr;  // (frames, kMel) floored and scaled
  float* t_act = nullptr;     // (streams, teacher_act_floats) two activations, ping-pong
  float* t_next = nullptr;
  void* workspace = nullptr;  // cuBLAS
  size_t workspace_bytes = 0;

  T* ring_of(const Dims& dm, const Capacity& cap, int32_t layer) const {
    return ring + int64_t(layer) * cap.n_streams * dm.k * dm.d;
  }
  float* h_of(const Dims& dm, const Capacity& cap, int32_t layer) const {
    return h + int64_t(layer) * cap.n_streams * dm.d * dm.n;
  }
  double* hd_of(const Dims& dm, const Capacity& cap, int32_t layer) const {
    return hd + int64_t(layer) * cap.n_streams * dm.d * dm.n;
  }
};

inline int64_t step_stride(const Dims& dm) { return dm.ctx + dm.chunk_samples; }

template <typename T>
void carve_buffers(Carver& a, const Dims& dm, const Capacity& cap, size_t workspace_bytes, Buffers<T>* b) {
  const int64_t r = cap.rows, S = cap.n_streams;
  b->x = a.take<T>(r * dm.d);
  b->xn = a.take<T>(r * dm.d);
  b->mx = a.take<T>(r * dm.d);
  b->v = a.take<T>(r * dm.h);
  b->base = a.take<T>(r * dm.base_cols());
  b->q = a.take<T>(r * dm.z);
  b->k = a.take<T>(r * dm.z);
  b->o = a.take<float>(r * dm.h);
  b->hb = a.take<float>(r * dm.d);
  b->ffn = a.take<T>(r * dm.f);
  b->scores = a.take<T>(cap.group * dm.c * dm.c);
  b->ring = a.take<T>(int64_t(dm.n_layers) * S * dm.k * dm.d);
  b->h = a.take<float>(dm.k == 0 ? int64_t(dm.n_layers) * S * dm.d * dm.n : 0);
  b->hd = a.take<double>(dm.k > 0 ? int64_t(dm.n_layers) * S * dm.d * dm.n : 0);
  b->pool = a.take<double>(S * dm.w * dm.d);
  b->total = a.take<double>(S * dm.d);
  b->embed_mean = a.take<float>(dm.patch_norm ? S * dm.d : 0);
  b->embed_power = a.take<float>(dm.patch_norm ? r * dm.d : r * dm.patch_bands);
  const int32_t sd = dm.d > dm.cdim ? dm.d : dm.cdim;
  b->head_scratch = a.take<float>(S * 2 * sd);
  b->logits = a.take<float>(S * dm.n_classes);
  b->zero_index = a.take<int64_t>(S);
  b->input = a.take<float>(S * step_stride(dm));
  b->input_index = a.take<int64_t>(S);
  b->clip = a.take<float>(cap.clip_tokens > 0 ? dm.ctx + cap.clip_tokens * dm.patch_s : 0);
  const int64_t t_frames = dm.teacher ? cap.teacher_streams * teacher_span_frames(cap.teacher_tok) : 0;
  const int64_t t_act = dm.teacher ? cap.teacher_streams * teacher_act_floats(teacher_graph_rows(cap.teacher_tok)) : 0;
  b->t_power = a.take<double>(t_frames * teacher::kBins);
  b->t_db = a.take<double>(t_frames * teacher::kMel);
  b->t_frames = a.take<float>(t_frames * teacher::kMel);
  b->t_act = a.take<float>(t_act);
  b->t_next = a.take<float>(t_act);
  b->workspace = a.take<uint8_t>(int64_t(workspace_bytes));
  b->workspace_bytes = workspace_bytes;
}

// Converts a float weight into the storage type, and a stored activation back
// (specialized for __half where the CUDA headers are in scope).
template <typename T>
struct StorageOf {
  static T from(float v) { return v; }
  static float to(T v) { return v; }
};

struct LinearDev {
  const void* w = nullptr;     // (n_out, n_in) in the storage type (h_proj: float32)
  const float* b = nullptr;    // (n_out) or null
  int32_t n_out = 0, n_in = 0;
};

struct EmaDev {
  const float *a = nullptr, *g = nullptr, *qk = nullptr, *out = nullptr;
  const float* omega = nullptr;
};

struct LayerDev {
  NormDev norm, ffn_norm;
  EmaDev ema;
  LinearDev v_proj, mx_proj, h_proj, fc1, fc2;
  const float* qk_gamma = nullptr;
  const float* qk_beta = nullptr;
  const float* rel_bias = nullptr;
  bool has_ffn = false;
};

// The teacher's graphs (runtime/src/core/teacher_graph.h) in device memory.
struct TeacherDev {
  const float* stft_real = nullptr;  // (kBins x kFft)
  const float* stft_imag = nullptr;
  const float* mel = nullptr;        // (kBins x kMel)
  const float* conv_weight[teacher::kConvLayers] = {};
  const float* conv_bias[teacher::kConvLayers] = {};  // the last is null
  float clip_min = 0.0f, top_db = 0.0f, leaky_alpha = 0.0f, max_floor = 0.0f;
};

struct WeightsDev {
  TeacherDev teacher;               // Dims::teacher
  const float* embed_w = nullptr;   // teacher: (d, kEmbedding), the model's embed_tokens
  const float* embed_g = nullptr;  // log-power scale; null: linear features
  const float* embed_b = nullptr;
  const float* embed_m0 = nullptr;  // running mean's start; null: none
  const float* embed_bands = nullptr;  // log mel: (bands, bins); null: other features
  const float* embed_mix = nullptr;    // log mel: (d, bands)
  std::vector<LayerDev> layers;   // sized at creation
  NormDev final_norm;
  const HeadLayer* head = nullptr;  // classifier layers + projection, in device memory
  int32_t n_head = 0;
};

// Packs the weights into one block: run with host == nullptr to size it, then
// with a host staging block of that size; the pointers in *w are dev_base +
// offset (copy the staging block to dev_base afterwards).
class WeightPacker {
 public:
  WeightPacker(uint8_t* host, uintptr_t dev_base) : host_(host), dev_(dev_base), carve_(0) {}
  // n values converted to the storage type T
  template <typename T>
  const T* stored(const float* src, int64_t n) {
    const size_t off = carve_.reserve<T>(n);
    if (host_) {
      T* dst = reinterpret_cast<T*>(host_ + off);
      for (int64_t i = 0; i < n; ++i) dst[i] = StorageOf<T>::from(src[i]);
    }
    return reinterpret_cast<const T*>(dev_ + off);
  }
  const float* floats(const float* src, int64_t n) { return stored<float>(src, n); }
  const float* floats_from_double(const std::vector<double>& src) {
    const size_t off = carve_.reserve<float>(int64_t(src.size()));
    if (host_) {
      float* dst = reinterpret_cast<float*>(host_ + off);
      for (size_t i = 0; i < src.size(); ++i) dst[i] = float(src[i]);
    }
    return reinterpret_cast<const float*>(dev_ + off);
  }
  const HeadLayer* head_layers(const std::vector<HeadLayer>& layers) {
    const size_t off = carve_.reserve<HeadLayer>(int64_t(layers.size()));
    if (host_) {
      HeadLayer* dst = reinterpret_cast<HeadLayer*>(host_ + off);
      for (size_t i = 0; i < layers.size(); ++i) dst[i] = layers[i];
    }
    return reinterpret_cast<const HeadLayer*>(dev_ + off);
  }
  size_t size() const { return carve_.size(); }

 private:
  uint8_t* host_;
  uintptr_t dev_;
  Carver carve_;
};

inline NormDev pack_norm(WeightPacker& pk, const NormWeights& nw, int32_t d) {
  NormDev n;
  n.type = nw.type;
  n.eps = nw.eps;
  n.scalar = nw.scalar;
  switch (nw.type) {
    case NormType::batch_norm:
      n.a = pk.floats(nw.bn_scale.data(), d);
      n.b = pk.floats(nw.bn_shift.data(), d);
      break;
    case NormType::layer_norm:
      n.a = pk.floats(nw.weight, d);
      n.b = pk.floats(nw.bias, d);
      break;
    case NormType::rms_norm:
      n.a = pk.floats(nw.weight, d);
      break;
    case NormType::scale_norm:
      break;
  }
  return n;
}

template <typename T>
LinearDev pack_linear(WeightPacker& pk, const LinearWeights& lw) {
  LinearDev l;
  l.w = pk.stored<T>(lw.w, int64_t(lw.n_out) * lw.n_in);
  l.b = lw.b ? pk.floats(lw.b, lw.n_out) : nullptr;
  l.n_out = lw.n_out;
  l.n_in = lw.n_in;
  return l;
}

inline TeacherDev pack_teacher(WeightPacker& pk, const teacher::TeacherWeights& t) {
  namespace tg = teacher;
  TeacherDev d;
  d.stft_real = pk.floats(t.stft_real, int64_t(tg::kBins) * tg::kFft);
  d.stft_imag = pk.floats(t.stft_imag, int64_t(tg::kBins) * tg::kFft);
  d.mel = pk.floats(t.mel, int64_t(tg::kBins) * tg::kMel);
  for (int32_t i = 0; i < tg::kConvLayers; ++i) {
    d.conv_weight[i] = pk.floats(t.conv_weight[i], tg::conv_weight_floats(tg::kConvSpecs[i]));
    d.conv_bias[i] = t.conv_bias[i] ? pk.floats(t.conv_bias[i], tg::kConvSpecs[i].c_out) : nullptr;
  }
  d.clip_min = t.clip_min;
  d.top_db = t.top_db;
  d.leaky_alpha = t.leaky_alpha;
  d.max_floor = t.max_floor;
  return d;
}

template <typename T>
void pack_weights(WeightPacker& pk, const ModelWeights& md, const Dims& dm, WeightsDev* w) {
  // embed_filters: (D, k), or the teacher's projection (D, kEmbedding)
  w->embed_w = pk.floats(md.embed_w, int64_t(md.embed_filters.n_out) * md.embed_filters.n_in);
  if (dm.teacher) w->teacher = pack_teacher(pk, md.teacher);
  w->embed_g = md.embed_g ? pk.floats(md.embed_g, dm.d) : nullptr;
  w->embed_b = pk.floats(md.embed_b, dm.d);
  w->embed_m0 = md.embed_m0 ? pk.floats(md.embed_m0, dm.d) : nullptr;
  w->embed_bands = md.embed_bands ? pk.floats(md.embed_bands, int64_t(dm.patch_bands) * dm.patch_bins) : nullptr;
  w->embed_mix = md.embed_bands ? pk.floats(md.embed_mix, int64_t(dm.d) * dm.patch_bands) : nullptr;
  w->layers.resize(md.layers.size());
  for (size_t l = 0; l < md.layers.size(); ++l) {
    const LayerWeights& L = md.layers[l];
    LayerDev& o = w->layers[l];
    o.norm = pack_norm(pk, L.norm, dm.d);
    std::vector<double> rate(L.ema.decay.size());
    for (size_t i = 0; i < rate.size(); ++i) rate[i] = 1.0 - L.ema.decay[i];
    o.ema.a = pk.floats_from_double(rate);
    o.ema.g = pk.floats_from_double(L.ema.gain);
    o.ema.qk = pk.floats_from_double(L.ema.decay_k);
    o.ema.out = pk.floats_from_double(L.ema.out);
    o.ema.omega = pk.floats(L.ema.omega, dm.d);
    o.v_proj = pack_linear<T>(pk, L.v_proj);
    o.mx_proj = pack_linear<T>(pk, L.mx_proj);
    o.h_proj = pack_linear<float>(pk, L.h_proj);  // its input, o * r, is float32
    o.qk_gamma = pk.floats(L.qk_gamma, 2 * int64_t(dm.z));
    o.qk_beta = pk.floats(L.qk_beta, 2 * int64_t(dm.z));
    o.rel_bias = pk.floats(L.rel_pos_bias, 2 * int64_t(dm.c) - 1);
    o.has_ffn = L.has_ffn;
    if (L.has_ffn) {
      o.ffn_norm = pack_norm(pk, L.ffn_norm, dm.d);
      o.fc1 = pack_linear<T>(pk, L.fc1);
      o.fc2 = pack_linear<T>(pk, L.fc2);
    }
  }
  if (md.has_final_norm) w->final_norm = pack_norm(pk, md.final_norm, dm.d);
  std::vector<HeadLayer> head;
  for (const LinearWeights& cl : md.classifier) {
    HeadLayer h;
    h.w = pk.floats(cl.w, int64_t(cl.n_out) * cl.n_in);
    h.b = cl.b ? pk.floats(cl.b, cl.n_out) : nullptr;
    h.n_out = cl.n_out;
    h.n_in = cl.n_in;
    head.push_back(h);
  }
  HeadLayer proj;
  proj.w = pk.floats(md.projection.w, int64_t(md.projection.n_out) * md.projection.n_in);
  proj.b = md.projection.b ? pk.floats(md.projection.b, md.projection.n_out) : nullptr;
  proj.n_out = md.projection.n_out;
  proj.n_in = md.projection.n_in;
  head.push_back(proj);
  w->head = pk.head_layers(head);
  w->n_head = int32_t(head.size());
}

}  // namespace mega::gpu
