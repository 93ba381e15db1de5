#include "stdin_audio.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kws {

namespace {

constexpr uint16_t kPcm = 1, kFloat = 3, kExtensible = 0xFFFE;

uint32_t le32(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24; }
uint16_t le16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }

// A data chunk of these sizes is a header written before the length was
// known (arecord, sox and others writing to a pipe): read to the end.
bool unknown_length(uint32_t size) { return size == 0 || size >= 0x7FFFF000u; }

}  // namespace

bool StdinAudio::read_exact(uint8_t* p, size_t n, size_t* got, std::string* error) {
  *got = 0;
  while (*got < n) {
    const ssize_t r = ::read(fd_, p + *got, n - *got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *error = std::string("cannot read standard input: ") + std::strerror(errno);
      return false;
    }
    if (r == 0) break;
    *got += size_t(r);
  }
  return true;
}

bool StdinAudio::skip(uint64_t n, std::string* error) {
  uint8_t buf[4096];
  while (n > 0) {
    size_t got = 0;
    const size_t want = size_t(std::min<uint64_t>(n, sizeof buf));
    if (!read_exact(buf, want, &got, error)) return false;
    if (got < want) {
      *error = "the WAV stream ends inside its header";
      return false;
    }
    n -= got;
  }
  return true;
}

bool StdinAudio::open(std::string* error) {
  uint8_t head[12];
  size_t got = 0;
  if (!read_exact(head, sizeof head, &got, error)) return false;
  if (got < 4 || std::memcmp(head, "RIFF", 4) != 0) {  // raw: what was read is audio
    bytes_.assign(head, head + got);
    have_ = got;
    return true;
  }
  if (got < 12 || std::memcmp(head + 8, "WAVE", 4) != 0) {
    *error = "standard input starts with RIFF but is not a WAV stream";
    return false;
  }
  bool have_fmt = false;
  uint16_t tag = 0, bits = 0;
  for (;;) {
    uint8_t ch[8];
    if (!read_exact(ch, sizeof ch, &got, error)) return false;
    if (got < sizeof ch) {
      *error = "the WAV stream has no data chunk";
      return false;
    }
    const uint32_t size = le32(ch + 4);
    if (std::memcmp(ch, "data", 4) == 0) {
      if (!have_fmt) {
        *error = "the WAV stream has its data before its fmt chunk";
        return false;
      }
      declared_ = remaining_ = unknown_length(size) ? -1 : int64_t(size);
      break;
    }
    if (std::memcmp(ch, "fmt ", 4) != 0) {  // LIST, fact, ...: not needed
      if (!skip(uint64_t(size) + (size & 1u), error)) return false;
      continue;
    }
    uint8_t fmt[64] = {};
    if (size < 16 || size > sizeof fmt) {
      *error = "the WAV stream has a malformed fmt chunk (" + std::to_string(size) + " bytes)";
      return false;
    }
    if (!read_exact(fmt, size + (size & 1u), &got, error)) return false;
    if (got < size) {
      *error = "the WAV stream ends inside its header";
      return false;
    }
    tag = le16(fmt);
    channels_ = le16(fmt + 2);
    rate_ = int32_t(le32(fmt + 4));
    bits = le16(fmt + 14);
    if (tag == kExtensible && size >= 26) tag = le16(fmt + 24);
    have_fmt = true;
  }
  if (tag == kPcm && bits == 8) {
    enc_ = Encoding::u8;
  } else if (tag == kPcm && bits == 16) {
    enc_ = Encoding::s16;
  } else if (tag == kPcm && bits == 24) {
    enc_ = Encoding::s24;
  } else if (tag == kPcm && bits == 32) {
    enc_ = Encoding::s32;
  } else if (tag == kFloat && bits == 32) {
    enc_ = Encoding::f32;
  } else {
    *error = "unsupported WAV stream encoding (format " + std::to_string(tag) + ", " + std::to_string(bits) +
             " bits): use PCM 8/16/24/32-bit or float 32-bit";
    return false;
  }
  sample_bytes_ = bits / 8;
  format_ = std::string("WAV stream, ") + (tag == kFloat ? "float " : "PCM ") + std::to_string(bits) + " bit";
  return true;
}

int64_t StdinAudio::read(float* out, int64_t max_frames, std::string* error) {
  if (channels_ < 1 || max_frames < 1) return 0;
  const size_t frame_bytes = size_t(channels_) * size_t(sample_bytes_);
  const size_t want = size_t(max_frames) * frame_bytes;
  if (bytes_.size() < want) bytes_.resize(want);
  // one read() at a time, until a whole frame is there: a live pipe is passed on as it comes
  while (have_ < frame_bytes && !ended_) {
    size_t room = want - have_;
    if (remaining_ >= 0) room = size_t(std::min<int64_t>(int64_t(room), remaining_));
    if (room == 0) {
      ended_ = true;
      break;
    }
    const ssize_t r = ::read(fd_, bytes_.data() + have_, room);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *error = std::string("cannot read standard input: ") + std::strerror(errno);
      return -1;
    }
    if (r == 0) {
      ended_ = true;
      break;
    }
    have_ += size_t(r);
    if (remaining_ >= 0) remaining_ -= r;
  }
  const size_t n_frames = std::min(have_ / frame_bytes, size_t(max_frames));
  if (n_frames == 0) {
    if (remaining_ > 0) {
      *error = "standard input ended early: the WAV header announces " + std::to_string(declared_) +
               " bytes of audio, only " + std::to_string(declared_ - remaining_) + " came";
      return -1;
    }
    return 0;  // the end (a partial last frame is dropped)
  }
  const size_t n = n_frames * size_t(channels_);
  const uint8_t* b = bytes_.data();
  for (size_t i = 0; i < n; ++i, b += sample_bytes_) {
    switch (enc_) {
      case Encoding::u8: out[i] = (float(b[0]) - 128.0f) / 128.0f; break;
      case Encoding::s16: out[i] = float(int16_t(le16(b))) / 32768.0f; break;
      case Encoding::s24: out[i] = float(int32_t(uint32_t(b[0]) << 8 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 24) >> 8) / 8388608.0f; break;
      case Encoding::s32: out[i] = float(double(int32_t(le32(b))) / 2147483648.0); break;
      case Encoding::f32: {
        const uint32_t u = le32(b);
        std::memcpy(&out[i], &u, sizeof u);
        break;
      }
    }
  }
  const size_t used = n_frames * frame_bytes;
  std::memmove(bytes_.data(), bytes_.data() + used, have_ - used);
  have_ -= used;
  return int64_t(n_frames);
}

}  // namespace kws
