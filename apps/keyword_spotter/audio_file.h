// Reading audio files for the CLI (libsndfile).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kws {

struct AudioInfo {
  int32_t sample_rate = 0;
  int32_t channels = 0;
  int64_t frames = 0;
  std::string format;  // e.g. "WAV PCM_16"
};

// Reads a whole file as mono float samples in [-1, 1) (channels averaged).
// Refuses, with a message: unreadable or non-audio files, 0 frames, files over
// max_frames, a sample rate other than want_rate, non-finite samples.
bool read_audio_file(const std::string& path, int32_t want_rate, int64_t max_frames, std::vector<float>* samples,
                     AudioInfo* info, std::string* error);

}  // namespace kws
