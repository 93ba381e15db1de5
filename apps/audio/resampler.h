// SPDX-License-Identifier: Apache-2.0
// The audio path's one conversion to the model's format, for every source:
// interleaved channels averaged to mono, and libsamplerate (sinc, medium
// quality) from the source's rate to the model's. The file reader
// (audio_file.cpp: files and standard input) and the stream pipeline
// (stream_pipeline.cpp: whatever a source's ring holds, the microphone's
// included) both convert through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kws {

// `frames` interleaved frames of `channels` floats into mono: their mean.
void mix_to_mono(const float* interleaved, int channels, size_t frames, float* mono);

class Resampler {
 public:
  // Null, with *error set, if libsamplerate cannot make one.
  static std::unique_ptr<Resampler> create(double from_rate, double to_rate, std::string* error);
  ~Resampler();
  Resampler(const Resampler&) = delete;
  Resampler& operator=(const Resampler&) = delete;

  double ratio() const { return ratio_; }  // to_rate / from_rate

  // Converts up to n_in mono frames of `in` into at most max_out frames of
  // `out`: *used frames taken, *made written. end: nothing follows `in`, so
  // the filter's tail is flushed (call again with what is left, or n_in 0,
  // until nothing is taken or made). False, with *error set, on failure.
  bool process(const float* in, int64_t n_in, bool end, float* out, int64_t max_out, int64_t* used, int64_t* made,
               std::string* error);

 private:
  struct State;
  explicit Resampler(double ratio);
  double ratio_;
  std::unique_ptr<State> state_;
};

}  // namespace kws
