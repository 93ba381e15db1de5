// SPDX-License-Identifier: Apache-2.0
// The CUDA engines end to end, against the golden fixtures and the CPU:
// clip parity, streaming equals offline for any block size (bit-identical
// across block sizes), graphs equal direct launches, B batched streams equal
// B single streams, the asynchronous submit/poll path, float16 against
// float32 within a stated tolerance. Skipped without a GPU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "cuda_test_util.h"
#include "device_step.h"
#include "fp16_range.h"
#include "golden.h"
#include "mega/mega_kws.h"
#include "overflow_model.h"
#include "stream.h"
#include "test_stream.h"

using mega_test::Golden;
using mega_test::load_fixture;
using mega_test::max_abs_diff;

namespace {

using mega_test::engine;

// Per-chunk window logits of `in` pushed in blocks of `block` samples.
std::vector<float> stream(mega::Engine& e, const std::vector<float>& in, int64_t block) {
  return mega_test::window_logits(e, in, block);
}

const char* kTiny[] = {"tiny_uni", "tiny_bi", "tiny_softmax_ln_post", "tiny_relu2_scale_noffn",
                       "tiny_rms_bi_untrunc", "tiny_patch", "tiny_logpower", "tiny_lognorm", "tiny_logmel", "tiny_scan"};

// The clip's logits against the golden ones, or, when `chunk_limit` cuts the
// clip (the stand-in's base-size cases), against the CPU engine's on the
// same prefix.
void check_clip(const std::string& dir, const std::string& name, double tol,
                int64_t chunk_limit = int64_t(1) << 40) {
  Golden g;
  auto m = load_fixture(dir, name, &g);
  ASSERT_TRUE(m);
  const auto in = mega_test::first_chunks(g.at("input"), m->hparams().chunk_samples(), chunk_limit);
  const bool whole = in.size() == g.at("input").size();
  auto e = engine(m, "cuda", int64_t(in.size()));
  ASSERT_TRUE(e);
  std::vector<float> logits(size_t(m->hparams().n_classes)), want = g.at("logits");
  ASSERT_EQ(e->classify_clip(in.data(), int64_t(in.size()), logits.data()), mega::Status::ok) << e->last_error();
  if (!whole) {
    auto cpu = engine(m, "cpu", int64_t(in.size()));
    ASSERT_TRUE(cpu);
    ASSERT_EQ(cpu->classify_clip(in.data(), int64_t(in.size()), want.data()), mega::Status::ok);
  }
  const double d = max_abs_diff(logits.data(), want.data(), logits.size());
  EXPECT_LE(d, tol) << name;
  std::printf("[ cuda     ] %s: clip logits max abs diff %.3g (%s)\n", name.c_str(), d,
              whole ? "vs PyTorch" : "first chunks, vs the CPU engine");
}

}  // namespace

TEST(CudaParity, TinyModelsMatchPyTorch) {
  MEGA_REQUIRE_GPU();
  for (const char* name : kTiny) check_clip(MEGA_FIXTURES, name, 2e-5);
}

TEST(CudaParity, BaseModelsMatchPyTorch) {
  MEGA_REQUIRE_GPU();
  check_clip(MEGA_GENERATED, "base_uni", 1e-4, mega_test::kBaseChunkLimit);
  check_clip(MEGA_GENERATED, "base_bi", 1e-4, mega_test::kBaseChunkLimit);
}

TEST(CudaParity, SelfTestPasses) {
  MEGA_REQUIRE_GPU();
  for (const char* name : kTiny) {
    auto m = mega_test::load_model(mega_test::fixture_path(std::string(name) + ".mega"));
    ASSERT_TRUE(m);
    auto e = engine(m, "cuda");
    ASSERT_TRUE(e);
    float diff = -1.0f;
    EXPECT_EQ(e->self_test(&diff), mega::Status::ok) << name << " diff " << diff << " " << e->last_error();
  }
}

namespace {

struct StreamCase {
  std::string dir, name;
  std::vector<int64_t> blocks;
  double tol;
  int64_t chunk_limit = int64_t(1) << 40;
};

void check_streaming(const std::vector<StreamCase>& cases) {
  for (const StreamCase& c : cases) {
    Golden g;
    auto m = load_fixture(c.dir, c.name, &g);
    ASSERT_TRUE(m);
    auto e = engine(m, "cuda");
    ASSERT_TRUE(e);
    std::vector<float> first;
    const int64_t cs = m->hparams().chunk_samples();
    const auto input = mega_test::first_chunks(g.at("input"), cs, c.chunk_limit);
    const int64_t n_chunks = int64_t(input.size()) / cs;
    const auto& all = g.at("chunk_logits");
    const std::vector<float> want(all.begin(), all.begin() + std::min<long>(long(all.size()),
                                                                            long(n_chunks * m->hparams().n_classes)));
    for (int64_t b : c.blocks) {
      e->reset();
      const auto got = stream(*e, input, b);
      ASSERT_EQ(got.size(), want.size()) << c.name << " block " << b;
      EXPECT_LE(max_abs_diff(got.data(), want.data(), got.size()), c.tol) << c.name << " block " << b;
      if (first.empty()) {
        first = got;
      } else {
        EXPECT_EQ(got, first) << c.name << ": block " << b << " differs from block " << c.blocks[0];
      }
    }
  }
}

}  // namespace

TEST(CudaStreaming, AnyBlockSizeGivesOfflineChunkLogits) {
  MEGA_REQUIRE_GPU();
  check_streaming({
      {MEGA_FIXTURES, "tiny_uni", {1, 3, 7, 10, 33}, 2e-5},
      {MEGA_FIXTURES, "tiny_softmax_ln_post", {1, 9, 40}, 2e-5},
      {MEGA_FIXTURES, "tiny_relu2_scale_noffn", {2, 11}, 2e-5},
      {MEGA_FIXTURES, "tiny_patch", {1, 7, 100}, 2e-5},
      {MEGA_FIXTURES, "tiny_logpower", {1, 2, 7, 64}, 2e-5},
      {MEGA_FIXTURES, "tiny_lognorm", {1, 5, 64}, 2e-5},
      {MEGA_FIXTURES, "tiny_logmel", {1, 11, 64}, 2e-5},
      {MEGA_FIXTURES, "tiny_scan", {1, 999, 1000, 1001}, 2e-5},
  });
}

TEST(CudaStreaming, BaseModelAnyBlockSize) {
  MEGA_REQUIRE_GPU();
  check_streaming({{MEGA_GENERATED, "base_uni", {16000, 1, 999, 1000, 4096}, 1e-4, mega_test::kBaseChunkLimit}});
}

TEST(CudaStreaming, GraphsEqualDirectLaunches) {
  MEGA_REQUIRE_GPU();
  // teacher_tiny: the front end's launches are captured too
  for (const auto& [dir, name] : {std::pair<const char*, const char*>{MEGA_FIXTURES, "tiny_uni"},
                                  {MEGA_FIXTURES, "tiny_patch"}, {MEGA_GENERATED, "teacher_tiny"}}) {
    Golden g;
    auto m = load_fixture(dir, name, &g);
    ASSERT_TRUE(m);
    const auto& in = g.at("input");
    const int64_t cs = m->hparams().chunk_samples();
    std::vector<float> results[2];
    for (int graphs = 0; graphs < 2; ++graphs) {
      mega::gpu::DeviceOptions o;
      o.graphs = graphs == 1;
      std::string err;
      auto step = mega::gpu::DeviceStep::create(m, o, &err, nullptr);
      ASSERT_TRUE(step) << err;
      EXPECT_EQ(step->uses_graphs(), o.graphs) << step->last_error();
      // the core's streams over this step, as the backend's entry makes them
      auto batch = mega::create_batch_streams("cuda", m, 1, std::move(step), &err, nullptr);
      ASSERT_TRUE(batch) << err;
      for (size_t off = 0; off + size_t(cs) <= in.size(); off += size_t(cs)) {
        ASSERT_EQ(batch->submit(in.data() + off), mega::Status::ok) << batch->last_error();
        mega::BatchResult r;
        ASSERT_EQ(batch->wait(&r), mega::Status::ok) << batch->last_error();
        results[graphs].insert(results[graphs].end(), r.logits, r.logits + m->hparams().n_classes);
      }
    }
    EXPECT_EQ(results[0], results[1]) << name;
  }
}

TEST(CudaStreaming, SubmitAndPollGiveThePushResults) {
  MEGA_REQUIRE_GPU();
  Golden g;
  auto m = load_fixture(MEGA_FIXTURES, "tiny_patch", &g);
  ASSERT_TRUE(m);
  const auto& in = g.at("input");
  const int32_t nc = m->hparams().n_classes;
  auto sync = engine(m, "cuda");
  ASSERT_TRUE(sync);
  const auto want = stream(*sync, in, 13);
  auto e = engine(m, "cuda");
  ASSERT_TRUE(e);
  std::vector<float> got;
  int64_t expect_index = 0;
  auto collect = [&](const mega::ChunkResult& r) {
    EXPECT_EQ(r.chunk_index, expect_index++);
    got.insert(got.end(), r.logits, r.logits + nc);
  };
  size_t off = 0;
  int busy = 0;
  while (off < in.size()) {
    int64_t used = 0;
    bool sent = false;
    const mega::Status s = e->submit(in.data() + off, std::min<int64_t>(5, int64_t(in.size() - off)), &used, &sent);
    if (s == mega::Status::busy) {
      ++busy;
      mega::ChunkResult r;
      ASSERT_EQ(e->wait(&r), mega::Status::ok) << e->last_error();
      collect(r);
      continue;
    }
    ASSERT_EQ(s, mega::Status::ok) << e->last_error();
    off += size_t(used);
  }
  for (;;) {
    mega::ChunkResult r;
    bool ready = false;
    ASSERT_EQ(e->poll(&r, &ready), mega::Status::ok);
    if (ready) {
      collect(r);
      continue;
    }
    if (e->wait(&r) != mega::Status::ok) break;  // nothing queued any more
    collect(r);
  }
  EXPECT_EQ(got, want);
  EXPECT_GT(busy, 0) << "never more than max_in_flight chunks queued?";
}

// Five streams in one batch (different audio, one reset midway) against five
// single CUDA streams and five CPU sessions.
TEST(CudaBatch, BatchedStreamsEqualSingleStreams) {
  MEGA_REQUIRE_GPU();
  for (const char* name : {"tiny_uni", "tiny_patch", "tiny_softmax_ln_post"}) {
    Golden g;
    auto m = load_fixture(MEGA_FIXTURES, name, &g);
    ASSERT_TRUE(m);
    const auto& in = g.at("input");
    const int64_t cs = m->hparams().chunk_samples();
    const int32_t nc = m->hparams().n_classes, B = 5;
    const int64_t n_chunks = int64_t(in.size()) / cs, reset_at = n_chunks / 2;
    std::string err;
    auto batch = mega::create_batch_engine("cuda", m, B, mega::EngineOptions(), &err);
    ASSERT_TRUE(batch) << err;
    std::vector<std::unique_ptr<mega::Engine>> single, cpu;
    for (int32_t b = 0; b < B; ++b) {
      single.push_back(engine(m, "cuda"));
      cpu.push_back(engine(m, "cpu"));
    }
    std::vector<float> step(size_t(B * cs));
    for (int64_t c = 0; c < n_chunks; ++c) {
      if (c == reset_at) {
        ASSERT_EQ(batch->reset(3), mega::Status::ok);
        single[3]->reset();
        cpu[3]->reset();
      }
      for (int32_t b = 0; b < B; ++b) {
        for (int64_t i = 0; i < cs; ++i) step[size_t(b * cs + i)] = in[size_t((c * cs + i + b * 37) % int64_t(in.size()))];
      }
      ASSERT_EQ(batch->submit(step.data()), mega::Status::ok) << batch->last_error();
      mega::BatchResult r;
      ASSERT_EQ(batch->wait(&r), mega::Status::ok) << batch->last_error();
      for (int32_t b = 0; b < B; ++b) {
        EXPECT_EQ(r.chunk_index[b], b == 3 && c >= reset_at ? c - reset_at : c);
        int64_t used = 0;
        bool done = false;
        ASSERT_EQ(single[size_t(b)]->push(step.data() + b * cs, cs, &used, &done), mega::Status::ok);
        ASSERT_TRUE(done);
        EXPECT_LE(max_abs_diff(r.logits + b * nc, single[size_t(b)]->last_result().logits, size_t(nc)), 2e-5)
            << name << " stream " << b << " chunk " << c << " vs one CUDA stream";
        ASSERT_EQ(cpu[size_t(b)]->push(step.data() + b * cs, cs, &used, &done), mega::Status::ok);
        EXPECT_LE(max_abs_diff(r.logits + b * nc, cpu[size_t(b)]->last_result().logits, size_t(nc)), 2e-5)
            << name << " stream " << b << " chunk " << c << " vs the CPU";
      }
    }
  }
}

TEST(CudaBatch, ThousandStreams) {
  MEGA_REQUIRE_GPU();
  auto m = mega_test::load_model(mega_test::fixture_path("tiny_scan.mega"));
  ASSERT_TRUE(m);
  const int32_t B = 1000, nc = m->hparams().n_classes;
  const int64_t cs = m->hparams().chunk_samples();
  std::string err;
  auto batch = mega::create_batch_engine("cuda", m, B, mega::EngineOptions(), &err);
  ASSERT_TRUE(batch) << err;
  auto one = engine(m, "cpu");
  std::vector<float> step(size_t(B * cs));
  for (int64_t c = 0; c < 3; ++c) {
    for (size_t i = 0; i < step.size(); ++i) step[i] = float((i * 2654435761u + size_t(c) * 97) % 2001) / 1000.0f - 1.0f;
    ASSERT_EQ(batch->submit(step.data()), mega::Status::ok) << batch->last_error();
    mega::BatchResult r;
    ASSERT_EQ(batch->wait(&r), mega::Status::ok) << batch->last_error();
    int64_t used = 0;
    bool done = false;
    const int32_t b = 777;
    ASSERT_EQ(one->push(step.data() + b * cs, cs, &used, &done), mega::Status::ok);
    EXPECT_LE(max_abs_diff(r.logits + b * nc, one->last_result().logits, size_t(nc)), 2e-5) << "chunk " << c;
  }
}

// Float16 storage against float32 on the same audio. The tolerance is an
// estimate to be confirmed on the first GPU run (docs/performance.md): logits
// within 5% of their range plus 0.05, and the same top class on every window.
namespace {

void check_fp16(const std::shared_ptr<const mega::Model>& m, const std::vector<float>& input, const std::string& name) {
  auto f32 = engine(m, "cuda");
  auto f16 = engine(m, "cuda", 0, true);
  ASSERT_TRUE(f32 && f16);
  const auto a = stream(*f32, input, 4000);
  const auto b = stream(*f16, input, 4000);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(f16->stats().n_state_resets, 0) << name << ": float16 overflowed";
  const int32_t nc = m->hparams().n_classes;
  float lo = a[0], hi = a[0];
  for (float v : a) lo = std::min(lo, v), hi = std::max(hi, v);
  const double d = max_abs_diff(a.data(), b.data(), a.size());
  std::printf("[ cuda fp16] %s: max abs logit diff fp16 vs fp32 %.3g (logit range %.3g)\n", name.c_str(), d, hi - lo);
  EXPECT_LE(d, 0.05 * (hi - lo) + 0.05) << name;
  for (size_t w = 0; w < a.size(); w += size_t(nc)) {
    const auto top = [&](const std::vector<float>& v) {
      return std::max_element(v.begin() + long(w), v.begin() + long(w) + nc) - v.begin();
    };
    EXPECT_EQ(top(a), top(b)) << name << " window " << w / size_t(nc);
  }
}

}  // namespace

TEST(CudaFp16, CloseToFloat32) {
  MEGA_REQUIRE_GPU();
  for (const char* name : {"tiny_uni", "tiny_patch"}) {
    Golden g;
    auto m = load_fixture(MEGA_FIXTURES, name, &g);
    ASSERT_TRUE(m);
    check_fp16(m, g.at("input"), name);
  }
}

// The trained demo model (realistic activations), on its stored self-test clip.
TEST(CudaFp16, DemoModelCloseToFloat32) {
  MEGA_REQUIRE_GPU();
  auto m = mega_test::load_model(std::string(MEGA_MODELS) + "/sc10-demo.mega");
  ASSERT_TRUE(m);
  check_fp16(m, m->self_test_input(), "sc10-demo");
}

// The paper's model size (the base-size fixture: random weights, 1000-token
// chunks of laplace attention). Found on the stand-in: with float16 storage
// the attention output and its gating (sums over 1000 keys, up to 8e6) and,
// on the self-test clip, the last layer's residual stream (up to 3.3e5)
// overflowed, and every such chunk gave zero logits. The former are float32
// now (gating.cuh), the residual stream is stored scaled (x_scale 16 here,
// fp16_range.h), and float16 stays close to float32 on every chunk of both
// clips. Measured on the stand-in (max abs logit difference, first three
// chunks): 0.048 on the golden input (logit range 11.7), 0.022 on the
// self-test clip (range 5.6; 0.143 over its 16 chunks, range 7.1), against
// check_fp16's 5% of the range + 0.05. Unscaled, the self-test clip's chunk 1
// overflows (3.0 off, another top class). The laplace scores that still pass
// 65504 there are harmless (fp16_range.cpp).
TEST(CudaFp16, BaseModelCloseToFloat32) {
  MEGA_REQUIRE_GPU();
  Golden g;
  auto m = load_fixture(MEGA_GENERATED, "base_uni", &g);
  ASSERT_TRUE(m);
  float scale = 0.0f;
  char why[512] = "";
  ASSERT_EQ(mega::gpu::fp16_x_scale(*m, &scale, why, sizeof why), mega::Status::ok) << why;
  EXPECT_GT(scale, 1.0f);  // the self-test clip needs the scaled residual stream
  const int64_t cs = m->hparams().chunk_samples();
  check_fp16(m, mega_test::first_chunks(g.at("input"), cs, mega_test::kBaseChunkLimit), "base_uni");
  // its chunk 1 has the residual stream's peak
  check_fp16(m, mega_test::first_chunks(m->self_test_input(), cs, mega_test::kBaseChunkLimit), "base_uni self-test clip");
}

// The range check accepts the models float16 runs, with the residual stream
// unscaled where it fits.
TEST(CudaFp16, RangeCheckAcceptsTheModelsItRuns) {
  std::vector<std::shared_ptr<const mega::Model>> models;
  for (const char* name : kTiny) models.push_back(mega_test::load_model(mega_test::fixture_path(std::string(name) + ".mega")));
  models.push_back(mega_test::load_model(std::string(MEGA_MODELS) + "/sc10-demo.mega"));
  models.push_back(mega_test::load_model(std::string(MEGA_GENERATED) + "/base_bi.mega"));
  for (const auto& m : models) {
    ASSERT_TRUE(m);
    float scale = 0.0f;
    char why[512] = "";
    EXPECT_EQ(mega::gpu::fp16_x_scale(*m, &scale, why, sizeof why), mega::Status::ok) << why;
    EXPECT_EQ(scale, 1.0f);
  }
}

// tiny_patch with its embedding weights scaled by 1e4: float32 runs it (finite
// logits, 1e9), but its residual stream reaches 1.7e10 and v 1.3e6, beyond
// float16 even scaled: float16 is refused at creation, by the engines, the
// batch engine and the C API, with the reason, instead of giving zeros.
TEST(CudaFp16, ModelBeyondFloat16IsRefusedAtCreation) {
  MEGA_REQUIRE_GPU();
  const std::vector<uint8_t> bytes = mega_test::overflowing_model(1e4f);
  std::string err;
  std::shared_ptr<const mega::Model> m = mega::Model::load_from_memory(bytes.data(), bytes.size(), &err);
  ASSERT_TRUE(m) << err;
  const std::vector<float>& clip = m->self_test_input();
  auto f32 = engine(m, "cuda");
  ASSERT_TRUE(f32);
  std::vector<float> logits(size_t(m->hparams().n_classes));
  ASSERT_EQ(f32->classify_clip(clip.data(), int64_t(clip.size()), logits.data()), mega::Status::ok);
  for (float v : logits) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(f32->stats().n_state_resets, 0);

  mega::EngineOptions o;
  o.fp16 = true;
  mega::Status st = mega::Status::ok;
  err.clear();
  EXPECT_FALSE(mega::create_engine("cuda", m, o, &err, &st));
  EXPECT_EQ(st, mega::Status::unsupported_model);
  EXPECT_NE(err.find("do not fit float16"), std::string::npos) << err;
  EXPECT_NE(err.find("use float32"), std::string::npos) << err;
  std::printf("[ cuda fp16] refused: %s\n", err.c_str());
  err.clear();
  st = mega::Status::ok;
  EXPECT_FALSE(mega::create_batch_engine("cuda", m, 4, o, &err, &st));
  EXPECT_EQ(st, mega::Status::unsupported_model);
  EXPECT_NE(err.find("do not fit float16"), std::string::npos) << err;

  // the C API: the status and mega_load_error()
  const std::string path = ::testing::TempDir() + "/mega_fp16_refused.mega";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  mega_status cst = MEGA_OK;
  mega_model* cm = mega_model_load(path.c_str(), &cst);
  ASSERT_TRUE(cm) << mega_load_error();
  mega_session_options so;
  mega_session_options_init(&so);
  so.backend = "cuda";
  so.fp16 = 1;
  EXPECT_EQ(mega_session_create_with_options(cm, &so, &cst), nullptr);
  EXPECT_EQ(cst, MEGA_ERR_UNSUPPORTED_MODEL);
  EXPECT_NE(std::string(mega_load_error()).find("do not fit float16"), std::string::npos) << mega_load_error();
  so.fp16 = 0;
  mega_session* ok = mega_session_create_with_options(cm, &so, &cst);
  EXPECT_TRUE(ok) << mega_load_error();
  mega_session_free(ok);
  mega_model_free(cm);
  std::remove(path.c_str());
}

TEST(CudaErrors, BadDeviceAndBidirectionalStreaming) {
  MEGA_REQUIRE_GPU();
  auto m = mega_test::load_model(mega_test::fixture_path("tiny_bi.mega"));
  ASSERT_TRUE(m);
  mega::EngineOptions o;
  o.device = 4096;
  std::string err;
  mega::Status st = mega::Status::ok;
  EXPECT_FALSE(mega::create_engine("cuda", m, o, &err, &st));
  EXPECT_EQ(st, mega::Status::no_device) << err;
  auto e = engine(m, "cuda");
  ASSERT_TRUE(e);
  float x[4] = {0, 0, 0, 0};
  int64_t used = -1;
  bool done = true;
  EXPECT_EQ(e->push(x, 4, &used, &done), mega::Status::not_streamable);
  std::vector<float> clip(size_t(m->hparams().window_samples()) * 3, 0.1f), logits(4);
  EXPECT_EQ(e->classify_clip(clip.data(), int64_t(clip.size()), logits.data()), mega::Status::too_long);
  EXPECT_FALSE(mega::create_batch_engine("cuda", m, 2, mega::EngineOptions(), &err, &st));
  EXPECT_EQ(st, mega::Status::not_streamable);
}

// An engine on another device than the calling thread's current one: every
// call leaves the caller's thread on its own device (the stand-in has two).
TEST(CudaErrors, CallsKeepTheCallersDevice) {
  MEGA_REQUIRE_GPU();
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "needs two CUDA devices";
  Golden g;
  auto m = load_fixture(MEGA_FIXTURES, "tiny_patch", &g);
  ASSERT_TRUE(m);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  mega::EngineOptions o;
  o.device = 1;
  std::string err;
  auto e = mega::create_engine("cuda", m, o, &err);
  ASSERT_TRUE(e) << err;
  auto current = [] {
    int d = -1;
    EXPECT_EQ(cudaGetDevice(&d), cudaSuccess);
    return d;
  };
  EXPECT_EQ(current(), 0) << "create";
  const auto& in = g.at("input");
  int64_t used = 0;
  bool sent = false;
  ASSERT_EQ(e->submit(in.data(), int64_t(in.size()), &used, &sent), mega::Status::ok) << e->last_error();
  EXPECT_EQ(current(), 0) << "submit";
  mega::ChunkResult r;
  ASSERT_EQ(e->wait(&r), mega::Status::ok) << e->last_error();
  std::vector<float> logits(size_t(m->hparams().n_classes));
  ASSERT_EQ(e->classify_clip(in.data(), int64_t(in.size()), logits.data()), mega::Status::ok) << e->last_error();
  EXPECT_EQ(current(), 0) << "classify_clip";
  e.reset();
  EXPECT_EQ(current(), 0) << "destroy";
}
