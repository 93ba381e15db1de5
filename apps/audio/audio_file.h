// SPDX-License-Identifier: Apache-2.0
// Reading audio files (classify, scan; mega_rtf's FILE): libsndfile for every
// format it knows, then the one channel mix-down (resampler.h) to mono at the
// file's own rate. Resampling to the model's rate is the one resampler's
// (resampler.h): the stream pipeline's for scan, read_audio_file's for a clip.
#pragma once

#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kws {

struct AudioInfo {
  int32_t sample_rate = 0;  // of the file
  int32_t channels = 0;
  int64_t frames = 0;       // of the file (for a file of unknown length, known once it has been read)
  bool length_known = true; // false: the header has no length (e.g. an Ogg file cut before its last page)
  bool cut_if_unknown_length = false;  // the format always has a length when whole (Ogg): its absence is an error
  std::string format;       // e.g. "WAV (Microsoft) Signed 16 bit PCM"
  bool resampled = false;   // read_audio_file: the samples were resampled from the file's rate
};

// Reads a whole file as mono float samples at want_rate (channels averaged,
// other rates resampled). Refuses, with a message: missing files, directories,
// non-audio files, 0 frames, files longer than max_seconds, truncated files
// (a header announcing more audio than the file holds; an Ogg file without its
// last page), non-finite samples.
bool read_audio_file(const std::string& path, int32_t want_rate, double max_seconds, std::vector<float>* samples,
                     AudioInfo* info, std::string* error);

// The path that means standard input: any container libsndfile decodes from
// a stream (WAV, AIFF, AU, FLAC, Ogg, ...), or raw s16le mono at 16 kHz
// (stdin_audio.h).
constexpr const char* kStdinPath = "-";

// Streams a file of any length in blocks, as mono at the file's own rate
// (the stream pipeline resamples), with bounded memory (scan); or standard
// input (kStdinPath). read() returns the samples
// written (0 at the end, -1 on error with *error set). stop (standard input):
// a stop signal's flag; once it is set, a read waiting on the pipe returns
// what it has, and interrupted() says so.
class AudioFileStream {
 public:
  static std::unique_ptr<AudioFileStream> open(const std::string& path, AudioInfo* info, std::string* error,
                                               const volatile std::sig_atomic_t* stop = nullptr);
  ~AudioFileStream();
  int64_t read(float* out, int64_t max, std::string* error);
  bool interrupted() const;  // a stop signal came while reading standard input
  const AudioInfo& info() const;

 private:
  AudioFileStream() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kws
