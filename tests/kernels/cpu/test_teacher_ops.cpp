// SPDX-License-Identifier: Apache-2.0
// The teacher front end's ops (kernels/cpu/teacher_ops.h): each optimized
// twin against its scalar reference on awkward shapes (odd sizes, 1 wide,
// channel counts that are no multiple of a vector, strides, dilations,
// uneven pads), the references against values worked by hand, and the
// streaming runner (teacher_frontend.h) equal for any block sizes and to the
// offline path. Parity with the torch port: tests/kernels/test_teacher_frontend.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu/teacher_frontend.h"
#include "cpu/teacher_ops.h"

namespace {

namespace t = mega::teacher;
using mega::KernelImpl;
using mega::Status;

std::vector<float> normal(std::mt19937& rng, size_t n, float sd) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& e : v) e = d(rng);
  return v;
}

struct ConvCase {
  int32_t c_in, c_out, h, w, kh, kw, pt, pl, pb, pr, sh, sw, dh, dw;
};

TEST(TeacherOps, ConvFastMatchesReferenceOnAwkwardShapes) {
  const ConvCase cases[] = {
      {1, 24, 76, 32, 3, 3, 0, 1, 0, 1, 1, 1, 1, 1},  // the graph's first layer
      {24, 48, 5, 3, 1, 3, 0, 1, 0, 1, 1, 1, 1, 1},   {7, 5, 9, 1, 3, 1, 0, 0, 0, 0, 1, 1, 1, 1},
      {13, 17, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1},   {3, 9, 11, 7, 3, 3, 1, 2, 0, 1, 2, 3, 1, 1},
      {5, 3, 13, 10, 3, 2, 2, 0, 1, 0, 1, 2, 2, 3},   {1, 1, 3, 3, 3, 3, 0, 0, 0, 0, 1, 1, 1, 1},
      {17, 33, 4, 1, 2, 1, 1, 0, 1, 0, 1, 1, 1, 1},
  };
  // the graph's epilogue, a LeakyRelu slope over 1 (another vectorized form), none (the last layer)
  const t::ConvEpilogue epilogues[] = {{true, 0.2f, -0.4f}, {true, 1.5f, -2.0f}, {false, 0.0f, 0.0f}};
  std::mt19937 rng(83);
  double worst = 0.0;
  for (const ConvCase& c : cases) {
    const t::ConvEpilogue& e = epilogues[(&c - cases) % 3];
    t::Conv2dParams p;
    p.c_in = c.c_in, p.h = c.h, p.w = c.w, p.c_out = c.c_out, p.kh = c.kh, p.kw = c.kw;
    p.pad_top = c.pt, p.pad_left = c.pl, p.pad_bottom = c.pb, p.pad_right = c.pr;
    p.stride_h = c.sh, p.stride_w = c.sw, p.dilation_h = c.dh, p.dilation_w = c.dw;
    const std::vector<float> x = normal(rng, size_t(c.c_in) * c.h * c.w, 1.0f);
    const std::vector<float> w = normal(rng, size_t(c.c_out) * c.c_in * c.kh * c.kw, 0.5f);
    const std::vector<float> b = normal(rng, size_t(c.c_out), 0.3f);
    p.x = x.data(), p.weight = w.data(), p.bias = b.data();
    const int64_t n = int64_t(c.c_out) * t::conv2d_out_h(p) * t::conv2d_out_w(p);
    ASSERT_GT(n, 0);
    std::vector<float> want(size_t(n) + 1, 7.0f), got(size_t(n) + 1, 7.0f);  // a guard after the outputs
    std::vector<float> packed(size_t(t::conv2d_packed_floats(p))), scratch(size_t(t::conv2d_scratch_floats(p)));
    t::conv2d_pack(p, packed.data());
    p.y = want.data();
    t::conv2d_ref(p);
    if (e.active) {
      t::leaky_relu_ref(want.data(), e.alpha, want.data(), n);
      t::max_scalar_ref(want.data(), e.floor, want.data(), n);
    }
    p.y = got.data();
    t::conv2d_fast(p, e, packed.data(), scratch.data());
    EXPECT_EQ(got[size_t(n)], 7.0f) << "conv2d_fast wrote past its output";
    for (int64_t i = 0; i < n; ++i) {
      const double diff = std::fabs(double(got[size_t(i)]) - want[size_t(i)]);
      worst = std::max(worst, diff);
      ASSERT_LE(diff, 1e-4) << "case c_in " << c.c_in << " c_out " << c.c_out << " h " << c.h << " w " << c.w
                            << ", value " << i;
    }
  }
  std::printf("conv2d_fast vs conv2d_ref: largest difference %.2e\n", worst);
}

TEST(TeacherOps, ConvReferenceByHand) {
  // a 1x3 kernel (1, 2, 3) over the row (1, 2, 3), padded one each side: 0+2+6, 1+4+9, 2+6+0
  const float x[] = {1, 2, 3}, w[] = {1, 2, 3};
  float y[3] = {};
  t::Conv2dParams p;
  p.x = x, p.c_in = 1, p.h = 1, p.w = 3, p.weight = w, p.c_out = 1, p.kh = 1, p.kw = 3;
  p.pad_left = p.pad_right = 1;
  p.y = y;
  ASSERT_EQ(t::conv2d_out_w(p), 3);
  t::conv2d_ref(p);
  EXPECT_EQ(y[0], 8.0f);
  EXPECT_EQ(y[1], 14.0f);
  EXPECT_EQ(y[2], 8.0f);
  const float v[] = {-2.0f, -1.0f, 0.5f, -0.1f};
  float r[4];
  t::leaky_relu_ref(v, 0.2f, r, 4);
  t::max_scalar_ref(r, -0.3f, r, 4);
  EXPECT_FLOAT_EQ(r[0], -0.3f);  // -0.4 floored
  EXPECT_FLOAT_EQ(r[1], -0.2f);
  EXPECT_FLOAT_EQ(r[2], 0.5f);
  EXPECT_FLOAT_EQ(r[3], -0.02f);
}

TEST(TeacherOps, MaxPoolFastMatchesReference) {
  struct Case { int32_t c, h, w, kh, kw; };
  const Case cases[] = {{24, 72, 32, 2, 2}, {5, 7, 9, 2, 2}, {3, 5, 5, 1, 2}, {1, 1, 2, 1, 2}, {7, 3, 1, 2, 1}};
  std::mt19937 rng(5);
  for (const Case& c : cases) {
    const std::vector<float> x = normal(rng, size_t(c.c) * c.h * c.w, 1.0f);
    t::MaxPoolParams p{x.data(), c.c, c.h, c.w, c.kh, c.kw, c.kh, c.kw, nullptr};
    const size_t n = size_t(c.c) * t::maxpool_out_h(p) * t::maxpool_out_w(p);
    ASSERT_GT(n, 0u);
    std::vector<float> want(n), got(n + 1, 7.0f);
    p.y = want.data();
    t::maxpool_ref(p);
    p.y = got.data();
    t::maxpool_fast(p);
    EXPECT_EQ(got[n], 7.0f);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "case " << c.c << "x" << c.h << "x" << c.w;
  }
  const float x[] = {1, 5, 2, 0, 3, 4};  // 1 x 2 x 3, pooled 2x2: the odd last column is dropped
  float y = 0;
  t::maxpool_ref(t::MaxPoolParams{x, 1, 2, 3, 2, 2, 2, 2, &y});
  EXPECT_EQ(y, 5.0f);
}

// Random weights of the real graphs' shapes (the real files are tested by the pytest where present).
struct RandomTeacher {
  std::vector<float> real, imag, mel;
  std::vector<std::vector<float>> conv_w, conv_b;
  t::TeacherWeights w;
  explicit RandomTeacher(uint32_t seed) {
    std::mt19937 rng(seed);
    real = normal(rng, size_t(t::kBins) * t::kFft, 0.05f);
    imag = normal(rng, size_t(t::kBins) * t::kFft, 0.05f);
    mel = normal(rng, size_t(t::kBins) * t::kMel, 0.1f);
    for (float& m : mel) m = std::fabs(m);
    w.stft_real = real.data(), w.stft_imag = imag.data(), w.mel = mel.data();
    for (int32_t i = 0; i < t::kConvLayers; ++i) {
      const t::ConvSpec& s = t::kConvSpecs[i];
      const float sd = 1.2f / std::sqrt(float(s.c_in * s.kh * s.kw));
      conv_w.push_back(normal(rng, size_t(t::conv_weight_floats(s)), sd));
      conv_b.push_back(normal(rng, size_t(s.c_out), 0.1f));
      w.conv_weight[i] = conv_w.back().data();
      w.conv_bias[i] = i + 1 < t::kConvLayers ? conv_b.back().data() : nullptr;
    }
  }
};

TEST(TeacherOps, MelFastMatchesReference) {
  RandomTeacher r(1);
  std::mt19937 rng(2);
  std::vector<float> audio = normal(rng, size_t(t::kFft + 7 * t::kHop), 3000.0f);
  std::fill(audio.begin() + 300, audio.begin() + 900, 0.0f);  // a stretch of silence: the Clip floor
  for (int32_t frames : {1, 3, 8}) {
    std::vector<double> want(size_t(frames) * t::kMel), got(want.size());
    t::MelParams p{audio.data(), frames, r.real.data(), r.imag.data(), r.mel.data(), 1e-10f, want.data()};
    t::mel_db_ref(p);
    std::vector<double> stft(size_t(t::kFft) * 2 * t::kBins), mel(r.mel.begin(), r.mel.end());
    std::vector<double> fr(size_t(frames) * t::kFft), spec(size_t(frames) * 2 * t::kBins);
    t::mel_pack_stft(r.real.data(), r.imag.data(), stft.data());
    p.db = got.data();
    t::mel_db_fast(p, t::MelFastParams{stft.data(), mel.data(), fr.data(), spec.data()});
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << frames << " frames, value " << i;
  }
}

std::vector<float> stream(t::TeacherFrontEnd& f, const std::vector<float>& audio, const std::vector<int64_t>& blocks) {
  f.reset();
  std::vector<float> out, room;
  size_t at = 0, b = 0;
  while (at < audio.size()) {
    const int64_t n = std::min<int64_t>(blocks[b++ % blocks.size()], int64_t(audio.size() - at));
    const int64_t coming = f.embeddings_for(n);
    room.assign(size_t(std::max<int64_t>(coming, 1) * t::kEmbedding), 0.0f);
    int64_t got = -1;
    EXPECT_EQ(f.push(audio.data() + at, n, room.data(), coming, &got), Status::ok) << f.last_error();
    EXPECT_EQ(got, coming);
    out.insert(out.end(), room.begin(), room.begin() + got * t::kEmbedding);
    at += size_t(n);
  }
  return out;
}

// A stream of speech-like level changes: loud noise bursts, quiet stretches and digital silence, so
// each step's floor differs.
std::vector<float> test_audio(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> a = normal(rng, n, 1.0f);
  for (size_t i = 0; i < n; ++i) {
    const size_t part = (i / 2500) % 4;
    a[i] *= part == 0 ? 4000.0f : part == 1 ? 30.0f : part == 2 ? 0.0f : 12000.0f;
  }
  return a;
}

TEST(TeacherFrontEnd, StreamingEqualsOfflineForAnyBlockSizes) {
  RandomTeacher r(3);
  const std::vector<float> audio = test_audio(30000, 4);
  const int64_t n_emb = t::offline_embeddings(int64_t(audio.size()), t::kStepFrames);
  ASSERT_EQ(n_emb, (30000 - 13152) / 1280 + 1);
  std::vector<float> offline(size_t(n_emb) * t::kEmbedding);
  int64_t n_out = 0;
  ASSERT_EQ(t::embed_offline(r.w, KernelImpl::optimized, audio.data(), int64_t(audio.size()), t::kStepFrames,
                             offline.data(), n_emb, &n_out), Status::ok);
  ASSERT_EQ(n_out, n_emb);
  std::unique_ptr<t::TeacherFrontEnd> f;
  const char* error = nullptr;
  ASSERT_EQ(t::TeacherFrontEnd::create(r.w, KernelImpl::optimized, &f, &error), Status::ok);
  const std::vector<float> whole = stream(*f, audio, {int64_t(audio.size())});
  ASSERT_EQ(whole.size(), offline.size());
  double scale = 0.0, worst = 0.0;
  for (float v : offline) scale = std::max(scale, double(std::fabs(v)));
  ASSERT_GT(scale, 0.1);
  for (size_t i = 0; i < whole.size(); ++i) worst = std::max(worst, std::fabs(double(whole[i]) - offline[i]));
  EXPECT_LE(worst, 1e-5 * scale) << "streamed in one block against embed_offline";
  const std::vector<std::vector<int64_t>> blocks = {{1}, {7}, {160}, {1279}, {1280}, {1281}, {5000}, {1, 2000, 13, 999}};
  for (const auto& b : blocks) EXPECT_EQ(stream(*f, audio, b), whole) << "blocks of " << b[0];
  std::printf("streaming vs offline: largest difference %.2e of %.2f\n", worst, scale);
}

TEST(TeacherFrontEnd, ReferenceKernelsGiveTheSameEmbeddings) {
  RandomTeacher r(5);
  const std::vector<float> audio = test_audio(16000, 6);
  std::vector<float> fast(size_t(t::kEmbedding) * 4), ref(fast.size());
  int64_t n_fast = 0, n_ref = 0;
  ASSERT_EQ(t::embed_offline(r.w, KernelImpl::optimized, audio.data(), 16000, 0, fast.data(), 4, &n_fast), Status::ok);
  ASSERT_EQ(t::embed_offline(r.w, KernelImpl::reference, audio.data(), 16000, 0, ref.data(), 4, &n_ref), Status::ok);
  ASSERT_EQ(n_fast, t::offline_embeddings(16000, 0));
  ASSERT_EQ(n_fast, n_ref);
  for (size_t i = 0; i < size_t(n_fast) * t::kEmbedding; ++i) ASSERT_NEAR(fast[i], ref[i], 1e-4) << i;
}

TEST(TeacherFrontEnd, RefusesBadInputAndLosesNothing) {
  RandomTeacher r(7);
  std::unique_ptr<t::TeacherFrontEnd> f;
  const char* error = nullptr;
  t::TeacherWeights missing = r.w;
  missing.conv_bias[3] = nullptr;
  EXPECT_EQ(t::TeacherFrontEnd::create(missing, KernelImpl::optimized, &f, &error), Status::invalid_argument);
  EXPECT_STREQ(error, "a convolution's bias");
  ASSERT_EQ(t::TeacherFrontEnd::create(r.w, KernelImpl::optimized, &f, &error), Status::ok);
  const std::vector<float> audio = test_audio(13152 + 1280, 8);
  std::vector<float> out(size_t(t::kEmbedding) * 2);
  int64_t n_out = -1;
  EXPECT_EQ(f->push(audio.data(), -1, out.data(), 2, &n_out), Status::invalid_argument);
  EXPECT_EQ(f->embeddings_for(int64_t(audio.size())), 2);
  EXPECT_EQ(f->push(audio.data(), int64_t(audio.size()), out.data(), 1, &n_out), Status::invalid_argument);
  EXPECT_NE(std::string(f->last_error()).find("room"), std::string::npos);
  EXPECT_EQ(n_out, 0);
  EXPECT_EQ(f->samples_seen(), 0);  // nothing consumed: the same push with room gives both
  ASSERT_EQ(f->push(audio.data(), int64_t(audio.size()), out.data(), 2, &n_out), Status::ok);
  ASSERT_EQ(n_out, 2);
  std::unique_ptr<t::TeacherFrontEnd> fresh;
  ASSERT_EQ(t::TeacherFrontEnd::create(r.w, KernelImpl::optimized, &fresh, &error), Status::ok);
  EXPECT_EQ(stream(*fresh, audio, {int64_t(audio.size())}), out);
  int64_t n = 0;
  EXPECT_EQ(t::embed_offline(r.w, KernelImpl::optimized, audio.data(), 100, 3, out.data(), 2, &n),
            Status::invalid_argument);
}

}  // namespace
