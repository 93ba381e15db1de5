// The backend-comparison harness: every step of the ops interface
// (kernels/ops.h), on every backend this build can run on the host, against
// the CPU's scalar reference, one step at a time from the same inputs. The
// backends: the CPU's optimized ops (SIMD, packed projections, fused
// attention, threads) and the CUDA backend's steps through its host emulation
// (kernels/cuda/host_ops.h: its element functions, memory plan and GEMM
// shapes). A step that disagrees is named with the model, the layer and the
// activation, instead of surfacing as a wrong logit at the end.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_ops.h"
#include "golden.h"
#include "gpu_host_session.h"
#include "test_stream.h"

namespace {

using mega::Act;
using mega::NormSite;
using mega::Status;

// One backend under test: its steps and a view of its activations (rows x D, host memory).
struct Backend {
  std::string name;
  mega::Ops* ops = nullptr;
  std::function<float*(Act)> act;
};

struct Harness {
  std::shared_ptr<const mega::Model> model;
  mega::HParams hp;
  mega::Span span;
  std::vector<float> samples;
  std::vector<int64_t> chunk_index{0};
  mega::cpu::CpuOps ref, opt;
  std::unique_ptr<mega_test::HostGpuSession> gpu_session;
  std::unique_ptr<mega::gpu::GpuOps<float, mega::gpu::HostOps>> gpu;
  std::vector<Backend> backends;  // [0]: the reference

  explicit Harness(const std::string& file) {
    model = mega_test::load(mega_test::fixture_path(file));
    hp = model->hparams();
    const bool bidir = hp.ema_direction == mega::EmaDirection::bidirectional;
    // unidirectional: one streaming chunk; bidirectional: a 3-chunk clip
    span.n_tok = bidir ? 3 * hp.chunk_size : hp.chunk_size;
    span.streaming = !bidir;
    const int64_t ctx = hp.patch_kernel - hp.patch_stride;
    span.sample_stride = ctx + span.n_tok * hp.patch_stride;
    samples.resize(size_t(span.sample_stride));
    std::mt19937 rng(17);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (float& s : samples) s = u(rng);
    span.samples = samples.data();
    span.chunk_index = chunk_index.data();
    const mega::ModelWeights& w = mega::model_weights(*model);
    EXPECT_TRUE(ref.init(hp, w, false, 1, span.n_tok));
    EXPECT_TRUE(opt.init(hp, w, true, 3, span.n_tok));
    backends.push_back({"cpu reference", &ref, [this](Act a) { return ref.activation(a); }});
    backends.push_back({"cpu optimized", &opt, [this](Act a) { return opt.activation(a); }});
    gpu_session = std::make_unique<mega_test::HostGpuSession>(model, 1, span.n_tok * hp.patch_stride);
    gpu = std::make_unique<mega::gpu::GpuOps<float, mega::gpu::HostOps>>(gpu_session->ops());
    const mega::gpu::Buffers<float>& bf = gpu_session->buffers();
    backends.push_back({"cuda (host emulation)", gpu.get(), [bf](Act a) {
                          return a == Act::x ? bf.x : a == Act::xn ? bf.xn : bf.mx;
                        }});
  }

  int64_t values() const { return span.rows() * hp.embed_dim; }

  // The reference's activations a copied into every other backend.
  void share(std::initializer_list<Act> acts) {
    for (Act a : acts) {
      const float* src = backends[0].act(a);
      for (size_t b = 1; b < backends.size(); ++b) std::copy(src, src + values(), backends[b].act(a));
    }
  }

  // Runs step on every backend, then compares activation out with the reference's.
  void check(const std::string& what, Act out, float tol, const std::function<Status(mega::Ops&)>& step) {
    for (const Backend& b : backends) ASSERT_EQ(step(*b.ops), Status::ok) << b.name << ": " << what;
    const float* want = backends[0].act(out);
    for (size_t b = 1; b < backends.size(); ++b) {
      const float* got = backends[b].act(out);
      float worst = 0.0f;
      int64_t at = 0;
      for (int64_t i = 0; i < values(); ++i) {
        const float err = std::fabs(got[i] - want[i]) / (1.0f + std::fabs(want[i]));
        if (!(err <= worst)) {  // NaN counts
          worst = std::isnan(err) ? INFINITY : err;
          at = i;
        }
      }
      EXPECT_LE(worst, tol) << backends[b].name << ", " << what << ": value " << at << " is " << got[at]
                            << ", the reference has " << want[at];
    }
  }
};

class BackendOps : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendOps, EveryStepMatchesTheReference) {
  Harness h(GetParam());
  const float tol = 2e-4f;
  const mega::ModelWeights& w = mega::model_weights(*h.model);
  h.check("embed", Act::x, tol, [&](mega::Ops& o) { return o.embed(h.span); });
  const int64_t rows = h.span.rows(), C = h.hp.chunk_size;
  for (int32_t l = 0; l < h.hp.n_layers; ++l) {
    const std::string layer = "layer " + std::to_string(l) + " ";
    const Act in = h.hp.prenorm ? Act::xn : Act::x;
    h.share({Act::x});
    if (h.hp.prenorm) {
      h.check(layer + "norm", Act::xn, tol,
              [&](mega::Ops& o) { return o.norm(NormSite::layer, l, Act::x, Act::xn, 0, rows); });
      h.share({Act::xn});
    }
    h.check(layer + "ema", Act::mx, tol, [&](mega::Ops& o) { return o.ema(l, in, h.span); });
    h.share({Act::mx});
    // the steps between the EMA and the residual share the backend's scratch:
    // checked together on x, one pass of each backend's size at a time
    h.check(layer + "gate_inputs + attention + gate_output", Act::x, tol, [&](mega::Ops& o) {
      for (int64_t r0 = 0; r0 < rows; r0 += o.pass_rows(h.span)) {
        const int64_t n = o.pass_rows(h.span);
        EXPECT_EQ(n % C, 0);
        Status s = o.gate_inputs(l, in, r0, n);
        if (s == Status::ok) s = o.attention(l, r0, n);
        if (s == Status::ok) s = o.gate_output(l, r0, n);
        if (s != Status::ok) return s;
      }
      return Status::ok;
    });
    h.share({Act::x});
    if (!h.hp.prenorm) {
      h.check(layer + "postnorm", Act::x, tol,
              [&](mega::Ops& o) { return o.norm(NormSite::layer, l, Act::x, Act::x, 0, rows); });
      h.share({Act::x});
    }
    if (!w.layers[size_t(l)].has_ffn) continue;
    Act ffn_in = Act::x;
    if (h.hp.prenorm) {
      h.check(layer + "ffn norm", Act::xn, tol,
              [&](mega::Ops& o) { return o.norm(NormSite::ffn, l, Act::x, Act::xn, 0, rows); });
      h.share({Act::xn});
      ffn_in = Act::xn;
    }
    h.check(layer + "ffn", Act::x, tol, [&](mega::Ops& o) {
      for (int64_t r0 = 0; r0 < rows; r0 += o.pass_rows(h.span)) {
        const Status s = o.ffn(l, ffn_in, r0, o.pass_rows(h.span));
        if (s != Status::ok) return s;
      }
      return Status::ok;
    });
    h.share({Act::x});
    if (!h.hp.prenorm) {
      h.check(layer + "ffn postnorm", Act::x, tol,
              [&](mega::Ops& o) { return o.norm(NormSite::ffn, l, Act::x, Act::x, 0, rows); });
      h.share({Act::x});
    }
  }
  if (w.has_final_norm) {
    h.check("final norm", Act::x, tol,
            [&](mega::Ops& o) { return o.norm(NormSite::final, 0, Act::x, Act::x, 0, rows); });
  }
}

// The fixtures' awkward shapes: odd and non-multiple-of-8 sizes, patches,
// log-power features, every attention function and norm, pre- and postnorm,
// with and without FFN, truncated and untruncated, both EMA directions.
INSTANTIATE_TEST_SUITE_P(Fixtures, BackendOps,
                         ::testing::Values("tiny_uni.mega", "tiny_patch.mega", "tiny_logpower.mega",
                                           "tiny_softmax_ln_post.mega", "tiny_relu2_scale_noffn.mega",
                                           "tiny_bi.mega", "tiny_rms_bi_untrunc.mega", "tiny_scan.mega"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param.substr(0, i.param.find('.'));
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

}  // namespace
