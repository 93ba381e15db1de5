// SPDX-License-Identifier: Apache-2.0
// An audio file as a source (scan): decoded to mono at the file's own rate by
// AudioFileStream, a block at a time, on the consumer's thread; the stream
// pipeline resamples it to the model's rate, as it does the microphone.
#pragma once

#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "audio_file.h"
#include "audio_source.h"

namespace kws {

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
