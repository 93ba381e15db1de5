// SPDX-License-Identifier: Apache-2.0
// The teacher's front end (PatchFeatures::teacher_embedding; runtime/src/core/
// teacher_graph.h) as element functions, each the CUDA twin of a scalar
// reference in kernels/cpu/teacher_ref.cpp and summing in the same order:
//   mel power    one work item per (frame, bin): the STFT's real and
//                imaginary dot products and re^2 + im^2, in double
//   mel dB       one per (frame, band): power . mel, Clip, 10 log10, double
//   floor        one per 80 ms step: its 8 frames floored top_db under their
//                own maximum, then x / 10 + 2, to float
//   convolution  one per output element: direct, with bias and the graph's
//                LeakyRelu + Max epilogue (the net is small), over each
//                stream's frames as one tall image (teacher_forward.h)
//   max-pool     one per output element
//   projection   one per output element: the model's embed_tokens, W e + b
// No shared memory, no barriers. teacher_forward.h strings them into the
// front end over a span.
#pragma once

#include <math.h>

#include <cstdint>

#include "storage.h"
#include "teacher_graph.h"

struct CUstream_st;

namespace mega::gpu {

// The melspectrogram of n_frames frames per stream; frame f of stream b reads
// samples [f kHop, f kHop + kFft) of its block, times input_scale (the model's
// [-1, 1) samples to the int16 values the graph reads, as the CPU does).
struct TeacherMelParams {
  const float* samples = nullptr;  // n_streams blocks of stream_stride floats
  int64_t stream_stride = 0;
  int32_t n_streams = 0;
  int64_t n_frames = 0;
  float input_scale = 1.0f;
  const float* stft_real = nullptr;  // (kBins x kFft)
  const float* stft_imag = nullptr;  // (kBins x kFft)
  const float* mel = nullptr;        // (kBins x kMel)
  float clip_min = 0.0f;
  double* power = nullptr;  // (n_streams n_frames x kBins) scratch
  double* db = nullptr;     // (n_streams n_frames x kMel) out
};

inline int64_t teacher_frames(const TeacherMelParams& p) { return int64_t(p.n_streams) * p.n_frames; }

MEGA_HD inline void teacher_power_element(const TeacherMelParams& p, int64_t idx) {
  const int32_t k = int32_t(idx % teacher::kBins);
  const int64_t row = idx / teacher::kBins;
  const float* x = p.samples + (row / p.n_frames) * p.stream_stride + (row % p.n_frames) * teacher::kHop;
  const float* wr = p.stft_real + int64_t(k) * teacher::kFft;
  const float* wi = p.stft_imag + int64_t(k) * teacher::kFft;
  double re = 0.0, im = 0.0;
  for (int32_t i = 0; i < teacher::kFft; ++i) {
    const double s = double(x[i] * p.input_scale);
    re += double(wr[i]) * s;
    im += double(wi[i]) * s;
  }
  p.power[idx] = re * re + im * im;
}

MEGA_HD inline void teacher_db_element(const TeacherMelParams& p, int64_t idx) {
  const double ln10 = double(2.3025851f);  // the graph's divisor, a float32 constant
  const int32_t m = int32_t(idx % teacher::kMel);
  const double* power = p.power + (idx / teacher::kMel) * teacher::kBins;
  double acc = 0.0;
  for (int32_t k = 0; k < teacher::kBins; ++k) acc += power[k] * double(p.mel[k * teacher::kMel + m]);
  const double lo = double(p.clip_min);
  acc = acc < lo ? lo : acc;
  p.db[idx] = log(acc) * 10.0 / ln10;
}

// n_steps steps of kStepFrames frames each: floored under each step's own
// maximum (the streaming runner's floor), scaled x / 10 + 2.
struct TeacherFloorParams {
  const double* db = nullptr;  // (n_steps kStepFrames x kMel)
  int64_t n_steps = 0;
  double top_db = 80.0;
  float* out = nullptr;        // same shape
};

MEGA_HD inline void teacher_floor_element(const TeacherFloorParams& p, int64_t step) {
  constexpr int32_t n = teacher::kStepFrames * teacher::kMel;
  const double* db = p.db + step * n;
  double top = db[0];
  for (int32_t i = 1; i < n; ++i) top = top < db[i] ? db[i] : top;
  const double floor = top - p.top_db;
  float* out = p.out + step * n;
  for (int32_t i = 0; i < n; ++i) out[i] = float((db[i] < floor ? floor : db[i]) / 10.0 + 2.0);
}

// A convolution of the embedding graph over a batch of n items: padded in
// width only, stride 1. Item j reads x + j x_stride as (c_in x h x w) (so the
// first layer reads each stream's frames where the floor wrote them); writes
// y + j (c_out h_out w_out).
struct TeacherConvParams {
  const float* x = nullptr;
  int64_t x_stride = 0;
  int32_t n = 0, c_in = 0, h = 0, w = 0;
  const float* weight = nullptr;  // (c_out x c_in x kh x kw)
  const float* bias = nullptr;    // (c_out) or null
  int32_t c_out = 0, kh = 0, kw = 0, pad_w = 0;
  bool epilogue = false;  // LeakyRelu(alpha), then Max against floor
  float alpha = 0.0f, floor = 0.0f;
  float* y = nullptr;
};

MEGA_HD inline int32_t teacher_conv_h(const TeacherConvParams& p) { return p.h - p.kh + 1; }
MEGA_HD inline int32_t teacher_conv_w(const TeacherConvParams& p) { return p.w + 2 * p.pad_w - p.kw + 1; }
inline int64_t teacher_conv_size(const TeacherConvParams& p) {
  return int64_t(p.n) * p.c_out * teacher_conv_h(p) * teacher_conv_w(p);
}

MEGA_HD inline void teacher_conv_element(const TeacherConvParams& p, int64_t idx) {
  const int32_t h_out = teacher_conv_h(p), w_out = teacher_conv_w(p);
  const int32_t ox = int32_t(idx % w_out);
  const int32_t oy = int32_t(idx / w_out % h_out);
  const int32_t o = int32_t(idx / (int64_t(w_out) * h_out) % p.c_out);
  const int64_t j = idx / (int64_t(w_out) * h_out * p.c_out);
  const float* x = p.x + j * p.x_stride;
  float acc = p.bias ? p.bias[o] : 0.0f;
  for (int32_t c = 0; c < p.c_in; ++c) {
    for (int32_t i = 0; i < p.kh; ++i) {
      const float* row = x + (int64_t(c) * p.h + oy + i) * p.w;
      const float* wrow = p.weight + ((int64_t(o) * p.c_in + c) * p.kh + i) * p.kw;
      for (int32_t k = 0; k < p.kw; ++k) {
        const int32_t ix = ox + k - p.pad_w;
        if (ix < 0 || ix >= p.w) continue;  // zero padding
        acc += wrow[k] * row[ix];
      }
    }
  }
  if (p.epilogue) {
    acc = acc >= 0.0f ? acc : p.alpha * acc;
    acc = acc < p.floor ? p.floor : acc;
  }
  p.y[idx] = acc;
}

// Max-pool, kernel = stride (kh x kw), no padding, floor mode, over n items
// of (c x h x w).
struct TeacherPoolParams {
  const float* x = nullptr;
  int32_t n = 0, c = 0, h = 0, w = 0, kh = 1, kw = 1;
  float* y = nullptr;
};

inline int64_t teacher_pool_size(const TeacherPoolParams& p) {
  return int64_t(p.n) * p.c * (p.h / p.kh) * (p.w / p.kw);
}

MEGA_HD inline void teacher_pool_element(const TeacherPoolParams& p, int64_t idx) {
  const int32_t h_out = p.h / p.kh, w_out = p.w / p.kw;
  const int32_t ox = int32_t(idx % w_out);
  const int64_t plane = idx / (int64_t(w_out) * h_out);  // item and channel
  const int32_t oy = int32_t(idx / w_out % h_out);
  const float* x = p.x + plane * p.h * p.w;
  float m = -INFINITY;
  for (int32_t i = 0; i < p.kh; ++i) {
    for (int32_t k = 0; k < p.kw; ++k) {
      const float v = x[int64_t(oy * p.kh + i) * p.w + ox * p.kw + k];
      m = m < v ? v : m;
    }
  }
  p.y[idx] = m;
}

// x (rows x d) = (e w^T + b) / xs: the model's embed_tokens into the token
// buffer the layers read. e is the graph's output, (items x kEmbedding x
// n_tok): row r is token r % n_tok of item r / n_tok.
template <typename T>
struct TeacherProjectParams {
  const float* e = nullptr;
  int64_t n_tok = 1;
  int64_t rows = 0;
  const float* w = nullptr;  // (d x kEmbedding)
  const float* b = nullptr;  // (d)
  int32_t d = 0;
  float xs = 1.0f;  // x is stored as value / xs (Dims::x_scale)
  T* x = nullptr;
};

template <typename T>
MEGA_HD inline void teacher_project_element(const TeacherProjectParams<T>& p, int64_t idx) {
  const int32_t c = int32_t(idx % p.d);
  const int64_t row = idx / p.d;
  const float* e = p.e + (row / p.n_tok) * teacher::kEmbedding * p.n_tok + row % p.n_tok;
  const float* w = p.w + int64_t(c) * teacher::kEmbedding;
  float acc = 0.0f;
  for (int32_t k = 0; k < teacher::kEmbedding; ++k) acc += w[k] * e[k * p.n_tok];
  st(p.x + idx, (acc + p.b[c]) / p.xs);
}

// The launchers (teacher.cu): power then dB; the rest one kernel each.
int launch_teacher_mel(const TeacherMelParams& p, CUstream_st* stream);
int launch_teacher_floor(const TeacherFloorParams& p, CUstream_st* stream);
int launch_teacher_conv(const TeacherConvParams& p, CUstream_st* stream);
int launch_teacher_pool(const TeacherPoolParams& p, CUstream_st* stream);
template <typename T>
int launch_teacher_project(const TeacherProjectParams<T>& p, CUstream_st* stream);

}  // namespace mega::gpu
