// SPDX-License-Identifier: Apache-2.0
// The CUDA engines on a teacher-embedding model (PatchFeatures::
// teacher_embedding, the generated teacher_tiny fixture: the front end's
// random graphs of their real shapes under a tiny student, chunk 3 tokens):
// clip and per-chunk logits against the float64 port and the reference
// backend, streaming equals offline for block sizes that split the 80 ms
// steps anywhere, batched streams with a reset against single streams and the
// CPU. The suites are the session tests' (CudaParity, CudaStreaming,
// CudaBatch), so the stand-in's deferred and Jetson runs take them too.
// Skipped without a GPU.
#include <algorithm>

#include "cuda_test_util.h"
#include "plan.h"
#include "golden.h"
#include "test_stream.h"

using mega_test::Golden;
using mega_test::max_abs_diff;

namespace {

// The CPU's TeacherParity and TeacherStreaming bound (tests/runtime/): float32
// against the float64 port.
constexpr double kTol = 1e-4;

std::shared_ptr<const mega::Model> teacher_tiny(Golden* g) {
  return mega_test::load_fixture(MEGA_GENERATED, "teacher_tiny", g);
}

}  // namespace

TEST(CudaParity, TeacherFrontEndMatchesPyTorchAndTheReferenceBackend) {
  MEGA_REQUIRE_GPU();
  Golden g;
  auto m = teacher_tiny(&g);
  ASSERT_TRUE(m);
  const auto& in = g.at("input");
  auto gpu = mega_test::engine(m, "cuda", int64_t(in.size()));
  auto ref = mega_test::cpu_engine(m, mega::KernelImpl::reference, 1, int64_t(in.size()));
  ASSERT_TRUE(gpu && ref);
  const size_t nc = size_t(m->hparams().n_classes);
  std::vector<float> got(nc), want(nc);
  ASSERT_EQ(gpu->classify_clip(in.data(), int64_t(in.size()), got.data()), mega::Status::ok) << gpu->last_error();
  ASSERT_EQ(ref->classify_clip(in.data(), int64_t(in.size()), want.data()), mega::Status::ok);
  const double d_port = max_abs_diff(got.data(), g.at("logits").data(), nc);
  const double d_ref = max_abs_diff(got.data(), want.data(), nc);
  EXPECT_LE(d_port, kTol) << "clip vs the port";
  EXPECT_LE(d_ref, kTol) << "clip vs the reference backend";
  std::printf("[ cuda     ] teacher_tiny: clip logits max abs diff %.3g vs PyTorch, %.3g vs reference\n", d_port,
              d_ref);
  const int64_t cs = m->hparams().chunk_samples();
  const auto chunks = mega_test::window_logits(*gpu, in, cs);
  const auto ref_chunks = mega_test::window_logits(*ref, in, cs);
  ASSERT_EQ(chunks.size(), g.at("chunk_logits").size());
  ASSERT_EQ(chunks.size(), ref_chunks.size());
  EXPECT_LE(max_abs_diff(chunks.data(), g.at("chunk_logits").data(), chunks.size()), kTol) << "chunks vs the port";
  EXPECT_LE(max_abs_diff(chunks.data(), ref_chunks.data(), chunks.size()), kTol) << "chunks vs the reference";
}

// Blocks that split the 80 ms steps, the 1632-sample step spans and the
// chunks anywhere, over the first 3 chunks (the model is causal: the golden
// chunks' prefix applies); a reset before each block size, so each run also
// checks that reset leaves no front-end context behind (the runs must be
// identical).
TEST(CudaStreaming, TeacherAnyBlockSizeGivesOfflineChunkLogits) {
  MEGA_REQUIRE_GPU();
  Golden g;
  auto m = teacher_tiny(&g);
  ASSERT_TRUE(m);
  auto e = mega_test::engine(m, "cuda");
  ASSERT_TRUE(e);
  const int64_t cs = m->hparams().chunk_samples(), n_chunks = 3;
  const auto in = mega_test::first_chunks(g.at("input"), cs, n_chunks);
  const auto& all = g.at("chunk_logits");
  const std::vector<float> want(all.begin(), all.begin() + n_chunks * m->hparams().n_classes);
  std::vector<float> first;
  // Under the sanitizers (each block size there costs 20 s on the stand-in) one sample at a time, a
  // block just short of a step and one that spans steps; the other builds take all six.
  std::vector<int64_t> blocks = {1, 7, 1279, 1281, 4093, 16000};
  if (mega_test::kSanitized) blocks = {1, 1279, 4093};
  for (int64_t block : blocks) {
    e->reset();
    const auto got = mega_test::window_logits(*e, in, block);
    ASSERT_EQ(got.size(), want.size()) << "block " << block;
    EXPECT_LE(max_abs_diff(got.data(), want.data(), got.size()), kTol) << "block " << block;
    if (first.empty()) {
      first = got;
    } else {
      EXPECT_EQ(got, first) << "block " << block << " differs from block 1";
    }
  }
}

// Three streams of different audio in one batch (they share each layer's
// launch), stream 1 reset halfway: each against the reference backend fed the
// same (streams mixed up, or a reset that left context behind, move the
// logits far past the bound).
TEST(CudaBatch, TeacherStreamsMatchTheReferenceBackend) {
  MEGA_REQUIRE_GPU();
  Golden g;
  auto m = teacher_tiny(&g);
  ASSERT_TRUE(m);
  const auto& in = g.at("input");
  const int64_t cs = m->hparams().chunk_samples();
  const int32_t nc = m->hparams().n_classes, B = 3;
  // (under the sanitizers one chunk less: two after the reset)
  const int64_t reset_at = 2, n_chunks = int64_t(in.size()) / cs - (mega_test::kSanitized ? 1 : 0);
  ASSERT_GE(n_chunks, reset_at + 2);
  std::string err;
  auto batch = mega::create_batch_engine("cuda", m, B, mega::EngineOptions(), &err);
  ASSERT_TRUE(batch) << err;
  std::vector<std::unique_ptr<mega::Engine>> ref;
  for (int32_t b = 0; b < B; ++b) {
    ref.push_back(mega_test::cpu_engine(m, mega::KernelImpl::reference));
    ASSERT_TRUE(ref.back());
  }
  std::vector<float> step(size_t(B * cs));
  for (int64_t c = 0; c < n_chunks; ++c) {
    if (c == reset_at) {
      ASSERT_EQ(batch->reset(1), mega::Status::ok);
      ref[1]->reset();
    }
    for (int32_t b = 0; b < B; ++b) {
      for (int64_t i = 0; i < cs; ++i) {
        step[size_t(b * cs + i)] = in[size_t((c * cs + i + b * 1013) % int64_t(in.size()))] * (1.0f - 0.3f * float(b));
      }
    }
    ASSERT_EQ(batch->submit(step.data()), mega::Status::ok) << batch->last_error();
    mega::BatchResult r;
    ASSERT_EQ(batch->wait(&r), mega::Status::ok) << batch->last_error();
    for (int32_t b = 0; b < B; ++b) {
      EXPECT_EQ(r.chunk_index[b], b == 1 && c >= reset_at ? c - reset_at : c);
      int64_t used = 0;
      bool done = false;
      ASSERT_EQ(ref[size_t(b)]->push(step.data() + b * cs, cs, &used, &done), mega::Status::ok);
      ASSERT_TRUE(done);
      EXPECT_LE(max_abs_diff(r.logits + b * nc, ref[size_t(b)]->last_result().logits, size_t(nc)), kTol)
          << "stream " << b << " chunk " << c << " vs the reference backend";
    }
  }
}

// Float16 storage: the front end computes in float32 (double for the mel)
// and only its projection is stored in float16; the logits stay within the
// other float16 tests' bound (5% of the float32 logits' range + 0.05), with
// the same top class in every chunk. The file's stored peaks (or the host
// pass, which runs the same front end) decide the residual stream's scale.
TEST(CudaFp16, TeacherCloseToFloat32) {
  MEGA_REQUIRE_GPU();
  Golden g;
  auto m = teacher_tiny(&g);
  ASSERT_TRUE(m);
  auto f32 = mega_test::engine(m, "cuda"), f16 = mega_test::engine(m, "cuda", 0, true);
  ASSERT_TRUE(f32 && f16);
  const int64_t cs = m->hparams().chunk_samples();
  // under the sanitizers the first 3 of the 5 chunks (each costs seconds there)
  const auto in = mega_test::kSanitized ? mega_test::first_chunks(g.at("input"), cs, 3) : g.at("input");
  const auto want = mega_test::window_logits(*f32, in, cs), got = mega_test::window_logits(*f16, in, cs);
  ASSERT_EQ(got.size(), want.size());
  const auto range = std::minmax_element(want.begin(), want.end());
  EXPECT_LE(max_abs_diff(got.data(), want.data(), got.size()), 0.05 * (*range.second - *range.first) + 0.05);
  const size_t nc = size_t(m->hparams().n_classes);
  for (size_t c = 0; c < got.size(); c += nc) {
    EXPECT_EQ(std::max_element(got.begin() + long(c), got.begin() + long(c + nc)) - got.begin(),
              std::max_element(want.begin() + long(c), want.begin() + long(c + nc)) - want.begin())
        << "chunk " << c / nc;
  }
  EXPECT_GT(f32->memory_bytes(), mega::gpu::teacher_stream_bytes(3) + 4 * 600000)
      << "the front end's scratch and the teacher's weights are counted";
}

// The bundled teacher model (the real graphs: openWakeWord's melspectrogram
// and Google's speech embedding) passes its self-test on the CUDA backend,
// and its clip logits are the reference backend's within the parity bound.
TEST(CudaParity, TeacherModelPassesItsSelfTest) {
  MEGA_REQUIRE_GPU();
  auto m = mega_test::load_model(std::string(MEGA_MODELS) + "/sc10-teacher.mega");
  ASSERT_TRUE(m);
  const std::vector<float>& clip = m->self_test_input();
  auto gpu = mega_test::engine(m, "cuda", int64_t(clip.size()));
  auto ref = mega_test::cpu_engine(m, mega::KernelImpl::reference, 1, int64_t(clip.size()));
  ASSERT_TRUE(gpu && ref);
  float diff = -1.0f;
  EXPECT_EQ(gpu->self_test(&diff), mega::Status::ok) << "diff " << diff << " " << gpu->last_error();
  const size_t nc = size_t(m->hparams().n_classes);
  std::vector<float> got(nc), want(nc);
  ASSERT_EQ(gpu->classify_clip(clip.data(), int64_t(clip.size()), got.data()), mega::Status::ok);
  ASSERT_EQ(ref->classify_clip(clip.data(), int64_t(clip.size()), want.data()), mega::Status::ok);
  const double d = max_abs_diff(got.data(), want.data(), nc);
  EXPECT_LE(d, kTol);
  std::printf("[ cuda     ] sc10-teacher: self-test diff %.3g, clip logits %.3g from the reference backend\n",
              double(diff), d);
}
