// SPDX-License-Identifier: Apache-2.0
// The ops of the pretrained teacher's front end (issue 83 item 4b): the two
// ONNX graphs openWakeWord runs (melspectrogram.onnx, embedding_model.onnx;
// tools/mega_kws_tools/teacher/ ports them to torch). Each op has a scalar
// reference (plain loops, teacher_ref.cpp) and an optimized twin
// (teacher_ops.cpp); tests/kernels/cpu/test_teacher_ops.cpp holds one to the
// other. Only what the graphs use: single-item NCHW tensors, zero padding,
// group 1; MaxPool without padding or ceil mode.
#pragma once

#include <cstdint>

#include "teacher_graph.h"

namespace mega::teacher {

// Power, mel and dB of n_frames frames; frame f reads samples
// [f * kHop, f * kHop + kFft). Double precision, as the port runs this graph
// (its STFT sums cancel below float32's rounding).
struct MelParams {
  const float* samples = nullptr;  // int16-valued floats
  int32_t n_frames = 0;
  const float* stft_real = nullptr;  // (kBins x kFft), the graph's conv_real weight
  const float* stft_imag = nullptr;  // (kBins x kFft)
  const float* mel = nullptr;        // (kBins x kMel), the graph's melW
  float clip_min = 0.0f;             // the graph's Clip floor before the log
  double* db = nullptr;              // (n_frames x kMel) out
};
void mel_db_ref(const MelParams& p);
// Optimized: two dgemms over a block of frames. stft: (kFft x 2 kBins), the
// real and imaginary weights transposed side by side (mel_pack_stft); mel:
// (kBins x kMel) in double; frames: (n_frames x kFft) scratch; spectrum:
// (n_frames x 2 kBins) scratch.
struct MelFastParams {
  const double* stft = nullptr;
  const double* mel = nullptr;
  double* frames = nullptr;
  double* spectrum = nullptr;
};
void mel_db_fast(const MelParams& p, const MelFastParams& f);
void mel_pack_stft(const float* real, const float* imag, double* stft);

// The graph's floor (its ReduceMax over n_frames frames, minus top_db, as a
// Clip) and openWakeWord's scaling x / 10 + 2, to float.
void mel_floor_scale(const double* db, int64_t n_frames, double top_db, float* out);

// y (c_out x h_out x w_out) = conv(x (c_in x h x w), weight (c_out x c_in x kh x kw)) + bias.
struct Conv2dParams {
  const float* x = nullptr;
  int32_t c_in = 0, h = 0, w = 0;
  const float* weight = nullptr;
  const float* bias = nullptr;  // c_out values, or null
  int32_t c_out = 0, kh = 0, kw = 0;
  int32_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;  // ONNX pads: begins, then ends
  int32_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  float* y = nullptr;
};
int32_t conv2d_out_size(int32_t in, int32_t kernel, int32_t pad_begin, int32_t pad_end, int32_t stride,
                        int32_t dilation);
int32_t conv2d_out_h(const Conv2dParams& p);
int32_t conv2d_out_w(const Conv2dParams& p);
void conv2d_ref(const Conv2dParams& p);
// The epilogue the embedding graph puts after each convolution but the last:
// LeakyRelu(alpha), then Max against a constant.
struct ConvEpilogue {
  bool active = false;
  float alpha = 0.0f;
  float floor = 0.0f;
};
// Optimized: each output position's inputs gathered into a row (im2row),
// all rows through the project's packed SIMD projection
// (SimdKernels::linear: y = x w^T + b with w = the (c_out x c_in kh kw)
// weight and the bias, packed once by conv2d_pack), then the epilogue on the
// way back to (c_out x h_out x w_out). No BLAS call: OpenBLAS allocated on
// the narrow shapes of a stream's steps.
int64_t conv2d_packed_floats(const Conv2dParams& p);
void conv2d_pack(const Conv2dParams& p, float* packed);
int64_t conv2d_scratch_floats(const Conv2dParams& p);
void conv2d_fast(const Conv2dParams& p, const ConvEpilogue& e, const float* packed, float* scratch);

// y = x >= 0 ? x : alpha * x (ONNX LeakyRelu), n values; y may alias x.
void leaky_relu_ref(const float* x, float alpha, float* y, int64_t n);
// y = max(x, b) with b a single broadcast value (the graph's Max); y may alias x.
void max_scalar_ref(const float* x, float b, float* y, int64_t n);

// y (c x h_out x w_out) = MaxPool(x (c x h x w)), no padding, floor mode.
struct MaxPoolParams {
  const float* x = nullptr;
  int32_t c = 0, h = 0, w = 0;
  int32_t kh = 0, kw = 0, stride_h = 1, stride_w = 1;
  float* y = nullptr;
};
int32_t maxpool_out_h(const MaxPoolParams& p);
int32_t maxpool_out_w(const MaxPoolParams& p);
void maxpool_ref(const MaxPoolParams& p);
void maxpool_fast(const MaxPoolParams& p);

}  // namespace mega::teacher
