// SPDX-License-Identifier: Apache-2.0
// The teacher front end's CUDA kernels (kernels/cuda/teacher.cu) against
// their scalar reference twins (kernels/cpu/teacher_ref.cpp) on awkward
// shapes: odd frame counts, widths and heights, channel counts that are not
// multiples of 32, several streams or windows per launch, padded stream
// strides. Skipped without a GPU.
#include <cuda_fp16.h>

#include <cstdio>
#include <random>
#include <string>

#include "cpu/kernels.h"
#include "cpu/teacher_ops.h"
#include "cuda_test_util.h"
#include "golden.h"
#include "teacher.cuh"

namespace gpu = mega::gpu;
namespace teacher = mega::teacher;
using mega_test::DeviceArray;
using mega_test::expect_launched;
using mega_test::expect_close;
using mega_test::uniform;

// Each stream's frames against mel_db_ref over the same samples scaled to
// int16 values; the dB are double on both sides.
TEST(CudaTeacherKernels, MelDbMatchesReference) {
  MEGA_REQUIRE_GPU();
  std::mt19937 rng(11);
  const auto real = uniform(rng, size_t(teacher::kBins) * teacher::kFft, -0.05f, 0.05f);
  const auto imag = uniform(rng, real.size(), -0.05f, 0.05f);
  const auto mel = uniform(rng, size_t(teacher::kBins) * teacher::kMel, 0.0f, 0.1f);
  DeviceArray<float> d_real(real), d_imag(imag), d_mel(mel);
  for (int64_t n_frames : {1, 5, 13}) {
    const int32_t streams = 3;
    const int64_t stride = (n_frames - 1) * teacher::kHop + teacher::kFft + 37;  // padded
    auto samples = uniform(rng, size_t(streams * stride), -1.0f, 1.0f);
    for (int64_t i = 0; i < teacher::kFft; ++i) samples[size_t(stride + i)] = 0.0f;  // silence: the Clip floor
    std::vector<double> want(size_t(streams * n_frames * teacher::kMel));
    for (int32_t b = 0; b < streams; ++b) {
      std::vector<float> scaled(samples.begin() + b * stride, samples.begin() + (b + 1) * stride);
      for (float& s : scaled) s *= teacher::kInputScale;
      teacher::MelParams r;
      r.samples = scaled.data();
      r.n_frames = int32_t(n_frames);
      r.stft_real = real.data();
      r.stft_imag = imag.data();
      r.mel = mel.data();
      r.clip_min = 1e-10f;
      r.db = want.data() + b * n_frames * teacher::kMel;
      teacher::mel_db_ref(r);
    }
    DeviceArray<float> d_samples(samples);
    DeviceArray<double> d_power(size_t(streams * n_frames * teacher::kBins)), d_db(want.size());
    gpu::TeacherMelParams p;
    p.samples = d_samples.get();
    p.stream_stride = stride;
    p.n_streams = streams;
    p.n_frames = n_frames;
    p.input_scale = teacher::kInputScale;
    p.stft_real = d_real.get();
    p.stft_imag = d_imag.get();
    p.mel = d_mel.get();
    p.clip_min = 1e-10f;
    p.power = d_power.get();
    p.db = d_db.get();
    expect_launched(gpu::launch_teacher_mel(p, nullptr), "mel");
    const auto got = d_db.download();
    double worst = 0.0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    EXPECT_LE(worst, 1e-9) << "frames " << n_frames;
    EXPECT_NEAR(got[size_t(n_frames * teacher::kMel)], -100.0, 1e-3) << "the silent frame sits at the Clip floor";
  }
}

// Steps whose dB spread past top_db, so the floor bites, against
// mel_floor_scale one step at a time.
TEST(CudaTeacherKernels, StepFloorMatchesReference) {
  MEGA_REQUIRE_GPU();
  std::mt19937 rng(12);
  for (int64_t n_steps : {1, 7}) {
    const int64_t n = n_steps * teacher::kStepFrames * teacher::kMel;
    const auto raw = uniform(rng, size_t(n), -120.0f, 40.0f);
    const std::vector<double> db(raw.begin(), raw.end());
    std::vector<float> want(static_cast<size_t>(n));
    for (int64_t s = 0; s < n_steps; ++s) {
      const int64_t at = s * teacher::kStepFrames * teacher::kMel;
      teacher::mel_floor_scale(db.data() + at, teacher::kStepFrames, 80.0, want.data() + at);
    }
    DeviceArray<double> d_db(db);
    DeviceArray<float> d_out(want.size());
    gpu::TeacherFloorParams p;
    p.db = d_db.get();
    p.n_steps = n_steps;
    p.top_db = 80.0;
    p.out = d_out.get();
    expect_launched(gpu::launch_teacher_floor(p, nullptr), "floor");
    expect_close(d_out.download(), want, 0.0, 1.0, "floor, steps " + std::to_string(n_steps));
  }
}

namespace {

struct ConvCase {
  int32_t c_in, c_out, h, w, kh, kw, pad_w;
  bool bias, epilogue;
};

// n items of (c_in x h x w), item j at x + j stride (stride 0: packed).
void check_conv(const ConvCase& k, int32_t n, int64_t stride, std::mt19937& rng) {
  if (stride == 0) stride = int64_t(k.c_in) * k.h * k.w;
  const int64_t x_floats = (n - 1) * stride + int64_t(k.c_in) * k.h * k.w;
  const auto x = uniform(rng, size_t(x_floats), -1.0f, 1.0f);
  const auto weight = uniform(rng, size_t(k.c_out) * k.c_in * k.kh * k.kw, -0.5f, 0.5f);
  const auto bias = uniform(rng, size_t(k.c_out), -0.5f, 0.5f);
  teacher::Conv2dParams r;
  r.c_in = k.c_in;
  r.h = k.h;
  r.w = k.w;
  r.weight = weight.data();
  r.bias = k.bias ? bias.data() : nullptr;
  r.c_out = k.c_out;
  r.kh = k.kh;
  r.kw = k.kw;
  r.pad_left = r.pad_right = k.pad_w;
  const int64_t per = int64_t(k.c_out) * teacher::conv2d_out_h(r) * teacher::conv2d_out_w(r);
  std::vector<float> want(size_t(n * per));
  for (int32_t j = 0; j < n; ++j) {
    r.x = x.data() + j * stride;
    r.y = want.data() + j * per;
    teacher::conv2d_ref(r);
    if (!k.epilogue) continue;
    teacher::leaky_relu_ref(r.y, 0.2f, r.y, per);
    teacher::max_scalar_ref(r.y, -0.4f, r.y, per);
  }
  DeviceArray<float> d_x(x), d_w(weight), d_b(bias), d_y(want.size());
  gpu::TeacherConvParams p;
  p.x = d_x.get();
  p.x_stride = stride;
  p.n = n;
  p.c_in = k.c_in;
  p.h = k.h;
  p.w = k.w;
  p.weight = d_w.get();
  p.bias = k.bias ? d_b.get() : nullptr;
  p.c_out = k.c_out;
  p.kh = k.kh;
  p.kw = k.kw;
  p.pad_w = k.pad_w;
  p.epilogue = k.epilogue;
  p.alpha = 0.2f;
  p.floor = -0.4f;
  p.y = d_y.get();
  ASSERT_EQ(gpu::teacher_conv_size(p), int64_t(want.size()));
  expect_launched(gpu::launch_teacher_conv(p, nullptr), "conv");
  char what[160];
  std::snprintf(what, sizeof what, "conv %d->%d %dx%d kernel %dx%d pad %d, %d items", k.c_in, k.c_out, k.h, k.w,
                k.kh, k.kw, k.pad_w, n);
  expect_close(d_y.download(), want, 1e-5, 1.0, what);
}

}  // namespace

TEST(CudaTeacherKernels, ConvolutionMatchesReference) {
  MEGA_REQUIRE_GPU();
  std::mt19937 rng(13);
  const ConvCase cases[] = {
      {1, 24, 76, 32, 3, 3, 1, true, true},  // the first layer's shape, one window
      {5, 7, 9, 5, 1, 3, 1, true, true},     // odd widths and heights, padded in width
      {24, 33, 7, 1, 3, 1, 0, true, false},  // width 1
      {48, 72, 3, 3, 3, 1, 0, false, true},  // one output row, no bias
      {3, 5, 4, 2, 1, 3, 1, true, true},     // the kernel wider than the input
      {96, 96, 3, 1, 3, 1, 0, false, false},  // the last layer: no bias, no epilogue
  };
  for (const ConvCase& k : cases) check_conv(k, 3, 0, rng);
  // streams' frames read where they lie (a stride past the image: the frames
  // only the floor reads), as the first layer reads them for 3 tokens
  check_conv({1, 24, 92, 32, 3, 3, 1, true, true}, 4, 96 * 32, rng);
  check_conv({2, 9, 5, 3, 3, 1, 0, true, true}, 5, 37, rng);
}

TEST(CudaTeacherKernels, MaxPoolMatchesReference) {
  MEGA_REQUIRE_GPU();
  std::mt19937 rng(14);
  struct PoolCase {
    int32_t n, c, h, w, kh, kw;
  };
  for (const PoolCase& k : {PoolCase{3, 24, 72, 32, 2, 2}, PoolCase{2, 5, 7, 9, 2, 2}, PoolCase{4, 33, 3, 5, 1, 2},
                            PoolCase{1, 96, 6, 2, 2, 2}}) {
    const auto x = uniform(rng, size_t(k.n) * k.c * k.h * k.w, -1.0f, 1.0f);
    teacher::MaxPoolParams r{x.data(), k.n * k.c, k.h, k.w, k.kh, k.kw, k.kh, k.kw, nullptr};
    std::vector<float> want(size_t(int64_t(k.n) * k.c * teacher::maxpool_out_h(r) * teacher::maxpool_out_w(r)));
    r.y = want.data();
    teacher::maxpool_ref(r);  // the items' planes follow each other: one (n c x h x w) pool
    DeviceArray<float> d_x(x), d_y(want.size());
    gpu::TeacherPoolParams p{d_x.get(), k.n, k.c, k.h, k.w, k.kh, k.kw, d_y.get()};
    ASSERT_EQ(gpu::teacher_pool_size(p), int64_t(want.size()));
    expect_launched(gpu::launch_teacher_pool(p, nullptr), "pool");
    expect_close(d_y.download(), want, 0.0, 1.0,
                 "pool " + std::to_string(k.c) + "x" + std::to_string(k.h) + "x" + std::to_string(k.w));
  }
}

// W e + b against the CPU's reference linear, e read as the graph leaves it
// (items x kEmbedding x n_tok); float16 storage rounds the result once and
// stores it divided by x_scale.
TEST(CudaTeacherKernels, ProjectionMatchesReference) {
  MEGA_REQUIRE_GPU();
  std::mt19937 rng(15);
  for (int32_t d : {1, 7, 16}) {
    for (int64_t n_tok : {1, 3}) {
      const int64_t items = 2, rows = items * n_tok;
      const auto graph = uniform(rng, size_t(rows * teacher::kEmbedding), -2.0f, 2.0f);
      std::vector<float> e(graph.size());  // as rows (token x kEmbedding)
      for (int64_t i = 0; i < items; ++i) {
        for (int32_t k = 0; k < teacher::kEmbedding; ++k) {
          for (int64_t t = 0; t < n_tok; ++t) {
            e[size_t((i * n_tok + t) * teacher::kEmbedding + k)] = graph[size_t((i * teacher::kEmbedding + k) * n_tok + t)];
          }
        }
      }
      const auto w = uniform(rng, size_t(d) * teacher::kEmbedding, -0.3f, 0.3f);
      const auto b = uniform(rng, size_t(d), -0.5f, 0.5f);
      mega::LinearWeights lw{w.data(), b.data(), d, teacher::kEmbedding};
      std::vector<float> want(size_t(rows * d));
      mega::cpu::LinearParams lp;
      lp.x = e.data();
      lp.n = rows;
      lp.w = &lw;
      lp.y = want.data();
      mega::cpu::linear_ref(lp);
      DeviceArray<float> d_e(graph), d_w(w), d_b(b), d_x(want.size());
      const std::string what = "project d " + std::to_string(d) + " n_tok " + std::to_string(n_tok);
      gpu::TeacherProjectParams<float> p{d_e.get(), n_tok, rows, d_w.get(), d_b.get(), d, 1.0f, d_x.get()};
      expect_launched(gpu::launch_teacher_project(p, nullptr), "project");
      expect_close(d_x.download(), want, 1e-5, 1.0, what);
      DeviceArray<__half> d_h(want.size());
      gpu::TeacherProjectParams<__half> ph{d_e.get(), n_tok, rows, d_w.get(), d_b.get(), d, 4.0f, d_h.get()};
      expect_launched(gpu::launch_teacher_project(ph, nullptr), "project fp16");
      const auto stored = d_h.download();
      std::vector<float> got(stored.size());
      for (size_t i = 0; i < stored.size(); ++i) got[i] = 4.0f * __half2float(stored[i]);
      expect_close(got, want, 2e-3, 1.0, what + " fp16");
    }
  }
}
