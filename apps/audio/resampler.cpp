// SPDX-License-Identifier: Apache-2.0
#include "resampler.h"

#include <samplerate.h>

namespace kws {

void mix_to_mono(const float* interleaved, int channels, size_t frames, float* mono) {
  const size_t ch = size_t(channels);
  for (size_t i = 0; i < frames; ++i) {
    double acc = 0.0;
    for (size_t c = 0; c < ch; ++c) acc += interleaved[i * ch + c];
    mono[i] = float(acc / channels);
  }
}

struct Resampler::State {
  SRC_STATE* src = nullptr;
  ~State() {
    if (src) src_delete(src);
  }
};

Resampler::Resampler(double ratio) : ratio_(ratio), state_(new State) {}

Resampler::~Resampler() = default;

std::unique_ptr<Resampler> Resampler::create(double from_rate, double to_rate, std::string* error) {
  std::unique_ptr<Resampler> r(new Resampler(to_rate / from_rate));
  int err = 0;
  r->state_->src = src_new(SRC_SINC_MEDIUM_QUALITY, 1, &err);
  if (!r->state_->src) {
    *error = std::string("cannot create a resampler: ") + src_strerror(err);
    return nullptr;
  }
  return r;
}

bool Resampler::process(const float* in, int64_t n_in, bool end, float* out, int64_t max_out, int64_t* used,
                        int64_t* made, std::string* error) {
  // Never null, even with no input left: libsamplerate treats a null data_in
  // at the end of input as nothing to flush and drops the filter's tail.
  static const float kNoInput = 0.0f;
  SRC_DATA d = {};
  d.data_in = n_in > 0 ? in : &kNoInput;
  d.input_frames = long(n_in);
  d.data_out = out;
  d.output_frames = long(max_out);
  d.end_of_input = end ? 1 : 0;
  d.src_ratio = ratio_;
  const int err = src_process(state_->src, &d);
  if (err) {
    *error = std::string("resampling failed: ") + src_strerror(err);
    return false;
  }
  *used = d.input_frames_used;
  *made = d.output_frames_gen;
  return true;
}

}  // namespace kws
