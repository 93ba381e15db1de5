// SPDX-License-Identifier: Apache-2.0
// mega_soak: streams hours of generated audio through one CPU engine per model
// and checks what an always-on runtime must keep true:
//   - every chunk's logits are finite, and the guard against non-finite
//     logits never fires (StreamStats::n_state_resets == 0);
//   - memory stays flat: the heap in use (mallinfo2) is the same after every
//     check as after the first, and the resident set does not grow;
//   - the state does not drift: at each check, the window logits equal those
//     of a fresh engine fed only the last samples that can still reach
//     them (the receptive field of the truncated EMA through every layer,
//     plus the window, on chunk boundaries), within --tolerance. Models whose
//     state reaches back without limit (an untruncated EMA, the log power's
//     running mean) get no drift check.
// The audio cycles through speech (the sample clips), loud speech clipped at
// full scale, noise, silence, DC offsets, full-scale square waves, tones,
// and rare NaN/Inf samples (replaced and counted by the engine).
//
//   mega_soak --speech DIR [--seconds S] [--check-every S] [--seed N]
//             [--tolerance T] [--kernels optimized|reference] MODEL...
// Exit 0 when every check held for every model, 1 otherwise, 2 usage.
#include <dirent.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "audio_file.h"
#include "mega/engine.hpp"
#include "mega/mega.hpp"

namespace {

struct Options {
  std::string speech_dir;
  double seconds = 180.0;
  double check_every = 30.0;
  uint32_t seed = 1;
  double tolerance = 1e-4;
  mega::KernelImpl kernels = mega::KernelImpl::optimized;
  std::vector<std::string> models;
};

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Bytes of heap in use (glibc); meaningless under AddressSanitizer's allocator.
int64_t heap_in_use() { return kSanitized ? 0 : int64_t(mallinfo2().uordblks); }

int64_t rss_kb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  long long kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "VmRSS: %lld kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb;
}

std::vector<std::vector<float>> load_speech(const std::string& dir, int32_t rate) {
  std::vector<std::vector<float>> clips;
  DIR* d = opendir(dir.c_str());
  if (!d) return clips;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".wav") == 0) names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    std::vector<float> x;
    kws::AudioInfo info;
    std::string err;
    if (kws::read_audio_file(dir + "/" + n, rate, 600.0, &x, &info, &err)) clips.push_back(std::move(x));
  }
  return clips;
}

// Endless generated audio, segment by segment; never allocates after construction.
class Generator {
 public:
  Generator(const std::vector<std::vector<float>>* speech, int32_t rate, uint32_t seed)
      : speech_(speech), rate_(rate), rng_(seed) {
    next_segment();
  }

  void fill(float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if (left_ == 0) next_segment();
      out[i] = sample();
      --left_;
      ++pos_;
    }
  }
  int64_t n_nonfinite() const { return n_nonfinite_; }

 private:
  enum Kind { kSpeech, kLoudSpeech, kNoise, kSilence, kSquare, kTone, kSpeechOnDc, kNonFinite, kKinds };

  void next_segment() {
    kind_ = Kind(std::uniform_int_distribution<int>(0, kKinds - 1)(rng_));
    if (kind_ == kNonFinite && std::uniform_real_distribution<double>(0, 1)(rng_) > 0.2) kind_ = kNoise;
    left_ = int64_t(std::uniform_real_distribution<double>(0.2, 4.0)(rng_) * rate_);
    pos_ = 0;
    clip_ = size_t(std::uniform_int_distribution<size_t>(0, speech_->size() - 1)(rng_));
    gain_ = float(std::uniform_real_distribution<double>(0.05, 1.0)(rng_));
    if (kind_ == kLoudSpeech) gain_ = float(std::uniform_real_distribution<double>(4.0, 30.0)(rng_));
    dc_ = float(std::uniform_real_distribution<double>(-0.6, 0.6)(rng_));
    period_ = std::uniform_int_distribution<int64_t>(2, 400)(rng_);
    freq_ = std::uniform_real_distribution<double>(20.0, 7900.0)(rng_);
  }

  float sample() {
    const std::vector<float>& c = (*speech_)[clip_];
    switch (kind_) {
      case kSpeech: return gain_ * c[size_t(pos_) % c.size()];
      case kLoudSpeech: return std::max(-1.0f, std::min(1.0f, gain_ * c[size_t(pos_) % c.size()]));
      case kNoise: return gain_ * noise_(rng_);
      case kSilence: return 0.0f;
      case kSquare: return (pos_ / period_) % 2 ? 1.0f : -1.0f;
      case kTone: return gain_ * float(std::sin(2.0 * M_PI * freq_ * double(pos_) / rate_));
      case kSpeechOnDc: return std::max(-1.0f, std::min(1.0f, dc_ + gain_ * c[size_t(pos_) % c.size()]));
      case kNonFinite:
        if (pos_ % 1013 == 0) {
          ++n_nonfinite_;
          return pos_ % 2 ? NAN : (pos_ % 3 ? INFINITY : -INFINITY);
        }
        return 0.1f * noise_(rng_);
      default: return 0.0f;
    }
  }

  const std::vector<std::vector<float>>* speech_;
  int32_t rate_;
  std::mt19937 rng_;
  std::normal_distribution<float> noise_{0.0f, 0.3f};
  Kind kind_ = kSilence;
  int64_t left_ = 0, pos_ = 0, period_ = 2;
  size_t clip_ = 0;
  float gain_ = 1.0f, dc_ = 0.0f;
  double freq_ = 440.0;
  int64_t n_nonfinite_ = 0;
};

// Tokens of the stream that can still influence the newest window, rounded
// to whole chunks: the patch context, then per layer the EMA's K - 1 tokens
// (a token's attention sees its whole chunk, hence the rounding), plus the
// window. 0 if the EMA is untruncated (the past never stops mattering).
int64_t receptive_chunks(const mega::HParams& hp) {
  if (hp.truncation == 0 || hp.patch_norm != mega::PatchNorm::off) return 0;  // unbounded
  const int64_t C = hp.chunk_size;
  int64_t dirty = (hp.patch_kernel - hp.patch_stride + hp.patch_stride - 1) / hp.patch_stride;
  for (int32_t l = 0; l < hp.n_layers; ++l) dirty = (dirty + hp.truncation - 1 + C - 1) / C * C;
  return dirty / C + hp.window_chunks;
}

bool soak_one(const Options& o, const std::string& path, const std::vector<std::vector<float>>& speech) {
  std::string err;
  auto model = mega::Model::load(path, &err);
  if (!model) {
    std::fprintf(stderr, "mega_soak: %s: %s\n", path.c_str(), err.c_str());
    return false;
  }
  if (!model->streamable()) {
    std::fprintf(stderr, "mega_soak: %s is bidirectional (does not stream)\n", path.c_str());
    return false;
  }
  const mega::HParams& hp = model->hparams();
  mega::EngineOptions eo;
  eo.kernels = o.kernels;
  auto s = mega::create_engine("cpu", model, eo, &err);
  auto fresh = mega::create_engine("cpu", model, eo, &err);
  if (!s || !fresh) {
    std::fprintf(stderr, "mega_soak: %s\n", err.c_str());
    return false;
  }
  const int32_t nc = hp.n_classes;
  const int64_t cs = hp.chunk_samples();
  const int64_t total = int64_t(o.seconds * hp.sample_rate) / cs * cs;
  const int64_t check_every = std::max<int64_t>(1, int64_t(o.check_every * hp.sample_rate) / cs);
  const int64_t tail_chunks = receptive_chunks(hp);
  const size_t tail_len = size_t(std::max<int64_t>(tail_chunks, 1) * cs);

  // everything the loop uses is allocated here
  Generator gen(&speech, hp.sample_rate, o.seed);
  std::vector<float> block(8192), tail(tail_len), tail_in(tail_len), want(static_cast<size_t>(nc)), got(static_cast<size_t>(nc));
  std::mt19937 rng(o.seed + 7);
  std::uniform_int_distribution<int64_t> block_size(1, int64_t(block.size()));
  rss_kb();  // the first fopen/sscanf allocates for good inside glibc: not ours

  int64_t fed = 0, n_chunks = 0, n_bad_logits = 0, n_checks = 0, heap0 = -1, rss0 = 0, rss_max = 0;
  double worst = 0.0, worst_last_hour = 0.0, compute_s = 0.0;
  bool heap_flat = true;
  std::printf("%s: %.0f s of audio, checks every %lld chunks against a fresh engine fed the last %lld chunks%s\n",
              path.c_str(), double(total) / hp.sample_rate, (long long)check_every, (long long)tail_chunks,
              tail_chunks ? "" : " (unbounded state: no drift check)");
  std::fflush(stdout);
  while (fed < total) {
    const int64_t n = std::min(block_size(rng), total - fed);
    gen.fill(block.data(), n);
    int64_t off = 0;
    while (off < n) {
      int64_t used = 0;
      bool done = false;
      const auto t0 = std::chrono::steady_clock::now();
      if (s->push(block.data() + off, n - off, &used, &done) != mega::Status::ok) {
        std::fprintf(stderr, "mega_soak: push failed\n");
        return false;
      }
      compute_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      for (int64_t i = 0; i < used; ++i) tail[size_t(fed + off + i) % tail_len] = block[size_t(off + i)];
      off += used;
      if (!done) continue;
      ++n_chunks;
      const mega::ChunkResult& r = s->last_result();
      for (int32_t c = 0; c < nc; ++c) n_bad_logits += std::isfinite(r.logits[c]) ? 0 : 1;
      if (n_chunks % check_every != 0 && fed + off < total) continue;
      // a check: drift, memory
      ++n_checks;
      double diff = 0.0;
      if (tail_chunks > 0 && n_chunks >= tail_chunks) {
        std::copy(r.logits, r.logits + nc, got.begin());
        const int64_t end = fed + off;  // a chunk boundary; the tail ring holds [end - tail_len, end)
        for (size_t i = 0; i < tail_len; ++i) tail_in[i] = tail[size_t(end - int64_t(tail_len) + int64_t(i)) % tail_len];
        fresh->reset();
        fresh->push_all(tail_in.data(), int64_t(tail_len), [&](const mega::ChunkResult& fr) {
          std::copy(fr.logits, fr.logits + nc, want.begin());
        });
        for (int32_t c = 0; c < nc; ++c) diff = std::max(diff, double(std::fabs(got[size_t(c)] - want[size_t(c)])));
        if (std::isnan(diff)) diff = INFINITY;
        worst = std::max(worst, diff);
        if (double(end) > double(total) - 3600.0 * hp.sample_rate) worst_last_hour = std::max(worst_last_hour, diff);
      }
      // RSS first: its fopen/fclose moves glibc's heap accounting, so the heap
      // is read after it at every check alike
      const int64_t rss = rss_kb(), heap = heap_in_use();
      if (heap0 < 0) {
        heap0 = heap;
        rss0 = rss;
      }
      heap_flat = heap_flat && heap == heap0;
      rss_max = std::max(rss_max, rss);
      if (n_checks <= 3 || n_checks % 60 == 0 || fed + off >= total) {
        std::printf("  t=%9.1f s  chunks %9lld  drift %.3g  heap %lld B  rss %lld kB  non-finite logits %lld\n",
                    double(fed + off) / hp.sample_rate, (long long)n_chunks, diff, (long long)heap, (long long)rss,
                    (long long)n_bad_logits);
        std::fflush(stdout);
      }
    }
    fed += n;
  }
  const mega::StreamStats& st = s->stats();
  const bool ok = n_bad_logits == 0 && st.n_state_resets == 0 && worst <= o.tolerance && heap_flat &&
                  rss_max - rss0 <= 1024 && st.n_nonfinite_samples == gen.n_nonfinite();
  std::printf("%s: %s: %.1f h of audio, %lld chunks, real-time factor %.4f; max drift %.3g (last hour %.3g, "
              "tolerance %.3g); non-finite logits %lld; state resets %lld; samples replaced %lld (generated %lld), "
              "clipped %lld; heap %s (%lld B); RSS %lld -> max %lld kB\n",
              path.c_str(), ok ? "PASS" : "FAIL", double(total) / hp.sample_rate / 3600.0, (long long)n_chunks,
              compute_s / (double(total) / hp.sample_rate), worst, worst_last_hour, o.tolerance,
              (long long)n_bad_logits, (long long)st.n_state_resets, (long long)st.n_nonfinite_samples,
              (long long)gen.n_nonfinite(), (long long)st.n_clamped_samples,
              kSanitized ? "not measured (sanitizer)" : heap_flat ? "flat" : "GREW", (long long)heap0,
              (long long)rss0, (long long)rss_max);
  std::fflush(stdout);
  return ok;
}

int usage() {
  std::fprintf(stderr,
               "usage: mega_soak --speech DIR [--seconds S] [--check-every S] [--seed N] [--tolerance T]\n"
               "                 [--kernels optimized|reference] MODEL...\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--speech" && has_value) {
      o.speech_dir = argv[++i];
    } else if (a == "--seconds" && has_value) {
      o.seconds = std::atof(argv[++i]);
    } else if (a == "--check-every" && has_value) {
      o.check_every = std::atof(argv[++i]);
    } else if (a == "--seed" && has_value) {
      o.seed = uint32_t(std::strtoul(argv[++i], nullptr, 10));
    } else if (a == "--tolerance" && has_value) {
      o.tolerance = std::atof(argv[++i]);
    } else if (a == "--kernels" && has_value) {
      const std::string k = argv[++i];
      if (k != "optimized" && k != "reference") return usage();
      o.kernels = k == "reference" ? mega::KernelImpl::reference : mega::KernelImpl::optimized;
    } else if (!a.empty() && a[0] != '-') {
      o.models.push_back(a);
    } else {
      return usage();
    }
  }
  if (o.models.empty() || o.speech_dir.empty() || !(o.seconds > 0) || !(o.check_every > 0)) return usage();
  mega::set_blas_threads(1);
  bool ok = true;
  for (const std::string& path : o.models) {
    std::string err;
    auto m = mega::Model::load(path, &err);
    const auto speech = load_speech(o.speech_dir, m ? m->hparams().sample_rate : 16000);
    if (speech.empty()) {
      std::fprintf(stderr, "mega_soak: no .wav files readable in %s\n", o.speech_dir.c_str());
      return 2;
    }
    ok = soak_one(o, path, speech) && ok;
  }
  return ok ? 0 : 1;
}
