// SPDX-License-Identifier: Apache-2.0
#include "stdin_audio.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kws {

namespace {

constexpr size_t kProbeBytes = 12;
constexpr size_t kRawBlockBytes = 8192;

// The first bytes of the containers handed to libsndfile; anything else is raw.
bool container_magic(const uint8_t* p, size_t n) {
  static const char* const kMagic[] = {"RIFF", "RIFX", "RF64", "BW64", "riff", "FORM", ".snd", "dns.",
                                       "fLaC", "OggS", "caff", "ID3"};
  for (const char* m : kMagic) {
    const size_t len = std::strlen(m);
    if (n >= len && std::memcmp(p, m, len) == 0) return true;
  }
  return false;
}

}  // namespace

bool StdinAudio::stopped() {
  if (stop_ && *stop_) interrupted_ = true;
  return interrupted_;
}

size_t StdinAudio::read_fd(uint8_t* p, size_t n) {
  size_t got = 0;
  while (got < n && !ended_ && !stopped()) {
    const ssize_t r = ::read(fd_, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;  // stopped() tells a stop signal from another
    if (r < 0) {
      read_error_ = std::string("cannot read standard input: ") + std::strerror(errno);
      ended_ = true;
    } else if (r == 0) {
      ended_ = true;
    }
    got += size_t(std::max<ssize_t>(r, 0));
  }
  in_ += int64_t(got);
  return got;
}

bool StdinAudio::open(std::string* error) {
  kept_.resize(kProbeBytes);
  kept_.resize(read_fd(kept_.data(), kProbeBytes));
  if (!read_error_.empty()) {
    *error = read_error_;
    return false;
  }
  container_ = container_magic(kept_.data(), kept_.size());
  return true;
}

SNDFILE* StdinAudio::open_sndfile(SF_INFO* sfi, std::string* error) {
  static SF_VIRTUAL_IO vio = {vio_filelen, vio_seek, vio_read, nullptr, vio_tell};
  *sfi = SF_INFO();
  SNDFILE* f = sf_open_virtual(&vio, SFM_READ, sfi, this);
  keeping_ = false;  // from here on, forward only
  if (f) return f;
  if (interrupted_) {
    *error = "stopped by a signal while reading the header";
  } else if (!read_error_.empty()) {
    *error = read_error_;
  } else {
    *error = std::string("not a readable audio stream (") + sf_strerror(nullptr) + ")";
  }
  return nullptr;
}

// The length of a pipe is not known: as far as libsndfile can tell, the file
// goes on, and it reads the header's announced length.
sf_count_t StdinAudio::vio_filelen(void*) { return SF_COUNT_MAX; }

sf_count_t StdinAudio::vio_tell(void* self) { return static_cast<StdinAudio*>(self)->pos_; }

sf_count_t StdinAudio::vio_seek(sf_count_t offset, int whence, void* self) {
  StdinAudio& s = *static_cast<StdinAudio*>(self);
  // Only noted here; the bytes are skipped when a read needs them. (SEEK_END
  // goes past anything that will come: reads there find the end.)
  if (whence == SEEK_SET) s.pos_ = offset;
  if (whence == SEEK_CUR) s.pos_ += offset;
  if (whence == SEEK_END) s.pos_ = SF_COUNT_MAX;
  return s.pos_;
}

sf_count_t StdinAudio::vio_read(void* ptr, sf_count_t count, void* self) {
  return sf_count_t(static_cast<StdinAudio*>(self)->read_at_pos(static_cast<uint8_t*>(ptr), size_t(count)));
}

bool StdinAudio::skip_to(int64_t offset) {
  // While the header is read, a skip within kHeaderBytes is read and kept (a
  // short stream's data chunk, skipped to see what follows it, as in a
  // file); a longer one (a long or endless stream's data) is not done: the
  // stream seems to end there, which ends libsndfile's header.
  if (keeping_ && offset > int64_t(kHeaderBytes)) return false;
  uint8_t sink[4096];
  while (in_ < offset && !ended_ && !interrupted_) {
    if (keeping_) {
      const size_t n = size_t(offset - in_);
      const size_t at = kept_.size();
      kept_.resize(at + n);
      kept_.resize(at + read_fd(kept_.data() + at, n));
    } else {
      read_fd(sink, size_t(std::min<int64_t>(offset - in_, int64_t(sizeof sink))));
    }
  }
  return in_ == offset;
}

size_t StdinAudio::read_at_pos(uint8_t* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    if (pos_ < int64_t(kept_.size())) {  // again, from the bytes kept
      const size_t k = std::min(n - done, kept_.size() - size_t(pos_));
      std::memcpy(p + done, kept_.data() + pos_, k);
      done += k;
      pos_ += int64_t(k);
      continue;
    }
    if (pos_ < in_) break;  // behind the pipe and no longer kept: cannot go back
    if (!keeping_ && !kept_.empty()) std::vector<uint8_t>().swap(kept_);  // read past: constant memory from here
    if (pos_ > in_ && !skip_to(pos_)) break;
    size_t got;
    if (keeping_ && kept_.size() + (n - done) <= kHeaderBytes) {
      kept_.resize(in_ + (n - done));
      got = read_fd(kept_.data() + pos_, n - done);
      kept_.resize(size_t(in_));
      std::memcpy(p + done, kept_.data() + pos_, got);
    } else {
      keeping_ = false;  // past the limit: nothing more is kept
      got = read_fd(p + done, n - done);
    }
    done += got;
    pos_ += int64_t(got);
    if (got == 0) break;  // the end, an error or a stop
  }
  return done;
}

int64_t StdinAudio::read_raw(float* out, int64_t max_frames, std::string* error) {
  if (max_frames < 1) return 0;
  const size_t want = std::min(size_t(max_frames) * 2, kRawBlockBytes);
  if (raw_.size() < want) raw_.resize(want);
  // first the probed bytes, then one read() at a time, until a whole frame is
  // there: a live pipe is passed on as it comes
  while (have_ < 2) {
    size_t got;
    if (pos_ < int64_t(kept_.size())) {
      got = std::min(want - have_, kept_.size() - size_t(pos_));
      std::memcpy(raw_.data() + have_, kept_.data() + pos_, got);
    } else {
      ssize_t r;
      do {
        if (stopped()) return 0;
        r = ::read(fd_, raw_.data() + have_, want - have_);
      } while (r < 0 && errno == EINTR);
      if (r < 0) {
        *error = std::string("cannot read standard input: ") + std::strerror(errno);
        return -1;
      }
      if (r == 0) return 0;  // the end (a partial last frame is dropped)
      got = size_t(r);
    }
    have_ += got;
    pos_ += int64_t(got);
  }
  const size_t n = std::min(have_ / 2, size_t(max_frames));
  for (size_t i = 0; i < n; ++i) {
    out[i] = float(int16_t(uint16_t(raw_[2 * i] | raw_[2 * i + 1] << 8))) / 32768.0f;
  }
  std::memmove(raw_.data(), raw_.data() + 2 * n, have_ - 2 * n);
  have_ -= 2 * n;
  return int64_t(n);
}

}  // namespace kws
