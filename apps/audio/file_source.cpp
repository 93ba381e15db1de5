// SPDX-License-Identifier: Apache-2.0
#include "file_source.h"

#include <utility>

namespace kws {

std::unique_ptr<FileSource> FileSource::open(const std::string& path, std::string* error,
                                             const volatile std::sig_atomic_t* stop) {
  AudioInfo info;
  auto in = AudioFileStream::open(path, &info, error, stop);
  if (!in) return nullptr;
  return std::unique_ptr<FileSource>(new FileSource(std::move(in), info));
}

FileSource::FileSource(std::unique_ptr<AudioFileStream> in, const AudioInfo& info)
    : in_(std::move(in)), info_(info), ring_(kBlockFrames), block_(kBlockFrames) {}

SourceState FileSource::poll() {
  if (state_ != SourceState::running || ring_.read_available() > 0) return state_;
  const int64_t n = in_->read(block_.data(), int64_t(block_.size()), &error_);
  if (n < 0) {
    state_ = SourceState::failed;
  } else if (n == 0 && !in_->interrupted()) {  // interrupted: still running, the consumer sees its stop flag
    state_ = SourceState::ended;
  } else {
    ring_.write(block_.data(), size_t(n));  // fits: the ring is empty and holds a block
    frames_read_ += n;
  }
  return state_;
}

}  // namespace kws
