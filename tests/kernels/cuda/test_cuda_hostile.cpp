// SPDX-License-Identifier: Apache-2.0
// Hostile input on the CUDA engines gives the CPU engines' results and
// statistics: NaN, Inf and beyond-full-scale samples are cleaned and counted
// in every path (one stream, batched streams, clips), and a model that
// overflows gives zero logits, counted, with the stream's state cleared as
// the CPU session clears it. Skipped without a GPU.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda_test_util.h"
#include "golden.h"
#include "overflow_model.h"
#include "test_stream.h"

using mega_test::Golden;
using mega_test::load_fixture;

namespace {

constexpr double kTol = 1e-4;  // CPU vs CUDA logits (float32; the parity tests' bound)

std::unique_ptr<mega::BatchEngine> make_batch(const std::shared_ptr<const mega::Model>& m,
                                              const std::string& backend, int32_t n) {
  std::string err;
  auto e = mega::create_batch_engine(backend, m, n, mega::EngineOptions(), &err);
  EXPECT_TRUE(e) << backend << ": " << err;
  return e;
}

// Audio with every kind of hostile sample, at positions set by `seed`.
std::vector<float> hostile(const std::vector<float>& clean, int seed) {
  std::vector<float> x = clean;
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity(), 3.5f, -1e30f, 1.0001f};
  for (size_t i = size_t(seed) * 7 + 3, k = 0; i < x.size(); i += 29 + size_t(seed), ++k) x[i] = bad[k % 6];
  return x;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << what << " at " << i;
    worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
  }
  EXPECT_LE(worst, kTol) << what;
}

void expect_same_stats(const mega::StreamStats& got, const mega::StreamStats& want, const std::string& what) {
  EXPECT_EQ(got.n_nonfinite_samples, want.n_nonfinite_samples) << what;
  EXPECT_EQ(got.n_clamped_samples, want.n_clamped_samples) << what;
  EXPECT_EQ(got.n_state_resets, want.n_state_resets) << what;
}

// Steps every stream of a batch engine through `in` (one vector per stream),
// one step at a time; the window logits of every step, stream-major per step.
std::vector<float> run_batch(mega::BatchEngine& e, const std::vector<std::vector<float>>& in) {
  const int64_t cs = e.model().hparams().chunk_samples();
  const int32_t B = e.n_streams(), nc = e.model().hparams().n_classes;
  std::vector<float> step(size_t(B * cs)), out;
  for (size_t c0 = 0; c0 + size_t(cs) <= in[0].size(); c0 += size_t(cs)) {
    for (int32_t b = 0; b < B; ++b) std::copy_n(in[size_t(b)].begin() + long(c0), cs, step.begin() + b * cs);
    EXPECT_EQ(e.submit(step.data()), mega::Status::ok) << e.last_error();
    mega::BatchResult r;
    EXPECT_EQ(e.wait(&r), mega::Status::ok) << e.last_error();
    out.insert(out.end(), r.logits, r.logits + B * nc);
  }
  return out;
}

}  // namespace

TEST(CudaHostile, StreamedSamplesAreCleanedAndCountedAsOnTheCpu) {
  MEGA_REQUIRE_GPU();
  Golden g;
  auto m = load_fixture(MEGA_FIXTURES, "tiny_patch", &g);
  ASSERT_TRUE(m);
  const std::vector<float> in = hostile(g.at("input"), 1);
  auto cpu = mega_test::engine(m, "cpu"), gpu = mega_test::engine(m, "cuda");
  ASSERT_TRUE(cpu && gpu);
  expect_close(mega_test::window_logits(*gpu, in, 37), mega_test::window_logits(*cpu, in, 37), "one stream");
  expect_same_stats(gpu->stats(), cpu->stats(), "one stream");
  EXPECT_GT(gpu->stats().n_nonfinite_samples, 0);
  EXPECT_GT(gpu->stats().n_clamped_samples, 0);
}

TEST(CudaHostile, BatchedStreamsAreCleanedAndCountedAsOnTheCpu) {
  MEGA_REQUIRE_GPU();
  Golden g;
  auto m = load_fixture(MEGA_FIXTURES, "tiny_scan", &g);
  ASSERT_TRUE(m);
  const std::vector<std::vector<float>> in = {hostile(g.at("input"), 0), g.at("input"), hostile(g.at("input"), 5)};
  auto cpu = make_batch(m, "cpu", 3), gpu = make_batch(m, "cuda", 3);
  ASSERT_TRUE(cpu && gpu);
  expect_close(run_batch(*gpu, in), run_batch(*cpu, in), "batch");
  for (int32_t b = 0; b < 3; ++b) expect_same_stats(gpu->stats(b), cpu->stats(b), "batch stream " + std::to_string(b));
  EXPECT_GT(gpu->stats(2).n_nonfinite_samples, 0);
  EXPECT_EQ(gpu->stats(1).n_nonfinite_samples, 0);
}

TEST(CudaHostile, ClipsAreCleanedAndCountedAsOnTheCpu) {
  MEGA_REQUIRE_GPU();
  for (const char* name : {"tiny_patch", "tiny_bi"}) {
    Golden g;
    auto m = load_fixture(MEGA_FIXTURES, name, &g);
    ASSERT_TRUE(m);
    const std::vector<float> in = hostile(g.at("input"), 2);
    auto cpu = mega_test::engine(m, "cpu", int64_t(in.size())), gpu = mega_test::engine(m, "cuda", int64_t(in.size()));
    ASSERT_TRUE(cpu && gpu);
    std::vector<float> a(size_t(m->hparams().n_classes)), b(a.size());
    ASSERT_EQ(gpu->classify_clip(in.data(), int64_t(in.size()), a.data()), mega::Status::ok) << gpu->last_error();
    ASSERT_EQ(cpu->classify_clip(in.data(), int64_t(in.size()), b.data()), mega::Status::ok);
    expect_close(a, b, name);
    expect_same_stats(gpu->stats(), cpu->stats(), name);
    EXPECT_GT(gpu->stats().n_nonfinite_samples, 0) << name;
  }
}

// The overflowing model: loud chunks give zero logits, counted; the state is
// cleared (positions go on), so the quiet audio after them gives the CPU's
// logits, chunk for chunk; a loud clip gives zeros and one more reset.
TEST(CudaHostile, OverflowIsContainedAsOnTheCpu) {
  MEGA_REQUIRE_GPU();
  const std::vector<uint8_t> bytes = mega_test::overflowing_model();
  std::string err;
  std::shared_ptr<const mega::Model> m = mega::Model::load_from_memory(bytes.data(), bytes.size(), &err);
  ASSERT_TRUE(m) << err;
  const mega::HParams& hp = m->hparams();
  std::vector<float> audio(size_t(3 * hp.chunk_samples()), 1.0f);
  audio.resize(size_t((hp.window_chunks + 6) * hp.chunk_samples()), 0.0f);
  for (size_t i = audio.size() - size_t(hp.chunk_samples()); i < audio.size(); ++i) audio[i] = 1e-3f * float(i % 7);

  auto cpu = mega_test::engine(m, "cpu"), gpu = mega_test::engine(m, "cuda");
  ASSERT_TRUE(cpu && gpu);
  const std::vector<float> want = mega_test::window_logits(*cpu, audio, 1000);
  const std::vector<float> got = mega_test::window_logits(*gpu, audio, 1000);
  ASSERT_GE(cpu->stats().n_state_resets, 3);  // the loud chunks (and any whose context is loud)
  expect_close(got, want, "overflow, one stream");
  expect_same_stats(gpu->stats(), cpu->stats(), "overflow, one stream");

  // batch: stream 0 loud then quiet, stream 1 quiet throughout
  const std::vector<std::vector<float>> in = {audio, std::vector<float>(audio.size(), 0.0f)};
  auto cb = make_batch(m, "cpu", 2), gb = make_batch(m, "cuda", 2);
  ASSERT_TRUE(cb && gb);
  expect_close(run_batch(*gb, in), run_batch(*cb, in), "overflow, batch");
  for (int32_t b = 0; b < 2; ++b) expect_same_stats(gb->stats(b), cb->stats(b), "overflow, batch " + std::to_string(b));

  // a loud clip
  const std::vector<float> loud(size_t(3 * hp.chunk_samples()), 1.0f);
  std::vector<float> a(size_t(hp.n_classes)), b(a.size());
  ASSERT_EQ(gpu->classify_clip(loud.data(), int64_t(loud.size()), a.data()), mega::Status::ok) << gpu->last_error();
  ASSERT_EQ(cpu->classify_clip(loud.data(), int64_t(loud.size()), b.data()), mega::Status::ok);
  EXPECT_EQ(a, std::vector<float>(a.size(), 0.0f));
  expect_same_stats(gpu->stats(), cpu->stats(), "overflow, clip");
}
