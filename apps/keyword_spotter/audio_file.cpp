#include "audio_file.h"

#include <sndfile.h>
#include <sys/stat.h>

#include <cmath>
#include <memory>

namespace kws {

namespace {

std::string format_name(int format) {
  SF_FORMAT_INFO fi;
  std::string out;
  fi.format = format & SF_FORMAT_TYPEMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &fi, sizeof fi) == 0 && fi.name) out = fi.name;
  fi.format = format & SF_FORMAT_SUBMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &fi, sizeof fi) == 0 && fi.name) out += std::string(" ") + fi.name;
  return out;
}

}  // namespace

bool read_audio_file(const std::string& path, int32_t want_rate, int64_t max_frames, std::vector<float>* samples,
                     AudioInfo* info, std::string* error) {
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) {
    *error = "no such file";
    return false;
  }
  if (S_ISDIR(sb.st_mode)) {
    *error = "is a directory";
    return false;
  }
  SF_INFO sfi = {};
  std::unique_ptr<SNDFILE, int (*)(SNDFILE*)> f(sf_open(path.c_str(), SFM_READ, &sfi), sf_close);
  if (!f) {
    *error = std::string("not a readable audio file (") + sf_strerror(nullptr) + ")";
    return false;
  }
  info->sample_rate = sfi.samplerate;
  info->channels = sfi.channels;
  info->frames = sfi.frames;
  info->format = format_name(sfi.format);
  if (sfi.frames <= 0) {
    *error = "no audio in the file (0 frames)";
    return false;
  }
  if (sfi.channels <= 0 || sfi.channels > 64) {
    *error = "unsupported channel count " + std::to_string(sfi.channels);
    return false;
  }
  if (sfi.samplerate != want_rate) {
    *error = "sample rate is " + std::to_string(sfi.samplerate) + " Hz; the model needs " +
             std::to_string(want_rate) + " Hz (convert it first, e.g. sox in.wav -r " +
             std::to_string(want_rate) + " out.wav)";
    return false;
  }
  if (sfi.frames > max_frames) {
    *error = "too long to classify as one clip (" + std::to_string(sfi.frames / double(sfi.samplerate)) +
             " s; the limit is " + std::to_string(max_frames / want_rate) + " s)";
    return false;
  }
  std::vector<float> inter(size_t(sfi.frames) * size_t(sfi.channels));
  // Float data is normally scaled to [-1, 1]; integer data read as float is divided by 2^(bits-1).
  const sf_count_t got = sf_readf_float(f.get(), inter.data(), sfi.frames);
  if (got < sfi.frames) {
    *error = "file is truncated: the header announces " + std::to_string(sfi.frames) + " frames, only " +
             std::to_string(got > 0 ? got : 0) + " could be read";
    return false;
  }
  samples->assign(size_t(got), 0.0f);
  for (sf_count_t i = 0; i < got; ++i) {
    double acc = 0.0;
    for (int c = 0; c < sfi.channels; ++c) acc += inter[size_t(i) * size_t(sfi.channels) + size_t(c)];
    const float v = float(acc / sfi.channels);
    if (!std::isfinite(v)) {
      *error = "sample " + std::to_string(i) + " is not a finite number (NaN or Inf)";
      return false;
    }
    (*samples)[size_t(i)] = v;
  }
  return true;
}

}  // namespace kws
