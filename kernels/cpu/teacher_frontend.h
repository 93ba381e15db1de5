// SPDX-License-Identifier: Apache-2.0
// The pretrained teacher's front end in C++ (issue 83 item 4b, first step):
// 16 kHz audio as int16-valued floats -> openWakeWord's melspectrogram
// (floored, scaled x / 10 + 2) -> Google's speech embedding, 96 values per
// 76-frame window, one window every 8 frames (1280 samples, 80 ms). Exact
// against the torch port (tools/mega_kws_tools/teacher/torch_port.py; the
// parity test is tests/kernels/test_teacher_frontend.py).
//
// The melspectrogram graph floors its dB values 80 under its ReduceMax,
// which spans whatever audio it is given. A stream cannot see its future, so
// the streaming runner floors each step's 8 new frames under their own
// maximum, as openWakeWord's own streaming loop does (it runs the graph on
// each 80 ms chunk); embed_offline does either (floor_frames).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/teacher_ops.h"
#include "mega/mega.hpp"

namespace mega::teacher {

// Null if every pointer is set, else the name of the first missing one.
const char* teacher_weights_missing(const TeacherWeights& w);

// One convolution of the embedding graph (layer i of kConvSpecs) over an
// input of h rows (time) and width columns; x and y left for the caller.
Conv2dParams conv_params(const TeacherWeights& w, int32_t i, int32_t h, int32_t width);
// The embedding graph's convolutions packed for conv2d_fast, once.
struct PackedConvs {
  std::vector<float> data;
  int64_t offset[kConvLayers] = {};
  bool init(const TeacherWeights& w);  // false if memory cannot be had
  const float* layer(int32_t i) const { return data.empty() ? nullptr : data.data() + offset[i]; }
};
// The convolution with the chosen kernels, its LeakyRelu and Max if e.active;
// the optimized ones read packed and use scratch (conv2d_scratch_floats).
void conv_apply(KernelImpl impl, const Conv2dParams& p, const ConvEpilogue& e, const float* packed, float* scratch);
void pool_apply(KernelImpl impl, const MaxPoolParams& p);

// The two graphs' work with buffers made once: the mel dB of up to
// max_frames frames at a time, the embedding of one window.
class TeacherNet {
 public:
  // False if the buffers cannot be had; windows: embed will be called.
  bool init(const TeacherWeights& w, KernelImpl impl, int32_t max_frames, bool windows);
  // db (n_frames x kMel), frames every kHop samples from samples; n_frames <= max_frames.
  void mel_db(const float* samples, int32_t n_frames, double* db);
  // window (kWindowFrames x kMel) of scaled mel frames -> out (kEmbedding).
  void embed(const float* window, float* out);
  int64_t memory_bytes() const;

 private:
  void conv_layer(int32_t i, int32_t* h, int32_t* w);
  const TeacherWeights* w_ = nullptr;
  KernelImpl impl_ = KernelImpl::optimized;
  int32_t max_frames_ = 0;
  std::vector<float> act_, next_, scratch_;
  PackedConvs packed_;
  std::vector<double> stft_, mel_, frames_, spectrum_;
};

// The embedding graph over a stream of scaled mel frames, row by row: its
// convolutions are unpadded in time and its pools stride 8 frames in all, so
// window j's embedding is row j of the graph run over the whole stream. Each
// layer keeps the rows of its input its kernel still needs and computes only
// its new rows, about an eighth of the work of each window from scratch
// (TeacherNet::embed, which tests hold this to).
class TeacherSteps {
 public:
  bool init(const TeacherWeights& w, KernelImpl impl);  // false if the buffers cannot be had
  void reset();
  // kStepFrames frames (x kMel) in; true, with out (kEmbedding) written, when a window completes.
  bool push(const float* frames, float* out);
  int64_t memory_bytes() const;

 private:
  struct Layer {
    int32_t width = 0, out_width = 0;  // in and out of the convolution
    int32_t in_rows = 0;               // rows of the input held for the next step (< kh)
    int32_t pool_rows = 0;             // rows of the output held for the max-pool (< pool_h)
    std::vector<float> in_tail;        // (c_in x (kh - 1) x width)
    std::vector<float> pool_tail;      // (c_out x (pool_h - 1) x out_width)
  };
  int32_t conv_rows(int32_t i, int32_t k);
  int32_t pool_rows(int32_t i, int32_t k);
  const TeacherWeights* w_ = nullptr;
  KernelImpl impl_ = KernelImpl::optimized;
  Layer layers_[kConvLayers];
  std::vector<float> rows_;  // each stage's new rows (c x k x width)
  std::vector<float> held_;  // a stage's held rows and new rows, assembled
  std::vector<float> scratch_;
  PackedConvs packed_;
};

// Streaming: push samples in blocks of any size; an embedding comes out for
// each 1280 samples once the first 76-frame window is full (after 13152
// samples: 10 steps of 8 frames, the floor needing each step whole). Equal to
// embed_offline(floor_frames = kStepFrames) for any block sizes. Nothing is
// allocated after create.
class TeacherFrontEnd {
 public:
  static Status create(const TeacherWeights& w, KernelImpl impl, std::unique_ptr<TeacherFrontEnd>* out,
                       const char** error);
  void reset();
  // How many embeddings pushing n more samples gives.
  int64_t embeddings_for(int64_t n) const;
  int64_t samples_seen() const { return samples_seen_; }
  // What its buffers and packed weights hold.
  int64_t memory_bytes() const;
  // out: room for capacity embeddings (x kEmbedding floats). invalid_argument,
  // with nothing consumed, if samples or out is null where needed, n < 0, or
  // capacity < embeddings_for(n).
  Status push(const float* samples, int64_t n, float* out, int64_t capacity, int64_t* n_out);
  const char* last_error() const { return error_; }

 private:
  TeacherFrontEnd() = default;
  void step(float* out, int64_t* n_out);
  TeacherNet net_;
  double top_db_ = 80.0;
  std::vector<float> pending_;  // kStepSpan samples from the next step's start
  int32_t n_pending_ = 0;
  std::vector<double> db_;       // one step's frames
  std::vector<float> frames_;    // one step's frames, floored and scaled
  TeacherSteps embedder_;
  int64_t samples_seen_ = 0;
  const char* error_ = "";
};

// Embeddings of a whole clip. floor_frames 0: the graph's floor under the
// whole clip's maximum (the port's Teacher, per_item_max); kStepFrames: each
// step's frames under their own (the streaming runner, whole steps only).
// invalid_argument for another floor_frames, a null pointer or too small a
// capacity; out_of_memory if buffers cannot be had.
Status embed_offline(const TeacherWeights& w, KernelImpl impl, const float* audio, int64_t n, int32_t floor_frames,
                     float* out, int64_t capacity, int64_t* n_out);
// How many embeddings embed_offline gives.
int64_t offline_embeddings(int64_t n, int32_t floor_frames);

}  // namespace mega::teacher
