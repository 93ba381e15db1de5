// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the audio-file reader (apps/audio/audio_file.cpp:
// libsndfile, then resampler.cpp's channel mix-down and libsamplerate) on arbitrary
// bytes. The reader takes a path, as the CLI does, so each input goes
// through a file in /dev/shm (or TMPDIR).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "audio_file.h"

namespace {

std::string g_path;

void remove_file() {
  if (!g_path.empty()) std::remove(g_path.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  g_path = std::string(dir) + "/fuzz_audio_file." + std::to_string(getpid());
  std::atexit(remove_file);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FILE* f = std::fopen(g_path.c_str(), "wb");
  if (!f) return 0;
  const bool written = std::fwrite(data, 1, size, f) == size;
  if (std::fclose(f) != 0 || !written) return 0;
  // The model rate the bundled models use; other file rates go through the
  // resampler. 30 s instead of the CLI's 600 s limit per clip keeps each run
  // short (a few KB of ADPCM or FLAC can hold minutes of audio): the code
  // path is the same.
  std::vector<float> samples;
  kws::AudioInfo info;
  std::string err;
  const bool ok = kws::read_audio_file(g_path, 16000, 30.0, &samples, &info, &err);
  if (ok == !err.empty()) __builtin_trap();  // a failure must say why; a success has no error text
  return 0;
}
