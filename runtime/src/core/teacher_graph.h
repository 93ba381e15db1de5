// SPDX-License-Identifier: Apache-2.0
// The pretrained teacher's front end as a model file carries it
// (PatchFeatures::teacher_embedding, formats/mega_model.fbs): the fixed
// shapes of openWakeWord's melspectrogram graph and of Google's speech
// embedding graph, and the views of their weights. The core validates a
// file's tensors against these shapes; the CPU backend runs them
// (kernels/cpu/teacher_frontend.h). Part of the core's backend interface.
#pragma once

#include <cstdint>

namespace mega::teacher {

// The melspectrogram graph: 512-sample frames every 160 samples (an STFT as
// two strided 1-d convolutions, 257 bins), power, a 257 x 32 mel matrix,
// clamped, 10 log10; then floored top_db under a maximum.
constexpr int32_t kFft = 512;
constexpr int32_t kHop = 160;
constexpr int32_t kBins = 257;
constexpr int32_t kMel = 32;

// The embedding graph: one 96-value embedding per 76-frame window, a window
// every 8 frames (1280 samples, 80 ms).
constexpr int32_t kWindowFrames = 76;
constexpr int32_t kStepFrames = 8;
constexpr int32_t kStepSamples = kStepFrames * kHop;  // 1280
// Samples a step's frames read: its 1280 and the last frame's tail.
constexpr int32_t kStepSpan = (kStepFrames - 1) * kHop + kFft;  // 1632
constexpr int32_t kEmbedding = 96;
constexpr int32_t kConvLayers = 20;
// Steps until the first window is whole (10: frames 0-75 are in the first 10 steps of 8).
constexpr int32_t kWindowSteps = (kWindowFrames + kStepFrames - 1) / kStepFrames;
// The samples one embedding reads (its 10 steps: the floor needs each step
// whole), and so a model token's patch kernel; its stride is kStepSamples.
constexpr int32_t kTokenSpan = (kWindowSteps - 1) * kStepSamples + kStepSpan;  // 13152
// The front end reads int16-valued samples: a model's [-1, 1) samples times this.
constexpr float kInputScale = 32768.0f;

// One convolution of the embedding graph: padded in width (mel bands) only;
// pool_h x pool_w max-pool after it (stride = kernel; 0: none).
struct ConvSpec {
  int32_t c_in, c_out, kh, kw, pad_w, pool_h, pool_w;
};
// Read off embedding_model.onnx: 3x3 first, then 1x3 (padded 1 in width) and
// 3x1 (unpadded) in turn; max-pools 2x2, 1x2, 2x2, 1x2, 2x2. Each but the
// last has a bias, LeakyRelu and Max; the last has neither.
inline constexpr ConvSpec kConvSpecs[kConvLayers] = {
    {1, 24, 3, 3, 1, 0, 0},   {24, 24, 1, 3, 1, 0, 0},  {24, 24, 3, 1, 0, 2, 2},  {24, 48, 1, 3, 1, 0, 0},
    {48, 48, 3, 1, 0, 0, 0},  {48, 48, 1, 3, 1, 0, 0},  {48, 48, 3, 1, 0, 1, 2},  {48, 72, 1, 3, 1, 0, 0},
    {72, 72, 3, 1, 0, 0, 0},  {72, 72, 1, 3, 1, 0, 0},  {72, 72, 3, 1, 0, 2, 2},  {72, 96, 1, 3, 1, 0, 0},
    {96, 96, 3, 1, 0, 0, 0},  {96, 96, 1, 3, 1, 0, 0},  {96, 96, 3, 1, 0, 1, 2},  {96, 96, 1, 3, 1, 0, 0},
    {96, 96, 3, 1, 0, 0, 0},  {96, 96, 1, 3, 1, 0, 0},  {96, 96, 3, 1, 0, 2, 2},  {96, 96, 3, 1, 0, 0, 0},
};
constexpr int64_t conv_weight_floats(const ConvSpec& s) { return int64_t(s.c_out) * s.c_in * s.kh * s.kw; }

// Pointers into memory the caller keeps alive as long as any user of them.
struct TeacherWeights {
  const float* stft_real = nullptr;  // (kBins x kFft)
  const float* stft_imag = nullptr;  // (kBins x kFft)
  const float* mel = nullptr;        // (kBins x kMel)
  float clip_min = 1e-10f;           // the melspectrogram's Clip before its log
  float top_db = 80.0f;              // its floor under the maximum
  const float* conv_weight[kConvLayers] = {};  // conv_weight_floats(kConvSpecs[i]) each
  const float* conv_bias[kConvLayers] = {};    // c_out each; the last is null
  float leaky_alpha = 0.2f;
  float max_floor = -0.4f;  // the embedding graph's Max constant
};

}  // namespace mega::teacher
