// SPDX-License-Identifier: Apache-2.0
// mega_rtf: real-time factor, per-chunk latency, model FLOPs and the achieved
// rate next to OpenBLAS sgemm measured in the same run, peak memory and model
// load time, for one model file. (Before, `keyword_spotter bench`; the CLI
// carries no benchmark code.)
//
//   mega_rtf [-m MODEL] [--threads N] [--seconds S] [--streams B|max] [--backend NAME] [--fp16]
//            [--kernels NAME] [--json] [FILE]
//
// --streams max sweeps B = 1, 2, 4, ... 4096 and stops after the first B that
// is not real time: the streams one engine keeps in real time, with the step
// latency, engine creation time and engine memory per stream at each B.
//
// Times are taken twice: by the clock (what a listener waits for) and in CPU
// time (what the code costs; on a shared machine the two differ by what the
// scheduler gave to other processes): the calling thread's with one thread,
// else the whole process's (it then also counts other libraries' idle
// threads, such as OpenBLAS's pool spinning for a moment after start-up).
//
// Built on the runtime's public API (mega/*.hpp), the audio-file reader
// (apps/audio/audio_file.h) for FILE, and the engine's options as
// keyword_spotter parses them (apps/common/engine_flags.h); without -m, the
// model keyword_spotter takes (apps/common/default_model.h). Output that could
// not be written is an error (apps/common/stdout_check.h).
#include <cblas.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "audio_file.h"
#include "default_model.h"
#include "engine_flags.h"
#include "json_escape.h"
#include "mega/engine.hpp"
#include "mega/mega.hpp"
#include "model_flops.h"
#include "parse_number.h"
#include "stdout_check.h"

namespace {

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitModel = 3, kExitDevice = 4;
// The audio is held in memory (an hour at 16 kHz: 230 MB) and each batch step
// holds a chunk per stream: larger values were an uncaught std::bad_alloc.
constexpr double kMaxSeconds = 3600.0;
constexpr int64_t kMaxStreams = 4096;

// The engine's options (engine_flags.h) and the benchmark's.
struct Params : kws::EngineFlags {
  std::string model_path;
  bool json = false;
  int32_t streams = 0;  // > 0: that many streams in one batch
  bool sweep = false;    // --streams max: B = 1, 2, 4, ... while real time
  double seconds = 0.0;  // audio to process (0: 10 s)
  std::vector<std::string> files;
};

// The engine's options say what keyword_spotter's --help says of them (engine_flags.h).
void print_usage(FILE* out) {
  using kws::kBackendHelp;
  using kws::kFp16Help;
  using kws::kKernelsHelp;
  using kws::kThreadsHelp;
  std::fprintf(out,
      "usage: mega_rtf [-m MODEL] [options] [FILE]\n"
      "\n"
      "real-time factor, per-chunk latency, FLOP rate vs sgemm, memory, load time\n"
      "(on FILE, looped, if given; else on synthetic audio)\n"
      "\n"
      "options:                                                        [default]\n"
      "  -m, --model PATH        model file (.mega)  [$MEGA_KWS_MODEL, else the installed demo model]\n"
      "  -j, --json              machine-readable output, one JSON object           [off]\n"
      "  -k, --kernels NAME      %s    [%s]\n"
      "      --backend NAME      %s                    [%s]\n"
      "      --fp16              %s   [%s]\n"
      "      --streams B|max     B streams advanced together in one batch (1..4096);\n"
      "                          max: B = 1, 2, 4, ... 4096 while real time           [one stream]\n"
      "  -t, --threads N         %s     [%s]\n"
      "  -s, --seconds S         audio to process (0.001..3600), one chunk at least [10]\n"
      "  -h, --help              this help\n"
      "      --version           the version\n"
      "\n"
      "exit codes: 0 ok; 1 the file, a step or writing the output failed; 2 usage error;\n"
      "            3 model not loadable; 4 compute device error\n",
      kKernelsHelp.help, kKernelsHelp.default_value, kBackendHelp.help, kBackendHelp.default_value, kFp16Help.help,
      kFp16Help.default_value, kThreadsHelp.help, kThreadsHelp.default_value);
}

using kws::FlagResult;
using kws::engine_flags_conflict;
using kws::engine_options;
using kws::parse_float;
using kws::parse_int;
using kws::take_engine_flag;

int usage_error(const char* fmt, const char* arg = "") {
  std::fprintf(stderr, "mega_rtf: ");
  std::fprintf(stderr, fmt, arg);
  std::fprintf(stderr, " (try --help)\n");
  return kExitUsage;
}

// Returns -1 to continue, else an exit code.
int parse_args(int argc, char** argv, Params* p) {
  for (int i = 1; i < argc; ++i) {
    const char* why = nullptr;
    const FlagResult engine_flag = take_engine_flag(argc, argv, &i, p, &why);
    if (engine_flag == FlagResult::bad) return usage_error("%s", why);
    if (engine_flag == FlagResult::taken) continue;
    const std::string a = argv[i];
    const char* v = nullptr;
    auto value = [&]() -> bool {
      if (i + 1 >= argc) return false;
      v = argv[++i];
      return true;
    };
    int64_t iv = 0;
    double fv = 0.0;
    if (a == "-h" || a == "--help") {
      print_usage(stdout);
      return kExitOk;
    } else if (a == "--version") {
      std::printf("mega_rtf %s\n", MEGA_KWS_VERSION_STRING);
      return kExitOk;
    } else if (a == "-m" || a == "--model") {
      if (!value()) return usage_error("%s needs a value", a.c_str());
      p->model_path = v;
    } else if (a == "-j" || a == "--json") {
      p->json = true;
    } else if (a == "--streams") {
      if (value() && std::strcmp(v, "max") == 0) {
        p->sweep = true;
        p->streams = 1;
      } else if (!v || !parse_int(v, 1, kMaxStreams, &iv)) {
        return usage_error("--streams needs an integer in [1, 4096] or max");
      } else {
        p->streams = int32_t(iv);
      }
    } else if (a == "-s" || a == "--seconds") {
      if (!value() || !parse_float(v, 0.001, kMaxSeconds, &fv)) {
        return usage_error("--seconds needs a number in [0.001, 3600]");
      }
      p->seconds = fv;
    } else if (a.size() > 1 && a[0] == '-') {
      return usage_error("unknown option '%s'", a.c_str());
    } else {
      p->files.push_back(a);
    }
  }
  if (p->model_path.empty()) {
    std::string tried;
    p->model_path = kws::default_model_path(&tried);
    if (p->model_path.empty()) return usage_error("no model: give -m PATH (no default model at %s)", tried.c_str());
  }
  if (p->files.size() > 1) return usage_error("mega_rtf takes at most one audio file");
  if (const char* why = engine_flags_conflict(*p)) return usage_error("%s", why);
  return -1;
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

clockid_t g_cpu_clock = CLOCK_PROCESS_CPUTIME_ID;

double cpu_ms() {
  timespec ts;
  clock_gettime(g_cpu_clock, &ts);
  return 1e3 * double(ts.tv_sec) + 1e-6 * double(ts.tv_nsec);
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(std::ceil(q * double(v.size())) - 1));
  return v[i];
}
// One batch size's figures: per-step latency (submit to results) against
// the chunk's audio duration, engine creation time and memory.
struct BatchFigures {
  int32_t streams = 0;
  double create_ms = 0.0, p50 = 0.0, p99 = 0.0, engine_mb = 0.0;
  size_t steps = 0;
  std::string backend;
};

// B streams advanced one chunk per step through a BatchEngine. Returns an exit
// code (kExitOk: *f is filled).
int measure_batch(const Params& p, const std::shared_ptr<const mega::Model>& m, const std::vector<float>& audio,
                  int32_t streams, BatchFigures* f) {
  std::string err;
  const double c0 = now_ms();
  auto e = mega::create_batch_engine(p.backend, m, streams, engine_options(p, 0), &err);
  f->create_ms = now_ms() - c0;
  if (!e) {
    std::fprintf(stderr, "mega_rtf: cannot create %d streams: %s\n", streams, err.c_str());
    return kExitModel;
  }
  const int64_t cs = m->hparams().chunk_samples(), n = int64_t(audio.size());
  const int64_t steps = std::max<int64_t>(1, n / cs);
  std::vector<float> step(size_t(int64_t(streams) * cs));
  auto fill = [&](int64_t k) {  // stream b hears the audio shifted by b * 997 samples
    for (int32_t b = 0; b < streams; ++b) {
      for (int64_t i = 0; i < cs; ++i) step[size_t(b * cs + i)] = audio[size_t((k * cs + i + b * 997) % n)];
    }
  };
  std::vector<double> lat;
  mega::BatchResult r;
  for (int64_t k = -1; k < steps; ++k) {  // step -1 warms up
    fill(std::max<int64_t>(k, 0));
    const double t0 = now_ms();
    mega::Status st = e->submit(step.data());
    if (st == mega::Status::ok) st = e->wait(&r);
    const double dt = now_ms() - t0;
    if (st != mega::Status::ok) {
      std::fprintf(stderr, "mega_rtf: step failed: %s %s\n", mega::status_name(st), e->last_error());
      return kExitFailed;
    }
    if (k >= 0) lat.push_back(dt);
  }
  f->streams = streams;
  f->p50 = percentile(lat, 0.5);
  f->p99 = percentile(lat, 0.99);
  f->steps = lat.size();
  f->engine_mb = double(e->memory_bytes()) / 1048576.0;
  f->backend = e->backend();
  return kExitOk;
}

// --streams B, or the sweep of --streams max (one JSON object with a row per B).
int bench_batch(const Params& p, const std::shared_ptr<const mega::Model>& m, const std::vector<float>& audio,
                double load_ms) {
  const double chunk_ms = 1000.0 * double(m->hparams().chunk_samples()) / m->hparams().sample_rate;
  std::vector<BatchFigures> rows;
  int32_t realtime = 0;  // the most streams kept in real time
  for (int32_t b = p.streams; b <= kMaxStreams; b *= 2) {
    BatchFigures f;
    if (const int rc = measure_batch(p, m, audio, b, &f)) return rc;
    rows.push_back(f);
    if (f.p99 < chunk_ms) realtime = b;
    if (!p.sweep || f.p99 >= chunk_ms) break;
  }
  const BatchFigures& f0 = rows.front();
  if (p.json) {
    std::printf("{\"model\": \"%s\", \"backend\": \"%s\", \"fp16\": %s, \"chunk_ms_audio\": %.3f, \"load_ms\": %.3f, ",
                kws::json_escape(p.model_path).c_str(), f0.backend.c_str(), p.fp16 ? "true" : "false", chunk_ms, load_ms);
    if (p.sweep) std::printf("\"realtime_streams\": %d, \"sweep\": [", realtime);
    for (size_t i = 0; i < rows.size(); ++i) {
      const BatchFigures& f = rows[i];
      // a row of the sweep, or the rest of the one object
      std::printf("%s\"streams\": %d, \"step_ms_p50\": %.3f, \"step_ms_p99\": %.3f, \"realtime\": %s, \"steps\": %zu, "
                  "\"engine_mb\": %.2f, \"engine_mb_per_stream\": %.4f, \"create_ms\": %.3f%s",
                  !p.sweep ? "" : i ? ", {" : "{", f.streams, f.p50, f.p99, f.p99 < chunk_ms ? "true" : "false", f.steps, f.engine_mb,
                  f.engine_mb / f.streams, f.create_ms, p.sweep ? "}" : "");
    }
    std::printf(p.sweep ? "]}\n" : "}\n");
    return kExitOk;
  }
  std::printf("model            %s\n", p.model_path.c_str());
  if (!p.sweep) {
    std::printf("streams          %d, one chunk of %.1f ms audio each per step (%s%s)\n", f0.streams, chunk_ms,
                f0.backend.c_str(), p.fp16 ? ", fp16" : "");
    std::printf("per-step         p50 %.2f ms, p99 %.2f ms over %zu steps: %s\n", f0.p50, f0.p99, f0.steps,
                f0.p99 < chunk_ms ? "real time" : "NOT real time");
    std::printf("memory           engine %.2f MB (%.3f MB per stream)\n", f0.engine_mb, f0.engine_mb / f0.streams);
    std::printf("engine creation  %.2f ms\n", f0.create_ms);
    return kExitOk;
  }
  std::printf("chunk            %.1f ms of audio per stream per step (%s%s)\n", chunk_ms, f0.backend.c_str(),
              p.fp16 ? ", fp16" : "");
  std::printf("%8s %12s %12s %10s %12s %12s  %s\n", "streams", "step p50 ms", "step p99 ms", "engine MB", "MB/stream",
              "create ms", "");
  for (const BatchFigures& f : rows) {
    std::printf("%8d %12.2f %12.2f %10.2f %12.4f %12.2f  %s\n", f.streams, f.p50, f.p99, f.engine_mb,
                f.engine_mb / f.streams, f.create_ms, f.p99 < chunk_ms ? "real time" : "NOT real time");
  }
  std::printf("real time        %d streams at most (p99 step under the chunk's %.1f ms)\n", realtime, chunk_ms);
  return kExitOk;
}

// The 1-minute load average, or -1 where /proc/loadavg is not there.
double load_average() {
  double l = -1.0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1.0;
    std::fclose(f);
  }
  return l;
}

struct Rate {
  double gflops = 0.0, gflops_cpu = 0.0;
};

// OpenBLAS sgemm at the shape of the model's largest product, the attention's
// a.v (C x H x C), with `threads` BLAS threads: the yardstick for the achieved
// rate. About 0.3 s after one warm-up call.
Rate sgemm_rate(int m, int n, int k, int threads) {
  std::vector<float> a(size_t(m) * size_t(k)), b(size_t(k) * size_t(n)), c(size_t(m) * size_t(n));
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  mega::set_blas_threads(threads);
  auto gemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
  };
  gemm();
  int64_t reps = 0;
  const double t0 = now_ms(), c0 = cpu_ms();
  double t = 0.0;
  do {
    gemm();
    ++reps;
    t = now_ms() - t0;
  } while (t < 300.0);
  const double cpu = cpu_ms() - c0;
  mega::set_blas_threads(1);
  const double flops = 2.0 * m * n * k * double(reps);
  return {flops / t * 1e-6, flops / cpu * 1e-6};
}

int run(const Params& p) {
  const double load_avg = load_average();
  g_cpu_clock = p.threads == 1 ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID;
  // model load: the best of several (the file is in the page cache after the first)
  std::vector<double> loads;
  std::shared_ptr<const mega::Model> m;
  for (int i = 0; i < 5; ++i) {
    const double t0 = now_ms();
    std::string err;
    m = mega::Model::load(p.model_path, &err);
    if (!m) {
      std::fprintf(stderr, "mega_rtf: cannot load model: %s\n", err.c_str());
      return kExitModel;
    }
    loads.push_back(now_ms() - t0);
  }
  const mega::HParams& hp = m->hparams();
  const double seconds = p.seconds > 0 ? p.seconds : 10.0;
  const int64_t n = int64_t(seconds * hp.sample_rate);
  // Less audio than one chunk (a window offline) measures nothing: refused, with the minimum.
  const bool by_chunk = m->streamable() || p.streams > 0;
  const int64_t unit_min = by_chunk ? hp.chunk_samples() : hp.window_samples();
  if (n < unit_min) {
    std::fprintf(stderr, "mega_rtf: --seconds %g is less than one %s of this model: at least %g (try --help)\n", seconds,
                 by_chunk ? "chunk" : "window", double(unit_min) / hp.sample_rate);
    return kExitUsage;
  }
  std::vector<float> audio(static_cast<size_t>(n));
  if (!p.files.empty()) {  // the file, looped to the length asked for
    std::vector<float> clip;
    kws::AudioInfo ai;
    std::string err;
    if (!kws::read_audio_file(p.files[0], hp.sample_rate, 3600.0, &clip, &ai, &err)) {
      std::fprintf(stderr, "mega_rtf: %s: %s\n", p.files[0].c_str(), err.c_str());
      return kExitFailed;
    }
    for (int64_t i = 0; i < n; ++i) audio[size_t(i)] = clip[size_t(i) % clip.size()];
  } else {
    std::mt19937 rng(1);
    std::normal_distribution<float> noise(0.0f, 0.05f);
    for (int64_t i = 0; i < n; ++i) {  // noise plus a wandering tone: nothing degenerate
      const double t = double(i) / hp.sample_rate;
      audio[size_t(i)] = float(0.3 * std::sin(2 * M_PI * (300 + 200 * std::sin(t)) * t)) + noise(rng);
    }
  }
  if (p.streams > 0) return bench_batch(p, m, audio, *std::min_element(loads.begin(), loads.end()));
  std::string err;
  auto s = mega::create_engine(p.backend, m, engine_options(p, hp.window_samples()), &err);
  if (!s) {
    std::fprintf(stderr, "mega_rtf: cannot create an engine: %s\n", err.c_str());
    return kExitModel;
  }
  std::vector<double> lat, lat_cpu;  // per chunk (or window): clock and CPU time
  double t_total = 0.0, cpu_total = 0.0;
  if (m->streamable()) {
    const int64_t chunk = hp.chunk_samples();
    // warm-up chunk (first-touch of buffers, thread start-up)
    s->push_all(audio.data(), std::min(n, chunk), [](const mega::ChunkResult&) {});
    s->reset();
    for (int64_t off = 0; off + chunk <= n; off += chunk) {
      const double t0 = now_ms(), c0 = cpu_ms();
      s->push_all(audio.data() + off, chunk, [](const mega::ChunkResult&) {});
      const double dt = now_ms() - t0, dc = cpu_ms() - c0;
      lat.push_back(dt);
      lat_cpu.push_back(dc);
      t_total += dt;
      cpu_total += dc;
    }
  } else {
    const int64_t w = hp.window_samples();
    std::vector<float> logits(size_t(hp.n_classes));
    for (int64_t off = 0; off + w <= n; off += w) {
      const double t0 = now_ms(), c0 = cpu_ms();
      s->classify_clip(audio.data() + off, w, logits.data());
      const double dt = now_ms() - t0, dc = cpu_ms() - c0;
      lat.push_back(dt);
      lat_cpu.push_back(dc);
      t_total += dt;
      cpu_total += dc;
    }
  }
  const int64_t unit_samples = m->streamable() ? hp.chunk_samples() : hp.window_samples();
  const double audio_s = double(lat.size()) * double(unit_samples) / hp.sample_rate;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const double rss_mb = double(ru.ru_maxrss) / 1024.0;
  // after the peak RSS is read: its matrices are not the runtime's memory
  const Rate sgemm = sgemm_rate(hp.chunk_size, hp.hidden_dim, hp.chunk_size, p.threads);
  const double rtf = audio_s > 0 ? t_total / 1000.0 / audio_s : 0.0;
  const double rtf_cpu = audio_s > 0 ? cpu_total / 1000.0 / audio_s : 0.0;
  const double load_ms = *std::min_element(loads.begin(), loads.end());
  // FLOPs of what ran: whole windows offline, chunks when streaming
  const double gflop_per_s = mega_bench::model_flops_per_second(hp) * 1e-9;
  const double gflop_run = gflop_per_s * audio_s;
  const double gflops = t_total > 0 ? gflop_run / (t_total / 1000.0) : 0.0;
  const double gflops_cpu = cpu_total > 0 ? gflop_run / (cpu_total / 1000.0) : 0.0;
  const char* unit = m->streamable() ? "chunk" : "window";
  if (p.json) {
    std::printf("{\"model\": \"%s\", \"rtf\": %.4f, \"rtf_cpu\": %.4f, \"chunk_ms_p50\": %.3f, \"chunk_ms_p99\": %.3f, "
                "\"chunk_cpu_ms_p50\": %.3f, \"chunk_cpu_ms_p99\": %.3f, "
                "\"peak_rss_mb\": %.1f, \"load_ms\": %.3f, \"threads\": %d, \"backend\": \"%s\", "
                "\"kernels\": \"%s\", \"audio_s\": %.3f, \"chunk_ms_audio\": %.3f, \"engine_mb\": %.2f, "
                "\"streaming\": %s, \"gflop_per_audio_s\": %.3f, \"gflops\": %.2f, \"gflops_cpu\": %.2f, "
                "\"sgemm_gflops\": %.2f, \"sgemm_gflops_cpu\": %.2f, \"sgemm_floor_rtf\": %.4f, "
                "\"sgemm_floor_rtf_cpu\": %.4f, \"load_average\": %.2f}\n",
                kws::json_escape(p.model_path).c_str(), rtf, rtf_cpu, percentile(lat, 0.5), percentile(lat, 0.99), percentile(lat_cpu, 0.5),
                percentile(lat_cpu, 0.99), rss_mb, load_ms, p.threads, s->backend(),
                p.kernels.c_str(), audio_s, 1000.0 * double(hp.chunk_samples()) / hp.sample_rate,
                double(s->memory_bytes()) / 1048576.0, m->streamable() ? "true" : "false", gflop_per_s, gflops,
                gflops_cpu, sgemm.gflops, sgemm.gflops_cpu, gflop_per_s / sgemm.gflops, gflop_per_s / sgemm.gflops_cpu,
                load_avg);
  } else {
    std::printf("model            %s\n", p.model_path.c_str());
    std::printf("audio            %.2f s in %zu %ss of %.1f ms (%s kernels, %d thread%s, %s%s)\n", audio_s,
                lat.size(), unit, 1000.0 * double(unit_samples) / hp.sample_rate, p.kernels.c_str(), p.threads,
                p.threads == 1 ? "" : "s", s->backend(), p.fp16 ? ", fp16" : "");
    std::printf("real-time factor %.3f by the clock, %.3f in CPU time (compute time / audio time)\n", rtf,
                rtf_cpu);
    std::printf("%-16s p50 %.2f ms, p99 %.2f ms (CPU time: p50 %.2f ms, p99 %.2f ms)\n",
                (std::string("per-") + unit).c_str(), percentile(lat, 0.5), percentile(lat, 0.99),
                percentile(lat_cpu, 0.5), percentile(lat_cpu, 0.99));
    std::printf("model cost       %.2f GFLOP per second of audio; achieved %.1f GFLOP/s (%.1f in CPU time)\n",
                gflop_per_s, gflops, gflops_cpu);
    std::printf("sgemm            %.1f GFLOP/s (%.1f in CPU time) at %d x %d x %d: the model at that rate, RTF %.3f "
                "(%.3f)\n", sgemm.gflops, sgemm.gflops_cpu, hp.chunk_size, hp.hidden_dim, hp.chunk_size,
                gflop_per_s / sgemm.gflops, gflop_per_s / sgemm.gflops_cpu);
    std::printf("model load       %.2f ms\n", load_ms);
    std::printf("memory           peak RSS %.1f MB, engine %.2f MB\n", rss_mb, double(s->memory_bytes()) / 1048576.0);
    std::printf("machine          load average %.2f\n", load_avg);
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Params p;
  const int rc = parse_args(argc, argv, &p);
  if (rc >= 0) return kws::check_stdout("mega_rtf", rc);
  mega::set_blas_threads(1);  // engines split the work themselves (--threads)
  kws::resolve_backend(&p);
  std::string why;
  if (!mega::backend_available(p.backend, &why)) {
    std::fprintf(stderr, "mega_rtf: the %s backend is not available: %s\n", p.backend.c_str(), why.c_str());
    return kExitDevice;
  }
  return kws::check_stdout("mega_rtf", run(p));
}
