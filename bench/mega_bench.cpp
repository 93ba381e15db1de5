// SPDX-License-Identifier: Apache-2.0
// mega_bench: Google Benchmark suite for the CPU path.
//
//   ./build/bench/mega_bench [--model=PATH] [--benchmark_filter=REGEX] [--benchmark_repetitions=N]
//
// Kernels at the model's shapes (chunk attention, causal EMA, projections,
// activations), each optimized kernel next to its reference or its previous
// form, OpenBLAS sgemm at the attention's shape as the yardstick, and the
// whole model streaming chunk by chunk. Counters: GFLOP/s (FLOPs as in
// model_flops.h) against CPU time, the real-time factor, and heap
// allocations per chunk (counted by replacing the allocator, as
// tests/runtime/allocations_per_chunk.cpp does). The model defaults to the paper's
// base architecture (models/sc10-random-init.mega).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cmath>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "cpu/kernels.h"
#include "cpu/packed_weights.h"
#include "cpu/simd_kernels.h"
#include "mega/engine.hpp"
#include "mega/mega.hpp"
#include "weights.h"
#include "model_flops.h"

namespace {

std::string g_model_path = MEGA_SOURCE_DIR "/models/sc10-random-init.mega";

const std::shared_ptr<const mega::Model>& model() {
  static std::shared_ptr<const mega::Model> m = [] {
    std::string err;
    auto loaded = mega::Model::load(g_model_path, &err);
    if (!loaded) std::fprintf(stderr, "mega_bench: cannot load %s: %s\n", g_model_path.c_str(), err.c_str());
    return loaded;
  }();
  return m;
}

std::vector<float> random_floats(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

double now_s(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void set_gflops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iteration * 1e-9 * double(state.iterations()),
                                                 benchmark::Counter::kIsRate);
}

const mega::cpu::SimdKernels* simd_set(int64_t index) {
  const mega::cpu::SimdKernels* sets[4];
  const int32_t n = mega::cpu::simd_kernel_sets(sets, 4);
  return index < n ? sets[index] : nullptr;
}

// ---------------------------------------------------------------------------------------
// The yardstick: OpenBLAS sgemm, one thread.

void BM_Sgemm(benchmark::State& state) {
  const int m = int(state.range(0)), n = int(state.range(1)), k = int(state.range(2));
  mega::set_blas_threads(1);
  const auto a = random_floats(size_t(m) * size_t(k), -1, 1, 1), b = random_floats(size_t(k) * size_t(n), -1, 1, 2);
  std::vector<float> c(size_t(m) * size_t(n));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  set_gflops(state, 2.0 * m * n * k);
}
// the attention's a.v product of the base model (C x H x C), and a square one
BENCHMARK(BM_Sgemm)->Args({1000, 120, 1000})->Args({1024, 1024, 1024})->ArgNames({"m", "n", "k"});

// ---------------------------------------------------------------------------------------
// Chunk attention at the base model's shape: c = 1000, z = 30, hdim = 120, laplace.

struct AttentionCase {
  int32_t c = 1000, z = 30, hdim = 120;
  std::vector<float> q, k, v, bias, scores, o, scratch;
  AttentionCase() {
    const float f = 0.5f * std::sqrt(float(c) / std::sqrt(float(z)));
    q = random_floats(size_t(c) * z, -f, f, 3);
    k = random_floats(size_t(c) * z, -f, f, 4);
    v = random_floats(size_t(c) * hdim, -1, 1, 5);
    bias = random_floats(size_t(2 * c - 1), 0.2f, 1.2f, 6);
    scores.resize(size_t(c) * size_t(c));
    o.resize(size_t(c) * size_t(hdim));
    scratch.resize(size_t(mega::cpu::attention_scratch_floats(c, z)));
  }
  mega::cpu::AttentionParams params() {
    mega::cpu::AttentionParams p;
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.rel_pos_bias = bias.data();
    p.chunk = p.c = c;
    p.z = z;
    p.hdim = hdim;
    p.fn = mega::AttentionFn::laplace;
    p.scores = scores.data();
    p.o = o.data();
    return p;
  }
  double flops() const { return 2.0 * c * c * (z + hdim); }
};

// The previous optimized form: sgemm, a vectorized laplace pass over the (c x c) scores, sgemm.
void BM_AttentionBlas(benchmark::State& state) {
  mega::set_blas_threads(1);
  AttentionCase ac;
  const auto p = ac.params();
  for (auto _ : state) mega::cpu::attention_blas(p, mega::KernelImpl::optimized);
  set_gflops(state, ac.flops());
}
BENCHMARK(BM_AttentionBlas)->Unit(benchmark::kMillisecond);

void BM_AttentionFused(benchmark::State& state) {
  const mega::cpu::SimdKernels* set = simd_set(state.range(0));
  if (!set) return state.SkipWithError("SIMD set not supported by this CPU");
  state.SetLabel(set->name);
  AttentionCase ac;
  auto p = ac.params();
  std::vector<float> partial(size_t(mega::cpu::attention_partial_floats(ac.hdim)));
  p.partial = partial.data();
  for (auto _ : state) mega::cpu::attention_all(*set, p, ac.scratch.data());
  set_gflops(state, ac.flops());
}
BENCHMARK(BM_AttentionFused)->DenseRange(0, 2)->ArgName("set")->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------
// Causal EMA, one chunk (1000 tokens) of the base model's first layer, in
// steady state (the ring full).

struct EmaCase {
  const mega::EmaWeights& w;
  int32_t d;
  int64_t n;
  std::vector<float> x, y, ring;
  std::vector<double> h, scratch, ref_kernel;
  explicit EmaCase(const mega::Model& m)
      : w(mega::model_weights(m).layers[0].ema), d(m.hparams().embed_dim), n(m.hparams().chunk_size) {
    x = random_floats(size_t(n) * size_t(d), -1, 1, 7);
    y.resize(x.size());
    ring = random_floats(size_t(w.truncation) * size_t(d), -1, 1, 8);
    h.assign(size_t(d) * size_t(w.n_dim), 0.0);
    scratch.resize(size_t(mega::cpu::ema_scratch_doubles(w.n_dim)));
  }
  mega::cpu::EmaParams params() {
    mega::cpu::EmaParams p;
    p.w = &w;
    p.d = d;
    p.n = n;
    p.x = x.data();
    p.y = y.data();
    p.h = h.data();
    p.ring = ring.data();
    p.tokens_seen = 10 * n;
    return p;
  }
  double flops() const { return 7.0 * double(n) * d * w.n_dim; }
};

void BM_EmaCausalRef(benchmark::State& state) {
  if (!model()) return state.SkipWithError("no model");
  EmaCase ec(*model());
  ec.ref_kernel.resize(size_t(ec.d) * size_t(ec.w.truncation));
  mega::cpu::ema_lag_kernel(ec.w, ec.ref_kernel.data());
  auto p = ec.params();
  p.ref_kernel = ec.ref_kernel.data();
  for (auto _ : state) mega::cpu::ema_causal_ref(p);
  state.counters["tokens/s"] = benchmark::Counter(double(ec.n * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EmaCausalRef)->Unit(benchmark::kMillisecond);

void BM_EmaCausalSimd(benchmark::State& state) {
  const mega::cpu::SimdKernels* set = simd_set(state.range(0));
  if (!set) return state.SkipWithError("SIMD set not supported by this CPU");
  if (!model()) return state.SkipWithError("no model");
  state.SetLabel(set->name);
  EmaCase ec(*model());
  const auto p = ec.params();
  const int32_t groups = (ec.d + set->ema_group - 1) / set->ema_group;
  for (auto _ : state) set->ema_causal(p, 0, groups, ec.scratch.data());
  set_gflops(state, ec.flops());
  state.counters["tokens/s"] = benchmark::Counter(double(ec.n * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EmaCausalSimd)->DenseRange(0, 2)->ArgName("set")->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------------------------------
// Projections at the base model's shapes, one chunk of rows: OpenBLAS (+ a
// bias pass) and the SIMD kernel on the packed weights.

void BM_Linear(benchmark::State& state) {
  if (!model()) return state.SkipWithError("no model");
  mega::set_blas_threads(1);
  const mega::LayerWeights& L = mega::model_weights(*model()).layers[0];
  const mega::LinearWeights* ws[] = {&L.v_proj, &L.mx_proj, &L.h_proj, &L.fc1, &L.fc2};
  const char* names[] = {"v_proj", "mx_proj", "h_proj", "fc1", "fc2"};
  const mega::LinearWeights& w = *ws[state.range(0)];
  const bool simd = state.range(1) != 0;
  state.SetLabel(std::string(names[state.range(0)]) + (simd ? " simd " + std::string(mega::cpu::simd_kernels().name)
                                                              : " openblas"));
  const int64_t n = model()->hparams().chunk_size;
  const auto x = random_floats(size_t(n) * size_t(w.n_in), -1, 1, 9);
  std::vector<float> y(size_t(n) * size_t(w.n_out));
  const int32_t ld = mega::cpu::linear_padded_outputs(w.n_out);
  std::vector<float> packed(size_t(w.n_in + 1) * size_t(ld));
  mega::cpu::linear_pack(w, packed.data());
  for (auto _ : state) {
    if (simd) {
      mega::cpu::simd_kernels().linear({x.data(), n, &w, y.data(), packed.data(), ld});
    } else {
      mega::cpu::linear_blas({x.data(), n, &w, y.data()});
    }
  }
  set_gflops(state, 2.0 * double(n) * w.n_in * w.n_out);
}
BENCHMARK(BM_Linear)->ArgsProduct({{0, 1, 2, 3, 4}, {0, 1}})->ArgNames({"proj", "simd"})->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------------------------------
// Activations over one chunk of the widest activation (1000 x 120).

void BM_Silu(benchmark::State& state) {
  auto x = random_floats(120000, -6, 6, 10);
  const auto math = state.range(0) ? mega::KernelImpl::optimized : mega::KernelImpl::reference;
  state.SetLabel(state.range(0) ? "fast" : "reference");
  for (auto _ : state) {
    mega::cpu::vec_silu(math, x.data(), x.data(), int64_t(x.size()));
    benchmark::DoNotOptimize(x.data());
  }
  state.counters["values/s"] = benchmark::Counter(double(x.size() * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Silu)->DenseRange(0, 1)->ArgName("fast")->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------------------------------------
// The whole model, streaming: one push of one chunk per iteration.

void BM_StreamChunk(benchmark::State& state) {
  if (!model()) return state.SkipWithError("no model");
  const auto& m = model();
  const mega::HParams& hp = m->hparams();
  mega::set_blas_threads(1);
  mega::EngineOptions o;
  o.n_threads = int32_t(state.range(0));
  o.kernels = mega::KernelImpl::optimized;
  std::string err;
  auto s = mega::create_engine("cpu", m, o, &err);
  if (!s) return state.SkipWithError(err.c_str());
  const auto audio = random_floats(size_t(hp.chunk_samples()), -0.5f, 0.5f, 11);
  auto push_chunk = [&] {
    int64_t used = 0;
    bool done = false;
    s->push(audio.data(), int64_t(audio.size()), &used, &done);
    benchmark::DoNotOptimize(s->last_result().logits);
  };
  push_chunk();  // warm-up: first touch of the buffers, BLAS and worker start-up
  int64_t allocations = 0;
  double wall = 0.0, cpu = 0.0;
  for (auto _ : state) {
    const double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    allocations += mega_alloc::allocations_in(push_chunk);
    wall += now_s(CLOCK_MONOTONIC) - w0;
    cpu += now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  }
  const double chunks = double(state.iterations());
  const double audio_s = chunks / mega_bench::chunks_per_second(hp);
  state.counters["allocs/chunk"] = double(allocations) / chunks;
  // real-time factor (compute time / audio time) by the clock and by the
  // process's CPU time (all threads): on a shared machine the second is what
  // the code costs, the first what the scheduler gave it
  state.counters["RTF"] = wall / audio_s;
  state.counters["RTF_cpu"] = cpu / audio_s;
  state.counters["GFLOP/s"] = mega_bench::model_flops_per_chunk(hp).total() * chunks / wall * 1e-9;
}
BENCHMARK(BM_StreamChunk)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  // --model=PATH is ours; everything else goes to Google Benchmark
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--model=", 8) == 0) {
      g_model_path = argv[i] + 8;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = int(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  if (model()) {
    const mega::HParams& hp = model()->hparams();
    const mega_bench::ModelFlops f = mega_bench::model_flops_per_chunk(hp);
    benchmark::AddCustomContext("model", g_model_path);
    benchmark::AddCustomContext("model GFLOP per s of audio", std::to_string(mega_bench::model_flops_per_second(hp) * 1e-9));
    benchmark::AddCustomContext("of which attention", std::to_string(f.attention / f.total()));
  }
  benchmark::AddCustomContext("simd kernels", mega::cpu::simd_kernels().name);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
