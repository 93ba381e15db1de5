// SPDX-License-Identifier: Apache-2.0
// The audio path's one conversion to the model's format, for every source:
// interleaved channels averaged to mono, and libsamplerate (sinc, medium
// quality) from the source's rate to the model's. The stream pipeline
// (stream_pipeline.cpp: whatever a source's ring holds, a file's and the
// microphone's) converts through it, and so does read_audio_file for a whole
// clip (audio_file.h); the file reader itself gives the file's own rate.
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

  // All n_in frames of `in` converted (end: and then the filter's tail
  // flushed), through `out` max_out frames at a time: each piece goes to
  // emit(const float* piece, int64_t n), which returns false to stop early.
  // False, with *error set, if the resampler failed. Allocates nothing.
  template <typename Emit>
  bool convert(const float* in, int64_t n_in, bool end, float* out, int64_t max_out, Emit&& emit, std::string* error) {
    while (n_in > 0 || end) {
      int64_t used = 0, made = 0;
      if (!process(in, n_in, end, out, max_out, &used, &made, error)) return false;
      if (made > 0 && !emit(static_cast<const float*>(out), made)) return true;
      if (used == 0 && made == 0) break;  // the tail is out (end); without end, cannot happen: never spin
      in += used;
      n_in -= used;
    }
    return true;
  }

 private:
  struct State;
  explicit Resampler(double ratio);
  double ratio_;
  std::unique_ptr<State> state_;
};

}  // namespace kws
