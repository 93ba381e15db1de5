// SPDX-License-Identifier: Apache-2.0
#include "audio_file.h"

#include <fcntl.h>
#include <sndfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "resampler.h"
#include "stdin_audio.h"

namespace kws {

namespace {

constexpr int64_t kBlockFrames = 4096;

std::string format_name(int format) {
  SF_FORMAT_INFO fi;
  std::string out;
  fi.format = format & SF_FORMAT_TYPEMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &fi, sizeof fi) == 0 && fi.name) out = fi.name;
  fi.format = format & SF_FORMAT_SUBMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &fi, sizeof fi) == 0 && fi.name) out += std::string(" ") + fi.name;
  return out;
}

using SndFile = std::unique_ptr<SNDFILE, int (*)(SNDFILE*)>;

// libsndfile trims a data chunk that runs past the end of the file to what is
// there, and says so only in its log: "data : 395260 (should be 98782)" (WAV,
// and the same for AIFF's SSND, AU's Data Size, SVX's BODY). True, with *why
// set, if the header announces more audio than the file holds.
bool data_cut_short(SNDFILE* f, std::string* why) {
  char log[16384] = "";
  sf_command(f, SFC_GET_LOG_INFO, log, sizeof log);
  for (const char* line = log; *line;) {
    const char* end = std::strchr(line, '\n');
    const std::string l(line, end ? size_t(end - line) : std::strlen(line));
    line = end ? end + 1 : line + l.size();
    const size_t start = l.find_first_not_of(' ');
    const size_t colon = l.find(" : ");
    if (start == std::string::npos || colon == std::string::npos || colon < start) continue;
    std::string marker = l.substr(start, colon - start);
    marker.erase(marker.find_last_not_of(' ') + 1);  // AU pads it: "Data Size   : ..."
    if (marker != "data" && marker != "SSND" && marker != "Data Size" && marker != "BODY") continue;
    long long declared = 0, present = 0;
    if (std::sscanf(l.c_str() + colon + 3, "%lld (should be %lld)", &declared, &present) != 2) continue;
    if (declared > present && declared != 0xFFFFFFFFLL) {  // all ones: "length unknown" (a streamed header)
      *why = "file is truncated: the header announces " + std::to_string(declared) + " bytes of audio, only " +
             std::to_string(std::max(0LL, present)) + " are there";
      return true;
    }
  }
  return false;
}

bool supported(const AudioInfo& info, std::string* error) {
  if (info.channels <= 0 || info.channels > 64) {
    *error = "unsupported channel count " + std::to_string(info.channels);
    return false;
  }
  if (info.sample_rate < 1000 || info.sample_rate > 768000) {
    *error = "unsupported sample rate " + std::to_string(info.sample_rate) + " Hz";
    return false;
  }
  return true;
}

// The bytes per sample of the PCM and float encodings; 0 for the others.
int sample_bytes(int format) {
  switch (format & SF_FORMAT_SUBMASK) {
    case SF_FORMAT_PCM_S8: case SF_FORMAT_PCM_U8: return 1;
    case SF_FORMAT_PCM_16: return 2;
    case SF_FORMAT_PCM_24: return 3;
    case SF_FORMAT_PCM_32: case SF_FORMAT_FLOAT: return 4;
    case SF_FORMAT_DOUBLE: return 8;
    default: return 0;
  }
}

// What libsndfile opened, checked alike for a file and for standard input.
// stream: a pipe, whose header may announce a length its writer could not
// know yet (2 GiB or more: sox puts 0x7F000000 bytes in an AIFF header,
// arecord and others 2 or 4 GiB in a WAV one), and whose real length
// libsndfile cannot compare with the header.
bool check_opened(SNDFILE* f, const SF_INFO& sfi, bool stream, AudioInfo* info, std::string* error) {
  info->sample_rate = sfi.samplerate;
  info->channels = sfi.channels;
  info->frames = sfi.frames;
  info->format = format_name(sfi.format);
  info->length_known = sfi.frames != SF_COUNT_MAX;  // libsndfile's "unknown"
  if (stream && info->length_known && sfi.channels > 0) {
    const double bytes = double(sfi.frames) * sfi.channels * sample_bytes(sfi.format);
    info->length_known = bytes < double(0x7F000000u);
  }
  if (!info->length_known) info->frames = 0;
  if (info->length_known && sfi.frames <= 0) {
    *error = stream ? "no audio on standard input (its header announces 0 frames)" : "no audio in the file (0 frames)";
    return false;
  }
  if (!supported(*info, error)) return false;
  if (data_cut_short(f, error)) return false;
  // A whole Ogg file has a last page that gives its length; without it the
  // file was cut. (A stream's last page is not looked for.)
  info->cut_if_unknown_length = !stream && (sfi.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_OGG;
  return true;
}

// Opens and checks a file; shared by the whole-file and streaming readers.
SndFile open_checked(const std::string& path, AudioInfo* info, std::string* error) {
  SndFile none(nullptr, sf_close);
  // O_NONBLOCK: a FIFO must be refused, not waited on for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *error = errno == ENOENT ? "no such file" : std::string("cannot open: ") + std::strerror(errno);
    return none;
  }
  struct stat sb = {};
  const bool regular = ::fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
  ::close(fd);
  if (!regular) {
    *error = S_ISDIR(sb.st_mode) ? "is a directory"
                                 : "not a regular file (to scan a stream, pipe it to standard input: scan -)";
    return none;
  }
  SF_INFO sfi = {};
  SndFile f(sf_open(path.c_str(), SFM_READ, &sfi), sf_close);  // by name: libsndfile also goes by the extension
  if (!f) {
    *error = std::string("not a readable audio file (") + sf_strerror(nullptr) + ")";
    return none;
  }
  if (!check_opened(f.get(), sfi, false, info, error)) return none;
  return f;
}

}  // namespace

struct AudioFileStream::Impl {
  std::unique_ptr<StdinAudio> pipe;  // "-": file reads from it, or it is raw (file null)
  SndFile file{nullptr, sf_close};
  AudioInfo info;
  std::vector<float> inter, pending;  // pending: mono frames decoded, not yet read
  size_t pending_off = 0;
  int64_t frames_read = 0;
  bool eof = false;

  std::string seconds(int64_t frame) const {
    char at[32];
    std::snprintf(at, sizeof at, "%.3f s", double(frame) / info.sample_rate);
    return at;
  }

  // Reads the next block of mono input into pending; false on error.
  // Interrupted by a stop signal: true, with nothing read, and not the end.
  bool fill(std::string* error) {
    const int ch = info.channels;
    const sf_count_t got = file ? sf_readf_float(file.get(), inter.data(), kBlockFrames)
                                : pipe->read_raw(inter.data(), kBlockFrames, error);
    const bool pipe_failed = pipe && file && !pipe->read_error().empty();  // inside libsndfile's read
    if (got < 0 || pipe_failed) {
      if (pipe_failed) *error = pipe->read_error();
      else if (file) *error = sf_strerror(file.get());
      *error += " (after " + seconds(frames_read) + ")";
      return false;
    }
    if (got == 0 && pipe && pipe->interrupted()) return true;  // stopped: neither the end nor an error
    if (got == 0) {
      eof = true;
      if (!info.length_known) {
        info.frames = frames_read;
        if (frames_read == 0) {
          *error = pipe ? "no audio on standard input"
                        : "no audio could be decoded (the file has no length in its header: truncated or damaged?)";
          return false;
        }
        if (info.cut_if_unknown_length) {
          *error = "file is truncated: its last Ogg page, which gives the length, is missing (" +
                   std::to_string(frames_read) + " frames could be decoded)";
          return false;
        }
      } else if (frames_read < info.frames) {
        *error = (pipe ? "standard input ended early" : "file is truncated") + std::string(": the header announces ") +
                 std::to_string(info.frames) + " frames, only " + std::to_string(frames_read) + " could be read";
        return false;
      }
      pending.clear();
      pending_off = 0;
      return true;
    }
    pending_off = 0;
    if (ch == 1) {  // mono: the decoded block is read as it is (both buffers hold a block: no allocation)
      pending.swap(inter);
      pending.resize(size_t(got));
      inter.resize(size_t(kBlockFrames));
    } else {
      pending.resize(size_t(got));
      mix_to_mono(inter.data(), ch, size_t(got), pending.data());
    }
    for (sf_count_t i = 0; i < got; ++i) {
      if (!std::isfinite(pending[size_t(i)])) {
        *error = "sample " + std::to_string(frames_read + i) + " (at " + seconds(frames_read + i) +
                 ") is not a finite number (NaN or Inf)";
        return false;
      }
    }
    frames_read += got;
    return true;
  }
};

std::unique_ptr<AudioFileStream> AudioFileStream::open(const std::string& path, AudioInfo* info, std::string* error,
                                                       const volatile std::sig_atomic_t* stop) {
  std::unique_ptr<AudioFileStream> s(new AudioFileStream());
  s->impl_ = std::make_unique<Impl>();
  Impl& im = *s->impl_;
  if (path == kStdinPath) {
    im.pipe = std::make_unique<StdinAudio>(0, stop);
    if (!im.pipe->open(error)) return nullptr;
    if (im.pipe->container()) {
      SF_INFO sfi;
      im.file.reset(im.pipe->open_sndfile(&sfi, error));
      if (!im.file || !check_opened(im.file.get(), sfi, true, &im.info, error)) return nullptr;
    } else {
      im.info.sample_rate = StdinAudio::kRawRate;
      im.info.channels = 1;
      im.info.format = "raw s16le mono 16000 Hz";
      im.info.length_known = false;
      im.info.frames = 0;
    }
  } else {
    im.file = open_checked(path, &im.info, error);
    if (!im.file) return nullptr;
  }
  im.inter.resize(size_t(kBlockFrames) * size_t(im.info.channels));
  im.pending.reserve(size_t(kBlockFrames));
  *info = im.info;
  return s;
}

AudioFileStream::~AudioFileStream() = default;

const AudioInfo& AudioFileStream::info() const { return impl_->info; }

bool AudioFileStream::interrupted() const { return impl_->pipe && impl_->pipe->interrupted(); }

int64_t AudioFileStream::read(float* out, int64_t max, std::string* error) {
  Impl& im = *impl_;
  int64_t written = 0;
  while (written < max) {
    if (im.pending_off >= im.pending.size()) {
      if (im.eof) break;
      if (!im.fill(error)) return -1;
      if (interrupted() && im.pending.size() == im.pending_off) break;
      continue;
    }
    const int64_t n = std::min<int64_t>(int64_t(im.pending.size() - im.pending_off), max - written);
    std::copy_n(im.pending.data() + im.pending_off, n, out + written);
    im.pending_off += size_t(n);
    written += n;
  }
  return written;
}

bool read_audio_file(const std::string& path, int32_t want_rate, double max_seconds, std::vector<float>* samples,
                     AudioInfo* info, std::string* error) {
  auto stream = AudioFileStream::open(path, info, error);
  if (!stream) return false;
  auto too_long = [&](double seconds) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "too long to classify as one clip (%s%.1f s; the limit is %.0f s; use scan)",
                  info->length_known ? "" : "over ", seconds, max_seconds);
    *error = msg;
    return false;
  };
  const double seconds = double(info->frames) / info->sample_rate;
  if (seconds > max_seconds) return too_long(seconds);
  // The file's rate to want_rate through the stream pipeline's resampler (resampler.h).
  std::unique_ptr<Resampler> resampler;
  if (info->sample_rate != want_rate) {
    resampler = Resampler::create(info->sample_rate, want_rate, error);
    if (!resampler) return false;
  }
  samples->clear();
  samples->reserve(size_t(double(info->frames) * want_rate / info->sample_rate) + 1024);
  const int64_t max_frames = int64_t(max_seconds * info->sample_rate) + kBlockFrames;  // length unknown: stop here
  std::vector<float> block(kBlockFrames), converted(resampler ? size_t(kBlockFrames * resampler->ratio()) + 64 : 0);
  auto keep = [samples](const float* x, int64_t n) {
    samples->insert(samples->end(), x, x + n);
    return true;
  };
  for (int64_t n_read = 0;;) {
    const int64_t n = stream->read(block.data(), kBlockFrames, error);
    if (n < 0) return false;
    if (!resampler) {
      keep(block.data(), n);
    } else if (!resampler->convert(block.data(), n, n == 0, converted.data(), int64_t(converted.size()), keep, error)) {
      return false;
    }
    if (n == 0) break;
    if ((n_read += n) > max_frames) return too_long(max_seconds);
  }
  *info = stream->info();
  info->resampled = resampler != nullptr;
  return true;
}

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
