// SPDX-License-Identifier: Apache-2.0
// Golden parity: the runtime against the float64 PyTorch reference.
// Tolerances (documented in README "Accuracy"): tiny models, per-layer
// outputs and logits within 2e-5 (both kernel sets); base size, logits
// within 1e-4 absolute.
#include <gtest/gtest.h>

#include "stream.h"
#include "golden.h"
#include "mega/mega.hpp"
#include "test_stream.h"

using mega_test::Golden;
using mega_test::max_abs_diff;

namespace {

struct Loaded {
  std::shared_ptr<const mega::Model> model;
  Golden golden;
};

Loaded load_pair(const std::string& dir, const std::string& name) {
  Loaded l;
  std::string err;
  l.model = mega::Model::load(dir + "/" + name + ".mega", &err);
  EXPECT_TRUE(l.model) << err;
  EXPECT_TRUE(l.golden.load(dir + "/" + name + ".golden")) << name;
  return l;
}

void check_clip(const std::string& dir, const std::string& name, mega::KernelImpl impl, double logit_tol,
                double trace_tol) {
  Loaded l = load_pair(dir, name);
  ASSERT_TRUE(l.model);
  const auto& in = l.golden.at("input");
  auto s = mega_test::cpu_engine(l.model, impl, 1, int64_t(in.size()));
  ASSERT_TRUE(s);
  const mega::HParams& hp = l.model->hparams();
  ASSERT_EQ(s->padded_clip_samples(int64_t(in.size())), int64_t(in.size()));
  std::vector<float> logits(size_t(hp.n_classes));
  std::vector<float> trace;
  if (l.golden.has("trace")) trace.resize(l.golden.at("trace").size());
  ASSERT_EQ(mega::classify_clip_traced(*s, in.data(), int64_t(in.size()), logits.data(),
                                            trace.empty() ? nullptr : trace.data()),
            mega::Status::ok);
  const double d = max_abs_diff(logits.data(), l.golden.at("logits").data(), logits.size());
  EXPECT_LE(d, logit_tol) << name << " logits";
  std::printf("[ parity   ] %s (%s): max abs logit diff %.3g\n", name.c_str(),
              impl == mega::KernelImpl::reference ? "reference" : "optimized", d);
  if (!trace.empty()) {
    const auto& gt = l.golden.at("trace");
    const size_t per_layer = gt.size() / size_t(hp.n_layers + 1);
    for (int32_t layer = 0; layer <= hp.n_layers; ++layer) {
      const size_t off = size_t(layer) * per_layer;
      EXPECT_LE(max_abs_diff(trace.data() + off, gt.data() + off, per_layer), trace_tol)
          << name << " layer output " << layer << " (0 = embedding)";
    }
  }
}

const char* kTiny[] = {"tiny_uni", "tiny_bi", "tiny_softmax_ln_post", "tiny_relu2_scale_noffn",
                       "tiny_rms_bi_untrunc", "tiny_patch", "tiny_logpower", "tiny_lognorm", "tiny_logmel", "tiny_scan"};

}  // namespace

TEST(TinyParity, ReferenceKernelsMatchPyTorchPerLayer) {
  for (const char* name : kTiny) check_clip(MEGA_FIXTURES, name, mega::KernelImpl::reference, 2e-5, 2e-5);
}

TEST(TinyParity, OptimizedKernelsMatchPyTorchPerLayer) {
  for (const char* name : kTiny) check_clip(MEGA_FIXTURES, name, mega::KernelImpl::optimized, 2e-5, 2e-5);
}

TEST(BaseParity, UnidirectionalLogits) { check_clip(MEGA_GENERATED, "base_uni", mega::KernelImpl::optimized, 1e-4, 0); }

TEST(BaseParity, BidirectionalLogits) { check_clip(MEGA_GENERATED, "base_bi", mega::KernelImpl::optimized, 1e-4, 0); }

// The teacher's front end (PatchFeatures::teacher_embedding): random graphs of
// the real shapes under a tiny Mega model, both kernel sets, against the
// PyTorch port of the runtime's semantics (make_fixtures.py, teacher_tiny).
TEST(TeacherParity, BothKernelSetsMatchPyTorch) {
  for (auto impl : {mega::KernelImpl::reference, mega::KernelImpl::optimized}) {
    check_clip(MEGA_GENERATED, "teacher_tiny", impl, 1e-4, 0);
  }
}

TEST(BaseParity, SelfTestPassesOnGeneratedModels) {
  for (const char* name : {"base_uni", "base_bi", "teacher_tiny"}) {
    std::string err;
    auto m = mega::Model::load(std::string(MEGA_GENERATED) + "/" + name + ".mega", &err);
    ASSERT_TRUE(m) << err;
    auto s = mega_test::cpu_engine(m);
    ASSERT_TRUE(s);
    float diff = -1.0f;
    EXPECT_EQ(s->self_test(&diff), mega::Status::ok) << name << " diff " << diff;
  }
}

TEST(TinyParity, SelfTestPassesWithBothKernelSets) {
  for (const char* name : kTiny) {
    for (auto impl : {mega::KernelImpl::reference, mega::KernelImpl::optimized}) {
      std::string err;
      auto m = mega::Model::load(mega_test::fixture_path(std::string(name) + ".mega"), &err);
      ASSERT_TRUE(m) << err;
      auto s = mega_test::cpu_engine(m, impl);
      ASSERT_TRUE(s);
      float diff = -1.0f;
      EXPECT_EQ(s->self_test(&diff), mega::Status::ok) << name;
      EXPECT_GE(diff, 0.0f);
    }
  }
}
