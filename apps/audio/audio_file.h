// SPDX-License-Identifier: Apache-2.0
// Reading audio files (classify, scan; mega_rtf's FILE): libsndfile for every
// format it knows, then the one channel mix-down (resampler.h) to mono at the
// file's own rate; whole (read_audio_file), or block by block as a source of
// the stream pipeline (FileSource, scan). Resampling to the model's rate is
// the one resampler's (resampler.h): the stream pipeline's for scan,
// read_audio_file's for a clip.
#pragma once

#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "audio_source.h"

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

// An audio file as a source (scan): decoded to mono at the file's own rate by
// AudioFileStream, a block at a time, on the consumer's thread; the stream
// pipeline resamples it to the model's rate, as it does the microphone.
class FileSource : public AudioSource {
 public:
  // Null, with *error set, when the file cannot be opened as audio. stop:
  // the flag StreamOptions::stop points to, for standard input, whose reads
  // wait on the pipe (see AudioFileStream).
  static std::unique_ptr<FileSource> open(const std::string& path, std::string* error,
                                          const volatile std::sig_atomic_t* stop = nullptr);
  AudioFormat format() const override { return {1, double(info_.sample_rate)}; }
  SpscRing<float>& ring() override { return ring_; }
  // Reads the next block when the consumer has emptied the ring, so a read
  // error or the end of the file is reported only once every frame before it
  // has been consumed.
  SourceState poll() override;
  const std::string& error() const override { return error_; }
  const AudioInfo& info() const { return info_; }
  int64_t frames_read() const { return frames_read_; }  // at the file's rate

 private:
  static constexpr size_t kBlockFrames = 8192;  // one read; the ring holds one block
  FileSource(std::unique_ptr<AudioFileStream> in, const AudioInfo& info);
  std::unique_ptr<AudioFileStream> in_;
  AudioInfo info_;
  SpscRing<float> ring_;
  std::vector<float> block_;
  SourceState state_ = SourceState::running;
  std::string error_;
  int64_t frames_read_ = 0;
};

}  // namespace kws
