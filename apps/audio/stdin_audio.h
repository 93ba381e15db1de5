// Audio from a pipe (scan -): a WAV stream, recognised by its RIFF header
// (PCM 8/16/24/32-bit or float 32-bit, any channel count and rate), or else
// raw signed 16-bit little-endian mono at 16 kHz, e.g.
//   arecord -f S16_LE -r 16000 | keyword_spotter scan -m MODEL -
// libsndfile cannot tell the two apart on a pipe (it cannot look ahead and
// step back), so this small decoder does. Blocking reads: a pipe is waited on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kws {

class StdinAudio {
 public:
  static constexpr int32_t kRawRate = 16000;

  explicit StdinAudio(int fd = 0) : fd_(fd) {}
  // Reads the header (if any). False, with *error set, on a bad or unsupported one.
  bool open(std::string* error);
  int32_t sample_rate() const { return rate_; }
  int32_t channels() const { return channels_; }
  const std::string& format() const { return format_; }
  // Up to max_frames interleaved frames as floats: the frames read (at least
  // one unless the stream has ended), 0 at its end, -1 on error (*error set:
  // a read error, or a WAV stream that ends before the length its header announces).
  int64_t read(float* out, int64_t max_frames, std::string* error);

 private:
  enum class Encoding { u8, s16, s24, s32, f32 };
  bool read_exact(uint8_t* p, size_t n, size_t* got, std::string* error);  // until n bytes or the end
  bool skip(uint64_t n, std::string* error);

  int fd_;
  Encoding enc_ = Encoding::s16;
  int32_t rate_ = kRawRate, channels_ = 1, sample_bytes_ = 2;
  std::string format_ = "raw s16le mono 16000 Hz";
  int64_t remaining_ = -1;      // bytes of audio the WAV header announces, not yet read; -1: until the end
  int64_t declared_ = -1;
  std::vector<uint8_t> bytes_;  // bytes read but not yet decoded (a partial frame, or raw data read while probing)
  size_t have_ = 0;             // of them
  bool ended_ = false;
};

}  // namespace kws
