// SPDX-License-Identifier: Apache-2.0
// The backend-comparison harness: every step of the ops interface
// (runtime/src/core/ops.h), on every backend this build can run, against the CPU's
// scalar reference, one step at a time from the same inputs. The backends:
// the CPU's optimized ops (SIMD, packed projections, fused attention,
// threads), the CUDA backend's steps through its host emulation
// (kernels/cuda/host_ops.h: its element functions, memory plan and GEMM
// shapes), and, in builds with the CUDA backend (MEGA_BACKEND_OPS_CUDA: this
// file is then part of mega_cuda_tests), the same steps on the device
// (kernels/cuda/device_ops.h: the kernels and cuBLAS, on a GPU or on the CPU
// stand-in for CUDA, docs/cuda-standin.md). A step that disagrees is named
// with the backend, the model, the layer and the activation, instead of
// surfacing as a wrong logit at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_ops.h"
#include "golden.h"
#include "gpu_host_emulation.h"
#include "test_stream.h"
#if defined(MEGA_BACKEND_OPS_CUDA)
#include "device_ops.h"
#endif

namespace {

using mega::Act;
using mega::NormSite;
using mega::Status;

// One backend under test: its steps, the shared inputs as it reads them, and
// a view of its activations (rows x D, host memory).
struct Backend {
  std::string name;
  mega::Ops* ops = nullptr;
  const mega::Span* span = nullptr;
  std::function<float*(Act)> act;
  // A device backend's act(a) is a host copy: pull refreshes it after a step,
  // push writes it to the device after it was overwritten; why says what failed.
  std::function<Status(Act)> pull = nullptr, push = nullptr;
  std::function<std::string()> why = [] { return std::string(); };
  float tol = 0.0f;  // at least this, whatever the step's tolerance
};

#if defined(MEGA_BACKEND_OPS_CUDA)
#if defined(MEGA_CUDA_STANDIN)
constexpr const char* kCudaDevice = "stand-in";
#else
constexpr const char* kCudaDevice = "device";
#endif
// Float16 storage rounds every activation a step reads and writes (2^-11
// relative): the stand-in's worst step is within 1e-3.
constexpr float kFp16Tol = 3e-3f;

// The CUDA backend on the device, with host copies of its activations.
struct CudaBackend {
  std::string name;
  float tol = 0.0f;
  std::unique_ptr<mega::gpu::DeviceOps> ops;
  mega::Span span;  // over device copies of the shared samples and chunk indices
  std::vector<float> acts[3];

  // Over the harness's shared span; null without a device: the other
  // backends are still compared. (The stand-in always has one.)
  static std::unique_ptr<CudaBackend> create(const std::shared_ptr<const mega::Model>& model,
                                             const mega::Span& shared, int64_t max_clip_samples, bool fp16) {
    auto b = std::make_unique<CudaBackend>();
    b->name = std::string(fp16 ? "cuda fp16 (" : "cuda (") + kCudaDevice + ")";
    b->tol = fp16 ? kFp16Tol : 0.0f;
    mega::gpu::DeviceOptions o;
    o.n_streams = shared.n_streams;
    o.max_clip_samples = max_clip_samples;
    o.fp16 = fp16;
    std::string error;
    Status st = Status::ok;
    b->ops = mega::gpu::DeviceOps::create(model, o, &error, &st);
#if defined(MEGA_CUDA_STANDIN)
    const bool may_be_missing = false;
#else
    const bool may_be_missing = st == Status::no_device;
#endif
    if (!b->ops) {
      if (may_be_missing) {
        std::printf("%s: not compared (%s)\n", b->name.c_str(), error.c_str());
      } else {
        ADD_FAILURE() << b->name << ": " << error;
      }
      return nullptr;
    }
    st = b->ops->upload_span(shared, &b->span);
    EXPECT_EQ(st, Status::ok) << b->name << ": " << b->ops->last_error();
    if (st != Status::ok) return nullptr;
    for (std::vector<float>& a : b->acts) a.resize(size_t(shared.rows() * model->hparams().embed_dim));
    return b;
  }

  Backend backend() {
    Backend b;
    b.name = name;
    b.ops = ops.get();
    b.span = &span;
    b.act = [this](Act a) { return acts[int(a)].data(); };
    b.pull = [this](Act a) { return ops->download(a, acts[int(a)].data(), span.rows()); };
    b.push = [this](Act a) { return ops->upload(a, acts[int(a)].data(), span.rows()); };
    b.why = [this] { return std::string(" (") + ops->last_error() + ")"; };
    b.tol = tol;
    return b;
  }
};
#endif

struct Harness {
  std::shared_ptr<const mega::Model> model;
  mega::HParams hp;
  mega::Span span;
  std::vector<float> samples;
  std::vector<int64_t> chunk_index{0};
  mega::cpu::CpuOps ref, opt;
  std::unique_ptr<mega_test::HostGpuEmulation> gpu_host;
  std::unique_ptr<mega::gpu::GpuOps<float, mega::gpu::HostOps>> gpu;
#if defined(MEGA_BACKEND_OPS_CUDA)
  std::unique_ptr<CudaBackend> cuda[2];  // float32, float16 storage
#endif
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
    backends.push_back({"cpu reference", &ref, &span, [this](Act a) { return ref.activation(a); }});
    backends.push_back({"cpu optimized", &opt, &span, [this](Act a) { return opt.activation(a); }});
    const int64_t clip_samples = span.n_tok * hp.patch_stride;
    gpu_host = std::make_unique<mega_test::HostGpuEmulation>(model, 1, clip_samples);
    gpu = std::make_unique<mega::gpu::GpuOps<float, mega::gpu::HostOps>>(gpu_host->ops());
    const mega::gpu::Buffers<float>& bf = gpu_host->buffers();
    backends.push_back(
        {"cuda (host emulation)", gpu.get(), &span, [bf](Act a) { return mega::gpu::activation(bf, a); }});
#if defined(MEGA_BACKEND_OPS_CUDA)
    for (int fp16 = 0; fp16 < 2; ++fp16) {
      cuda[fp16] = CudaBackend::create(model, span, clip_samples, fp16 != 0);
      if (cuda[fp16]) backends.push_back(cuda[fp16]->backend());
    }
#endif
  }

  int64_t values() const { return span.rows() * hp.embed_dim; }

  // The reference's activations a copied into every other backend.
  void share(std::initializer_list<Act> acts) {
    for (Act a : acts) {
      const float* src = backends[0].act(a);
      for (size_t i = 1; i < backends.size(); ++i) {
        const Backend& b = backends[i];
        std::copy(src, src + values(), b.act(a));
        if (b.push) {
          ASSERT_EQ(b.push(a), Status::ok) << b.name << ": writing an activation" << b.why();
        }
      }
    }
  }

  // Runs step on every backend, then compares activation out with the reference's.
  void check(const std::string& what, Act out, float tol,
             const std::function<Status(mega::Ops&, const mega::Span&)>& step) {
    for (const Backend& b : backends) {
      ASSERT_EQ(step(*b.ops, *b.span), Status::ok) << b.name << ": " << what << b.why();
      if (b.pull) {
        ASSERT_EQ(b.pull(out), Status::ok) << b.name << ": reading " << what << b.why();
      }
    }
    const float* want = backends[0].act(out);
    for (size_t b = 1; b < backends.size(); ++b) {
      const float* got = backends[b].act(out);
      const float limit = std::max(tol, backends[b].tol);
      float worst = 0.0f;
      int64_t at = 0;
      for (int64_t i = 0; i < values(); ++i) {
        const float err = std::fabs(got[i] - want[i]) / (1.0f + std::fabs(want[i]));
        if (!(err <= worst)) {  // NaN counts
          worst = std::isnan(err) ? INFINITY : err;
          at = i;
        }
      }
      EXPECT_LE(worst, limit) << backends[b].name << ", " << what << ": value " << at << " is " << got[at]
                            << ", the reference has " << want[at];
    }
  }
};

class BackendOps : public ::testing::TestWithParam<std::string> {};

TEST_P(BackendOps, EveryStepMatchesTheReference) {
  Harness h(GetParam());
  const float tol = 2e-4f;
  const mega::ModelWeights& w = mega::model_weights(*h.model);
  h.check("embed", Act::x, tol, [&](mega::Ops& o, const mega::Span& sp) { return o.embed(sp); });
  const int64_t rows = h.span.rows(), C = h.hp.chunk_size;
  auto norm_step = [&](NormSite site, int32_t l, Act in, Act out) {
    return [=](mega::Ops& o, const mega::Span&) { return o.norm(site, l, in, out, 0, rows); };
  };
  for (int32_t l = 0; l < h.hp.n_layers; ++l) {
    const std::string layer = "layer " + std::to_string(l) + " ";
    const Act in = h.hp.prenorm ? Act::xn : Act::x;
    h.share({Act::x});
    if (h.hp.prenorm) {
      h.check(layer + "norm", Act::xn, tol, norm_step(NormSite::layer, l, Act::x, Act::xn));
      h.share({Act::xn});
    }
    h.check(layer + "ema", Act::mx, tol, [&](mega::Ops& o, const mega::Span& sp) { return o.ema(l, in, sp); });
    h.share({Act::mx});
    // the steps between the EMA and the residual share the backend's scratch:
    // checked together on x, one pass of each backend's size at a time
    h.check(layer + "gate_inputs + attention + gate_output", Act::x, tol, [&](mega::Ops& o, const mega::Span& sp) {
      for (int64_t r0 = 0; r0 < rows; r0 += o.pass_rows(sp)) {
        const int64_t n = o.pass_rows(sp);
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
      h.check(layer + "postnorm", Act::x, tol, norm_step(NormSite::layer, l, Act::x, Act::x));
      h.share({Act::x});
    }
    if (!w.layers[size_t(l)].has_ffn) continue;
    Act ffn_in = Act::x;
    if (h.hp.prenorm) {
      h.check(layer + "ffn norm", Act::xn, tol, norm_step(NormSite::ffn, l, Act::x, Act::xn));
      h.share({Act::xn});
      ffn_in = Act::xn;
    }
    h.check(layer + "ffn", Act::x, tol, [&](mega::Ops& o, const mega::Span& sp) {
      for (int64_t r0 = 0; r0 < rows; r0 += o.pass_rows(sp)) {
        const Status s = o.ffn(l, ffn_in, r0, o.pass_rows(sp));
        if (s != Status::ok) return s;
      }
      return Status::ok;
    });
    h.share({Act::x});
    if (!h.hp.prenorm) {
      h.check(layer + "ffn postnorm", Act::x, tol, norm_step(NormSite::ffn, l, Act::x, Act::x));
      h.share({Act::x});
    }
  }
  if (w.has_final_norm) {
    h.check("final norm", Act::x, tol, norm_step(NormSite::final, 0, Act::x, Act::x));
  }
}

// The fixtures' awkward shapes: odd and non-multiple-of-8 sizes, patches,
// log-power features, every attention function and norm, pre- and postnorm,
// with and without FFN, truncated and untruncated, both EMA directions.
INSTANTIATE_TEST_SUITE_P(Fixtures, BackendOps,
                         ::testing::Values("tiny_uni.mega", "tiny_patch.mega", "tiny_logpower.mega", "tiny_lognorm.mega", "tiny_logmel.mega",
                                           "tiny_softmax_ln_post.mega", "tiny_relu2_scale_noffn.mega",
                                           "tiny_bi.mega", "tiny_rms_bi_untrunc.mega", "tiny_scan.mega"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param.substr(0, i.param.find('.'));
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

}  // namespace
