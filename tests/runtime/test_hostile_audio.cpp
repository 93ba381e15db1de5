// SPDX-License-Identifier: Apache-2.0
// Hostile audio: NaN/Inf, huge, denormal samples, full-scale square waves,
// DC and silence never make an engine produce a non-finite logit, and the
// input hygiene (mega.hpp, kMaxSampleMagnitude) does exactly what it says:
// the logits equal those of the same audio with the bad samples replaced,
// and every replacement is counted.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "golden.h"
#include "mega_reseal.h"
#include "overflow_model.h"
#include "test_stream.h"
#include "mega/mega.hpp"
#include "mega/mega_kws.h"
#include "mega_model_generated.h"

using mega_test::load;
using mega_test::cpu_engine;

namespace {

std::string demo_model() { return std::string(MEGA_MODELS) + "/sc10-demo.mega"; }

// Streaming models: the bundled demo (patch embedding, 4 layers) and tiny
// fixtures covering input scaling, attention functions, norms and K = 0.
std::vector<std::string> streaming_models() {
  return {demo_model(), mega_test::fixture_path("tiny_uni.mega"), mega_test::fixture_path("tiny_patch.mega"),
          mega_test::fixture_path("tiny_softmax_ln_post.mega"),
          mega_test::fixture_path("tiny_relu2_scale_noffn.mega")};
}

// Every chunk's window logits, streamed in blocks of `block` samples.
std::vector<float> stream_logits(mega::Engine& s, const std::vector<float>& in, int64_t block = 777) {
  return mega_test::window_logits(s, in, block);
}

int64_t count_non_finite(const std::vector<float>& v) {
  int64_t n = 0;
  for (float x : v) n += std::isfinite(x) ? 0 : 1;
  return n;
}

// Speech-like test audio: a few tones and noise at a moderate level.
std::vector<float> test_audio(const mega::HParams& hp, int64_t n_chunks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  std::vector<float> x(size_t(n_chunks * hp.chunk_samples()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double t = double(i) / hp.sample_rate;
    x[i] = float(0.3 * std::sin(2 * M_PI * 220 * t) * std::sin(2 * M_PI * 3 * t) + 0.1 * std::sin(2 * M_PI * 1250 * t)) +
           noise(rng);
  }
  return x;
}

// Enough chunks for the EMA to carry the bad samples' neighbourhood through every layer.
int64_t test_chunks(const mega::HParams& hp) {
  const int64_t k_chunks = (hp.truncation + hp.chunk_size - 1) / hp.chunk_size;
  return hp.window_chunks + hp.n_layers * std::max<int64_t>(k_chunks, 1) + 6;
}

}  // namespace

TEST(HostileAudio, NonFiniteSamplesAreReplacedByZeroAndCounted) {
  for (const std::string& path : streaming_models()) {
    auto m = load(path);
    ASSERT_TRUE(m);
    const mega::HParams& hp = m->hparams();
    const int64_t cs = hp.chunk_samples();
    std::vector<float> dirty = test_audio(hp, test_chunks(hp), 1);
    std::vector<float> clean = dirty;
    // single samples, a burst spanning a chunk boundary, and a whole chunk of NaN
    std::vector<size_t> bad = {0, 3, size_t(cs) - 1, size_t(cs), size_t(2 * cs + 1)};
    for (size_t i = size_t(3 * cs - 5); i < size_t(3 * cs + 5); ++i) bad.push_back(i);
    for (size_t i = size_t(5 * cs); i < size_t(6 * cs); ++i) bad.push_back(i);
    const float kinds[3] = {NAN, INFINITY, -INFINITY};
    for (size_t j = 0; j < bad.size(); ++j) {
      dirty[bad[j]] = kinds[j % 3];
      clean[bad[j]] = 0.0f;
    }
    for (mega::KernelImpl impl : {mega::KernelImpl::optimized, mega::KernelImpl::reference}) {
      // under an emulator the demo model runs its optimized kernels alone (its reference kernels took
      // most of the case's 100 s under qemu); the tiny models run both there, and the native build
      // runs the demo model with both
      if (mega_test::kEmulated && path == demo_model() && impl == mega::KernelImpl::reference) continue;
      auto a = cpu_engine(m, impl), b = cpu_engine(m, impl);
      const std::vector<float> got = stream_logits(*a, dirty), want = stream_logits(*b, clean);
      ASSERT_EQ(got.size(), size_t(test_chunks(hp) * hp.n_classes)) << path;
      EXPECT_EQ(count_non_finite(got), 0) << path;
      EXPECT_EQ(got, want) << path << ": NaN/Inf must act exactly as 0";
      EXPECT_EQ(a->stats().n_nonfinite_samples, int64_t(bad.size())) << path;
      EXPECT_EQ(a->stats().n_clamped_samples, 0) << path;
      EXPECT_EQ(a->stats().n_state_resets, 0) << path;
      EXPECT_EQ(b->stats().n_nonfinite_samples, 0) << path;
      // offline (classify_clip) applies the same rule and keeps counting
      std::vector<float> lg(size_t(hp.n_classes)), lg_clean(lg.size());
      ASSERT_EQ(a->classify_clip(dirty.data(), int64_t(dirty.size()), lg.data()), mega::Status::ok);
      ASSERT_EQ(b->classify_clip(clean.data(), int64_t(clean.size()), lg_clean.data()), mega::Status::ok);
      EXPECT_EQ(lg, lg_clean) << path;
      EXPECT_EQ(a->stats().n_nonfinite_samples, 2 * int64_t(bad.size())) << path;
    }
  }
}

TEST(HostileAudio, BidirectionalClipsReplaceNonFiniteSamplesToo) {
  for (const char* name : {"tiny_bi.mega", "tiny_rms_bi_untrunc.mega"}) {
    auto m = load(mega_test::fixture_path(name));
    ASSERT_TRUE(m);
    const mega::HParams& hp = m->hparams();
    std::vector<float> dirty = test_audio(hp, hp.window_chunks, 2), clean = dirty;
    dirty[1] = NAN;
    dirty[7] = -INFINITY;
    clean[1] = clean[7] = 0.0f;
    auto s = cpu_engine(m);
    std::vector<float> a(size_t(hp.n_classes)), b(a.size());
    ASSERT_EQ(s->classify_clip(dirty.data(), int64_t(dirty.size()), a.data()), mega::Status::ok);
    ASSERT_EQ(s->classify_clip(clean.data(), int64_t(clean.size()), b.data()), mega::Status::ok);
    EXPECT_EQ(a, b) << name;
    EXPECT_EQ(count_non_finite(a), 0) << name;
    EXPECT_EQ(s->stats().n_nonfinite_samples, 2) << name;
  }
}

TEST(HostileAudio, HugeSamplesAreClampedAndCounted) {
  for (const std::string& path : streaming_models()) {
    auto m = load(path);
    ASSERT_TRUE(m);
    const mega::HParams& hp = m->hparams();
    std::vector<float> dirty = test_audio(hp, test_chunks(hp), 3), clean = dirty;
    const float huge[4] = {FLT_MAX, -FLT_MAX, 1e30f, -1.0000001f};
    int64_t n_huge = 0;
    for (size_t i = 11; i < dirty.size(); i += size_t(hp.chunk_samples()) / 2 + 1, ++n_huge) {
      dirty[i] = huge[n_huge % 4];
      clean[i] = std::copysign(mega::kMaxSampleMagnitude, dirty[i]);
    }
    dirty[5] = clean[5] = mega::kMaxSampleMagnitude;  // the bound itself is not clamped
    auto a = cpu_engine(m), b = cpu_engine(m);
    const std::vector<float> got = stream_logits(*a, dirty, 4096), want = stream_logits(*b, clean, 4096);
    EXPECT_EQ(count_non_finite(got), 0) << path;
    EXPECT_EQ(got, want) << path;
    EXPECT_EQ(a->stats().n_clamped_samples, n_huge) << path;
    EXPECT_EQ(a->stats().n_nonfinite_samples, 0) << path;
    EXPECT_EQ(a->stats().n_state_resets, 0) << path;
  }
}

TEST(HostileAudio, DenormalSamplesActAsSilence) {
  for (const std::string& path : streaming_models()) {
    auto m = load(path);
    ASSERT_TRUE(m);
    const mega::HParams& hp = m->hparams();
    const size_t n = size_t(test_chunks(hp) * hp.chunk_samples());
    std::vector<float> denormal(n), silence(n, 0.0f);
    const float tiny[4] = {FLT_TRUE_MIN, -FLT_TRUE_MIN, 1e-40f, -FLT_MIN / 2};
    for (size_t i = 0; i < n; ++i) denormal[i] = tiny[i % 4];
    ASSERT_EQ(std::fpclassify(denormal[2]), FP_SUBNORMAL);
    auto a = cpu_engine(m), b = cpu_engine(m);
    const std::vector<float> got = stream_logits(*a, denormal), want = stream_logits(*b, silence);
    EXPECT_EQ(count_non_finite(got), 0) << path;
    EXPECT_LE(mega_test::max_abs_diff(got.data(), want.data(), got.size()), 1e-6) << path;
    EXPECT_EQ(a->stats().n_nonfinite_samples + a->stats().n_clamped_samples, 0) << path;
  }
}

// Signals at the edge of the valid range (full scale), for 10 s (demo; 3 s
// under an emulator, 4 minutes there otherwise) or 200 chunks (tiny models):
// every logit finite, no state reset needed; and the same at 1e6 x full
// scale, which clipping brings back to full scale.
TEST(HostileAudio, SquareWavesDcAndSilenceStayFinite) {
  for (const std::string& path : streaming_models()) {
    auto m = load(path);
    ASSERT_TRUE(m);
    const mega::HParams& hp = m->hparams();
    const int64_t seconds = mega_test::kEmulated ? 3 : 10;
    const int64_t n = std::min<int64_t>(seconds * hp.sample_rate, 200 * hp.chunk_samples());
    struct Signal {
      const char* name;
      float (*at)(int64_t i, float amp);
    };
    const Signal signals[] = {
        {"square period 2 (Nyquist)", [](int64_t i, float a) { return i % 2 ? a : -a; }},
        {"square period 7", [](int64_t i, float a) { return (i / 7) % 2 ? a : -a; }},
        {"square period 160", [](int64_t i, float a) { return (i / 80) % 2 ? a : -a; }},
        {"square 1 Hz", [](int64_t i, float a) { return (i / 8000) % 2 ? a : -a; }},
        {"DC +", [](int64_t, float a) { return a; }},
        {"DC -", [](int64_t, float a) { return -a; }},
        {"silence", [](int64_t, float) { return 0.0f; }},
        {"DC offset + clipped tone", [](int64_t i, float a) {
           return std::max(-a, std::min(a, 0.5f * a + 2.0f * a * float(std::sin(0.05 * double(i)))));
         }},
    };
    for (const Signal& sig : signals) {
      for (float amp : {mega::kMaxSampleMagnitude, 1e6f}) {
        auto s = cpu_engine(m);
        std::vector<float> x(4096);
        int64_t bad = 0, chunks = 0;
        for (int64_t off = 0; off < n; off += int64_t(x.size())) {
          for (size_t i = 0; i < x.size(); ++i) x[i] = sig.at(off + int64_t(i), amp);
          s->push_all(x.data(), int64_t(x.size()), [&](const mega::ChunkResult& r) {
            ++chunks;
            for (int32_t c = 0; c < hp.n_classes; ++c) bad += std::isfinite(r.logits[c]) ? 0 : 1;
          });
        }
        EXPECT_GT(chunks, 0);
        EXPECT_EQ(bad, 0) << path << ": " << sig.name << " at amplitude " << amp;
        EXPECT_EQ(s->stats().n_state_resets, 0) << path << ": " << sig.name << " at amplitude " << amp;
      }
    }
  }
}

// The last line of defence: a model whose arithmetic overflows on loud input
// gives zero logits for those chunks (counted) instead of NaN, and the stream
// recovers: once a window of normal audio has passed, the logits equal a
// fresh engine's on the same audio.
TEST(HostileAudio, OverflowInsideTheModelResetsTheStateInsteadOfPoisoningIt) {
  const std::vector<uint8_t> bytes = mega_test::overflowing_model();
  std::string err;
  auto m = mega::Model::load_from_memory(bytes.data(), bytes.size(), &err);
  ASSERT_TRUE(m) << err;
  const mega::HParams& hp = m->hparams();
  auto s = cpu_engine(m);
  const std::vector<float> loud(size_t(3 * hp.chunk_samples()), 1.0f);
  const std::vector<float> got_loud = stream_logits(*s, loud, 5);
  EXPECT_EQ(count_non_finite(got_loud), 0);
  // every loud chunk overflows: each is zeroed and counted
  EXPECT_EQ(s->stats().n_state_resets, 3);
  EXPECT_EQ(got_loud, std::vector<float>(got_loud.size(), 0.0f));
  // afterwards: quiet audio, compared with a fresh engine
  const std::vector<float> quiet(size_t((hp.window_chunks + 3) * hp.chunk_samples()), 0.0f);
  const int64_t resets = s->stats().n_state_resets;
  const std::vector<float> after = stream_logits(*s, quiet, 3);
  auto fresh = cpu_engine(m);
  const std::vector<float> want = stream_logits(*fresh, quiet, 3);
  EXPECT_EQ(s->stats().n_state_resets, resets) << "quiet audio must not overflow";
  ASSERT_EQ(after.size(), want.size());
  const size_t tail = size_t(hp.n_classes);
  EXPECT_EQ(std::vector<float>(after.end() - long(tail), after.end()), std::vector<float>(want.end() - long(tail), want.end()));
  EXPECT_EQ(count_non_finite(after), 0);
  // offline too
  std::vector<float> lg(size_t(hp.n_classes));
  ASSERT_EQ(s->classify_clip(loud.data(), int64_t(loud.size()), lg.data()), mega::Status::ok);
  EXPECT_EQ(count_non_finite(lg), 0);
  EXPECT_EQ(s->stats().n_state_resets, resets + 1);
}

TEST(HostileAudio, CApiReportsTheCounts) {
  mega_status st = MEGA_ERR_IO;
  mega_model* m = mega_model_load(demo_model().c_str(), &st);
  ASSERT_NE(m, nullptr) << mega_load_error();
  mega_session* s = mega_session_create(m, &st);
  ASSERT_NE(s, nullptr);
  std::vector<float> x(size_t(mega_model_chunk_samples(m)), 0.1f);
  x[0] = NAN;
  x[1] = INFINITY;
  x[2] = 1e9f;
  std::vector<float> logits(size_t(mega_model_n_classes(m)));
  int64_t used = 0;
  int32_t done = 0;
  ASSERT_EQ(mega_session_push(s, x.data(), int64_t(x.size()), &used, &done, logits.data()), MEGA_OK);
  EXPECT_EQ(done, 1);
  EXPECT_EQ(count_non_finite(logits), 0);
  int64_t nonfinite = -1, clamped = -1, resets = -1;
  ASSERT_EQ(mega_session_stats(s, &nonfinite, &clamped, &resets), MEGA_OK);
  EXPECT_EQ(nonfinite, 2);
  EXPECT_EQ(clamped, 1);
  EXPECT_EQ(resets, 0);
  EXPECT_EQ(mega_session_stats(s, nullptr, nullptr, nullptr), MEGA_OK);
  EXPECT_EQ(mega_session_stats(nullptr, &nonfinite, nullptr, nullptr), MEGA_ERR_INVALID_ARGUMENT);
  mega_session_reset(s);
  ASSERT_EQ(mega_session_stats(s, &nonfinite, nullptr, nullptr), MEGA_OK);
  EXPECT_EQ(nonfinite, 2) << "reset keeps the counts";
  mega_session_free(s);
  mega_model_free(m);
}
