// bench: real-time factor, per-chunk latency, peak memory, model load time.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "commands.h"

namespace kws {

namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(std::ceil(q * double(v.size())) - 1));
  return v[i];
}

}  // namespace

int cmd_bench(const Params& p) {
  // model load: the best of several (the file is in the page cache after the first)
  std::vector<double> loads;
  std::shared_ptr<const mega::Model> m;
  for (int i = 0; i < 5; ++i) {
    const double t0 = now_ms();
    m = load_model(p);
    if (!m) return kExitModel;
    loads.push_back(now_ms() - t0);
  }
  const mega::HParams& hp = m->hparams();
  const double seconds = p.seconds > 0 ? p.seconds : 10.0;
  const int64_t n = int64_t(seconds * hp.sample_rate);
  std::vector<float> audio(static_cast<size_t>(n));
  std::mt19937 rng(1);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (int64_t i = 0; i < n; ++i) {  // noise plus a wandering tone: nothing degenerate
    const double t = double(i) / hp.sample_rate;
    audio[size_t(i)] = float(0.3 * std::sin(2 * M_PI * (300 + 200 * std::sin(t)) * t)) + noise(rng);
  }
  auto s = make_session(m, p, hp.window_samples());
  if (!s) return kExitModel;
  std::vector<double> lat;
  double t_total = 0.0;
  if (m->streamable()) {
    const int64_t chunk = hp.chunk_samples();
    // warm-up chunk (first-touch of buffers, BLAS init)
    s->push_all(audio.data(), std::min(n, chunk), [](const mega::ChunkResult&) {});
    s->reset();
    for (int64_t off = 0; off + chunk <= n; off += chunk) {
      const double t0 = now_ms();
      s->push_all(audio.data() + off, chunk, [](const mega::ChunkResult&) {});
      const double dt = now_ms() - t0;
      lat.push_back(dt);
      t_total += dt;
    }
  } else {
    const int64_t w = hp.window_samples();
    std::vector<float> logits(size_t(hp.n_classes));
    for (int64_t off = 0; off + w <= n; off += w) {
      const double t0 = now_ms();
      s->classify_clip(audio.data() + off, w, logits.data());
      const double dt = now_ms() - t0;
      lat.push_back(dt);
      t_total += dt;
    }
  }
  const double audio_s = double(lat.size()) * double(m->streamable() ? hp.chunk_samples() : hp.window_samples()) /
                         hp.sample_rate;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double rss_mb = double(ru.ru_maxrss) / 1024.0;
  const double rtf = audio_s > 0 ? t_total / 1000.0 / audio_s : 0.0;
  const double load_ms = *std::min_element(loads.begin(), loads.end());
  const char* unit = m->streamable() ? "chunk" : "window";
  if (p.json) {
    std::printf("{\"rtf\": %.4f, \"chunk_ms_p50\": %.3f, \"chunk_ms_p99\": %.3f, \"peak_rss_mb\": %.1f, "
                "\"load_ms\": %.3f, \"threads\": %d, \"backend\": \"cpu\", \"kernels\": \"%s\", "
                "\"audio_s\": %.3f, \"chunk_ms_audio\": %.3f, \"session_mb\": %.2f, \"streaming\": %s}\n",
                rtf, percentile(lat, 0.5), percentile(lat, 0.99), rss_mb, load_ms, p.threads, p.kernels.c_str(),
                audio_s, 1000.0 * double(hp.chunk_samples()) / hp.sample_rate, double(s->memory_bytes()) / 1048576.0,
                m->streamable() ? "true" : "false");
  } else {
    std::printf("audio            %.2f s in %zu %ss of %.1f ms (%s kernels, %d BLAS thread%s, cpu)\n", audio_s,
                lat.size(), unit, 1000.0 * double(m->streamable() ? hp.chunk_samples() : hp.window_samples()) /
                hp.sample_rate, p.kernels.c_str(), p.threads, p.threads == 1 ? "" : "s");
    std::printf("real-time factor %.3f (compute time / audio time)\n", rtf);
    std::printf("%-16s p50 %.2f ms, p99 %.2f ms\n", (std::string("per-") + unit).c_str(), percentile(lat, 0.5),
                percentile(lat, 0.99));
    std::printf("model load       %.2f ms\n", load_ms);
    std::printf("memory           peak RSS %.1f MB, session %.2f MB\n", rss_mb, double(s->memory_bytes()) / 1048576.0);
  }
  return kExitOk;
}

}  // namespace kws
