// SPDX-License-Identifier: Apache-2.0
// Float16 storage decided from the peaks the converter stored (schema 5,
// Model.fp16_range; kernels/cuda/fp16_range.h): engine creation reads them
// instead of running its float32 host pass, files without them still get the
// pass, stored peaks beyond float16 are refused with the tensor, layer and
// peak, and the stored peaks are the ones the host pass measures, on every
// tiny configuration and both base-size models.
#include <cmath>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "fp16_range.h"
#include "golden.h"
#include "test_stream.h"
#include "fp16_peak_edit.h"

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), {});
}

std::shared_ptr<const mega::Model> from_bytes(const std::vector<uint8_t>& b) {
  std::string err;
  auto m = mega::Model::load_from_memory(b.data(), b.size(), &err);
  EXPECT_TRUE(m) << err;
  return m;
}

std::unique_ptr<mega::Engine> fp16_engine(const std::shared_ptr<const mega::Model>& m, std::string* err,
                                          mega::Status* st) {
  mega::EngineOptions o;
  o.fp16 = true;
  return mega::create_engine("cuda", m, o, err, st);
}

// The stored peaks against the host pass's: the same tensor and layer, the
// same value to float32 rounding of two different forward passes, so the
// same x_scale.
void expect_stored_peaks_measured(const std::shared_ptr<const mega::Model>& m, const std::string& name) {
  ASSERT_TRUE(m) << name;
  const mega::Fp16Peaks& stored = m->info().fp16_peaks;
  ASSERT_TRUE(stored.present) << name;
  const mega::Fp16Peaks measured = mega::gpu::fp16_range(*m);
  const std::pair<const mega::Fp16Peak*, const mega::Fp16Peak*> pairs[] = {{&stored.residual, &measured.residual},
                                                                          {&stored.other, &measured.other}};
  for (const auto& [s, r] : pairs) {
    EXPECT_EQ(s->tensor, r->tensor) << name;
    EXPECT_EQ(s->layer, r->layer) << name << " " << s->tensor;
    EXPECT_NEAR(s->value, r->value, 1e-4 * r->value) << name << " " << s->tensor;
  }
  float a = 0.0f, b = 0.0f;
  char why[512] = "";
  EXPECT_EQ(mega::gpu::fp16_x_scale_from(stored, "self-test", &a, why, sizeof why),
            mega::gpu::fp16_x_scale_from(measured, "self-test", &b, why, sizeof why));
  EXPECT_EQ(a, b) << name;
  std::printf("[ fp16     ] %s: residual %s (layer %d) %.4g, other %s (layer %d) %.4g; x_scale %g\n", name.c_str(),
              stored.residual.tensor.c_str(), int(stored.residual.layer), double(stored.residual.value),
              stored.other.tensor.c_str(), int(stored.other.layer), double(stored.other.value), double(a));
}

}  // namespace

TEST(CudaFp16Peaks, EngineCreationReadsTheStoredPeaks) {
  MEGA_REQUIRE_GPU();
  auto m = mega_test::load_model(mega_test::fixture_path("good_tiny.mega"));
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->info().fp16_peaks.present);
  const int64_t passes = mega::gpu::fp16_range_passes();
  std::string err;
  mega::Status st = mega::Status::ok;
  auto e = fp16_engine(m, &err, &st);
  ASSERT_TRUE(e) << err;
  mega::EngineOptions o;
  o.fp16 = true;
  EXPECT_TRUE(mega::create_batch_engine("cuda", m, 4, o, &err, &st)) << err;
  EXPECT_EQ(mega::gpu::fp16_range_passes(), passes) << "engine creation ran the host pass";
  // and the engine runs as float16 does: close to float32 on the self-test clip
  const std::vector<float>& clip = m->self_test_input();
  std::vector<float> half(size_t(m->hparams().n_classes)), full(half.size());
  ASSERT_EQ(e->classify_clip(clip.data(), int64_t(clip.size()), half.data()), mega::Status::ok) << e->last_error();
  auto f32 = mega_test::engine(m, "cuda");
  ASSERT_TRUE(f32);
  ASSERT_EQ(f32->classify_clip(clip.data(), int64_t(clip.size()), full.data()), mega::Status::ok);
  EXPECT_LE(mega_test::max_abs_diff(half.data(), full.data(), half.size()), 0.05);
}

TEST(CudaFp16Peaks, FilesWithoutThemStillGetTheHostPass) {
  MEGA_REQUIRE_GPU();
  auto old = mega_test::load_model(mega_test::fixture_path("good_no_fp16_range.mega"));
  ASSERT_TRUE(old);
  ASSERT_FALSE(old->info().fp16_peaks.present);
  const int64_t passes = mega::gpu::fp16_range_passes();
  std::string err;
  mega::Status st = mega::Status::ok;
  EXPECT_TRUE(fp16_engine(old, &err, &st)) << err;
  EXPECT_EQ(mega::gpu::fp16_range_passes(), passes + 1);
  // the same weights with stored peaks: the same decision
  auto stored = mega_test::load_model(mega_test::fixture_path("good_tiny.mega"));
  ASSERT_TRUE(stored);
  float a = 0.0f, b = 0.0f;
  char why[512] = "";
  ASSERT_EQ(mega::gpu::fp16_x_scale(*old, &a, why, sizeof why), mega::Status::ok) << why;
  ASSERT_EQ(mega::gpu::fp16_x_scale(*stored, &b, why, sizeof why), mega::Status::ok) << why;
  EXPECT_EQ(a, b);
}

// Stored peaks beyond float16 refuse it from the file alone, naming the
// stored tensor, its layer and the peak; float32 still runs.
TEST(CudaFp16Peaks, StoredPeakBeyondFloat16IsRefused) {
  MEGA_REQUIRE_GPU();
  const std::vector<uint8_t> good = read_bytes(mega_test::fixture_path("good_tiny.mega"));
  for (const bool residual : {true, false}) {
    // the residual stream fits 65504 / 2 scaled by up to 1/1024; the rest as it is
    auto m = from_bytes(mega_test::with_fp16_peak(good, residual, residual ? 4e7f : 4e4f));
    ASSERT_TRUE(m);
    const mega::Fp16Peak& p = residual ? m->info().fp16_peaks.residual : m->info().fp16_peaks.other;
    const int64_t passes = mega::gpu::fp16_range_passes();
    std::string err;
    mega::Status st = mega::Status::ok;
    EXPECT_FALSE(fp16_engine(m, &err, &st));
    EXPECT_EQ(st, mega::Status::unsupported_model);
    EXPECT_NE(err.find("do not fit float16"), std::string::npos) << err;
    EXPECT_NE(err.find("its " + p.tensor + " "), std::string::npos) << err;
    const std::string where = p.layer < 0 ? "before the first layer" : "in layer " + std::to_string(p.layer);
    EXPECT_NE(err.find(where), std::string::npos) << err;
    EXPECT_NE(err.find(residual ? "reaches 4e+07" : "reaches 4e+04"), std::string::npos) << err;
    EXPECT_EQ(mega::gpu::fp16_range_passes(), passes);
    EXPECT_TRUE(mega_test::engine(m, "cuda"));
    std::printf("[ fp16     ] refused: %s\n", err.c_str());
  }
}

TEST(CudaFp16Peaks, StoredPeaksAreWhatTheRuntimeMeasures) {
  const char* tiny[] = {"tiny_uni", "tiny_bi", "tiny_softmax_ln_post", "tiny_relu2_scale_noffn", "tiny_rms_bi_untrunc",
                        "tiny_patch", "tiny_logpower", "tiny_lognorm", "tiny_logmel", "tiny_scan"};
  for (const char* name : tiny) {
    expect_stored_peaks_measured(mega_test::load_model(std::string(MEGA_GENERATED) + "/peaks/" + name + ".mega"),
                                 name);
  }
  expect_stored_peaks_measured(mega_test::load_model(mega_test::fixture_path("good_tiny.mega")), "good_tiny");
}

TEST(CudaFp16Peaks, BaseModelsStoredPeaksAreWhatTheRuntimeMeasures) {
  for (const char* name : {"base_uni", "base_bi"}) {
    expect_stored_peaks_measured(mega_test::load_model(std::string(MEGA_GENERATED) + "/" + name + ".mega"), name);
  }
}
