// SPDX-License-Identifier: Apache-2.0
// teacher_check: the teacher front end (kernels/cpu/teacher_frontend.h) on
// raw files, for the parity test with the torch port
// (tests/kernels/test_teacher_frontend.py) and for timing one step. Test-only
// formats, all float32 little-endian with no header of their own:
//   WEIGHTS  clip_min, top_db, leaky_alpha, max_floor, then stft_real,
//            stft_imag, mel, then each convolution's weight and bias (the
//            last has no bias), in kConvSpecs' order and shapes
//   AUDIO    int16-valued samples at 16 kHz
//   OUT      the embeddings, 96 floats each
// Usage:
//   teacher_check WEIGHTS AUDIO OUT [--impl reference|optimized] [--floor clip|step] [--blocks N[,N...]]
//   teacher_check WEIGHTS AUDIO --bench STEPS
// --floor clip: the graph's floor under the whole clip's maximum (embed_offline);
// step: each 80 ms step's own (embed_offline, or the streaming runner fed in
// --blocks, which cycle). --bench: the streaming runner's time per 1280-sample step.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cpu/teacher_frontend.h"

namespace {

namespace t = mega::teacher;

bool read_floats(const char* path, std::vector<float>* out) {
  FILE* f = std::fopen(path, "rb");
  if (!f) return false;
  std::fseek(f, 0, SEEK_END);
  const long bytes = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  out->resize(size_t(bytes > 0 ? bytes : 0) / sizeof(float));
  const bool ok = std::fread(out->data(), sizeof(float), out->size(), f) == out->size();
  std::fclose(f);
  return ok;
}

size_t weights_floats() {
  size_t n = 4 + 2 * size_t(t::kBins) * t::kFft + size_t(t::kBins) * t::kMel;
  for (int32_t i = 0; i < t::kConvLayers; ++i) {
    n += size_t(t::conv_weight_floats(t::kConvSpecs[i])) + (i + 1 < t::kConvLayers ? t::kConvSpecs[i].c_out : 0);
  }
  return n;
}

// Points w into data (weights_floats() of them), laid out as the file comment says.
void map_weights(const std::vector<float>& data, t::TeacherWeights* w) {
  size_t at = 4;
  const auto take = [&](size_t n) {
    const float* p = data.data() + at;
    at += n;
    return p;
  };
  w->clip_min = data[0], w->top_db = data[1], w->leaky_alpha = data[2], w->max_floor = data[3];
  w->stft_real = take(size_t(t::kBins) * t::kFft);
  w->stft_imag = take(size_t(t::kBins) * t::kFft);
  w->mel = take(size_t(t::kBins) * t::kMel);
  for (int32_t i = 0; i < t::kConvLayers; ++i) {
    w->conv_weight[i] = take(size_t(t::conv_weight_floats(t::kConvSpecs[i])));
    w->conv_bias[i] = i + 1 < t::kConvLayers ? take(size_t(t::kConvSpecs[i].c_out)) : nullptr;
  }
}

std::vector<int64_t> parse_blocks(const char* s) {
  std::vector<int64_t> out;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    const long long v = std::strtoll(p, &end, 10);
    if (end == p || v <= 0) return {};
    out.push_back(v);
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return {};
  }
  return out;
}

int stream(t::TeacherFrontEnd& f, const std::vector<float>& audio, const std::vector<int64_t>& blocks,
           std::vector<float>* out) {
  std::vector<float> room(size_t(t::kEmbedding) * (audio.size() / t::kStepSamples + 1));
  size_t at = 0, b = 0;
  while (at < audio.size()) {
    const int64_t n = std::min<int64_t>(blocks[b++ % blocks.size()], int64_t(audio.size() - at));
    int64_t got = 0;
    if (f.push(audio.data() + at, n, room.data(), int64_t(room.size()) / t::kEmbedding, &got) != mega::Status::ok) {
      std::fprintf(stderr, "teacher_check: %s\n", f.last_error());
      return 1;
    }
    out->insert(out->end(), room.begin(), room.begin() + got * t::kEmbedding);
    at += size_t(n);
  }
  return 0;
}

int bench(const t::TeacherWeights& w, const std::vector<float>& audio, int64_t steps) {
  std::unique_ptr<t::TeacherFrontEnd> f;
  const char* error = nullptr;
  if (t::TeacherFrontEnd::create(w, mega::KernelImpl::optimized, &f, &error) != mega::Status::ok) {
    std::fprintf(stderr, "teacher_check: %s\n", error);
    return 1;
  }
  if (audio.size() < size_t(t::kStepSamples)) {
    std::fprintf(stderr, "teacher_check: --bench needs at least %d samples of audio\n", t::kStepSamples);
    return 1;
  }
  std::vector<float> out(t::kEmbedding);
  int64_t got = 0, made = 0;
  double first = 0.0;
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int64_t warm = 11;  // the first window is full after 11 steps (13152 samples)
  for (int64_t s = 0; s < steps + warm; ++s) {
    const size_t at = size_t(s * t::kStepSamples) % (audio.size() - t::kStepSamples + 1);
    if (s == warm) first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    f->push(audio.data() + at, t::kStepSamples, out.data(), 1, &got);
    if (s >= warm) made += got;
  }
  const double all = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%lld embeddings; %.3f ms per 1280-sample step (80 ms of audio), real-time factor %.4f\n",
              static_cast<long long>(made), 1e3 * (all - first) / double(steps), (all - first) / (0.08 * double(steps)));
  return 0;
}

int usage() {
  std::fprintf(stderr, "usage: teacher_check WEIGHTS AUDIO OUT [--impl reference|optimized] [--floor clip|step] "
                       "[--blocks N[,N...]]\n       teacher_check WEIGHTS AUDIO --bench STEPS\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return usage();
  std::vector<float> data, audio;
  if (!read_floats(argv[1], &data) || !read_floats(argv[2], &audio)) {
    std::fprintf(stderr, "teacher_check: cannot read %s or %s\n", argv[1], argv[2]);
    return 1;
  }
  if (data.size() != weights_floats()) {
    std::fprintf(stderr, "teacher_check: %s has %zu floats, the layout wants %zu\n", argv[1], data.size(),
                 weights_floats());
    return 1;
  }
  t::TeacherWeights w;
  map_weights(data, &w);
  if (std::strcmp(argv[3], "--bench") == 0) {
    const long long steps = argc == 5 ? std::atoll(argv[4]) : 0;
    return steps > 0 ? bench(w, audio, steps) : usage();
  }
  auto impl = mega::KernelImpl::optimized;
  int32_t floor_frames = 0;
  std::vector<int64_t> blocks;
  for (int i = 4; i < argc; i += 2) {
    if (i + 1 >= argc) return usage();
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--impl" && (value == "reference" || value == "optimized")) {
      impl = value == "reference" ? mega::KernelImpl::reference : mega::KernelImpl::optimized;
    } else if (flag == "--floor" && (value == "clip" || value == "step")) {
      floor_frames = value == "step" ? t::kStepFrames : 0;
    } else if (flag == "--blocks" && !(blocks = parse_blocks(argv[i + 1])).empty()) {
      floor_frames = t::kStepFrames;
    } else {
      return usage();
    }
  }
  std::vector<float> out;
  if (!blocks.empty()) {
    std::unique_ptr<t::TeacherFrontEnd> f;
    const char* error = nullptr;
    if (t::TeacherFrontEnd::create(w, impl, &f, &error) != mega::Status::ok) {
      std::fprintf(stderr, "teacher_check: %s\n", error);
      return 1;
    }
    if (stream(*f, audio, blocks, &out) != 0) return 1;
  } else {
    const int64_t n = int64_t(audio.size());
    out.resize(size_t(t::offline_embeddings(n, floor_frames)) * t::kEmbedding);
    int64_t got = 0;
    if (t::embed_offline(w, impl, audio.data(), n, floor_frames, out.data(), int64_t(out.size()) / t::kEmbedding,
                         &got) != mega::Status::ok) {
      std::fprintf(stderr, "teacher_check: embed_offline refused the input\n");
      return 1;
    }
  }
  FILE* f = std::fopen(argv[3], "wb");
  if (!f || std::fwrite(out.data(), sizeof(float), out.size(), f) != out.size() || std::fclose(f) != 0) {
    std::fprintf(stderr, "teacher_check: cannot write %s\n", argv[3]);
    return 1;
  }
  std::printf("%zu embeddings\n", out.size() / t::kEmbedding);
  return 0;
}
