// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's code that runs without a GPU, on the host:
//   - the shared scalar math (kernels/common/scalar_math.h) is bit for bit
//     the CPU's reference math;
//   - the EMA kernel's segmented scan (kernels/cuda/ema.cuh, phase by phase as the
//     threads run it) against the CPU reference EMA, streaming with state over
//     many chunks and resets, bidirectional, any segmentation;
//   - the GEMM descriptors handed to cuBLAS (column-major, strided-batched),
//     run through column-major BLAS, against the CPU linear and attention;
//   - the norms, and the whole forward pass (kernels/cuda/forward.h with
//     kernels/cuda/host_ops.h) against the golden fixtures, streaming and offline,
//     and B streams in one batch against B single streams.
// What this cannot check: thread mapping, warp shuffles, cuBLAS itself, graphs
// and pinned memory. tests/kernels/cuda/ does, on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/kernels.h"
#include "golden.h"
#include "gpu_host_emulation.h"
#include "host_ops.h"

using mega_test::Golden;
using mega_test::HostGpuEmulation;
using mega_test::max_abs_diff;
using mega_test::uniform;
namespace gpu = mega::gpu;

namespace {

bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// Values across the interesting ranges, plus the edges.
std::vector<float> sweep() {
  std::vector<float> v = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 0.5f, -0.5f, 0.707107f, 20.0f,
                          -20.0f, 88.0f, -88.0f, 89.0f, -104.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN};
  for (float x = -30.0f; x <= 30.0f; x += 0.0137f) v.push_back(x);
  return v;
}

using VecFn = void (*)(mega::KernelImpl, const float*, float*, int64_t);

void expect_same_as_reference(const char* name, VecFn vec, float (*scalar)(float)) {
  const std::vector<float> in = sweep();
  std::vector<float> want(in.size());
  vec(mega::KernelImpl::reference, in.data(), want.data(), int64_t(in.size()));
  int bad = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!same_bits(scalar(in[i]), want[i]) && ++bad <= 3) {
      ADD_FAILURE() << name << "(" << in[i] << "): shared " << scalar(in[i]) << ", CPU reference " << want[i];
    }
  }
}

}  // namespace

TEST(GpuHostMath, SharedScalarMathIsTheCpuReference) {
  expect_same_as_reference("sigmoid", mega::cpu::vec_sigmoid, mega::math::sigmoid);
  expect_same_as_reference("silu", mega::cpu::vec_silu, mega::math::silu);
  expect_same_as_reference("gelu", mega::cpu::vec_gelu, mega::math::gelu);
  expect_same_as_reference("gelu_tanh", mega::cpu::vec_gelu_tanh, mega::math::gelu_tanh);
  expect_same_as_reference("relu", mega::cpu::vec_relu, mega::math::relu);
  expect_same_as_reference("laplace", mega::cpu::vec_laplace, mega::math::laplace);
  EXPECT_EQ(mega::math::kLaplaceMu, mega::cpu::kLaplaceMu);
  EXPECT_EQ(mega::math::kLaplaceDivisor, mega::cpu::kLaplaceDivisor);
}

TEST(GpuHostMath, EmaPowerAndSegments) {
  // (1 - a)^e to float precision, even for q = 1 - a close to 1
  for (double a : {1.0, 0.7, 0.25, 1e-3, 1e-5, 0.0}) {
    for (int64_t e : {0, 1, 2, 3, 7, 64, 125, 1000, 2001}) {
      const double want = std::pow(1.0 - double(float(a)), double(e));
      EXPECT_NEAR(gpu::ema_decay_pow(float(a), e), want, 1.2e-7 * want + 1e-38) << "(1 - " << a << ")^" << e;
    }
  }
  // segments tile [0, n_ext) in order, none overlapping, trailing ones empty
  for (int64_t n_ext : {1, 2, 25, 31, 164, 2000}) {
    for (int32_t n_seg : {1, 2, 3, 7, 16, 64, 300}) {
      int64_t next = 0;
      for (int32_t s = 0; s < n_seg; ++s) {
        const gpu::EmaRange r = gpu::ema_segment(n_ext, n_seg, s);
        const int64_t m0 = r.m0, m1 = r.m1;
        ASSERT_EQ(m0, next) << n_ext << " " << n_seg << " " << s;
        ASSERT_LE(m0, m1);
        next = m1;
      }
      EXPECT_EQ(next, n_ext);
    }
  }
  // launch shape: lanes a power of two >= N, whole warps, at most 256 threads
  for (int32_t n : {1, 2, 3, 5, 16, 17, 32}) {
    for (int64_t n_ext : {1, 25, 2000, 100000}) {
      const gpu::EmaShape sh = gpu::ema_shape(n_ext, n);
      EXPECT_GE(sh.lanes, n);
      EXPECT_EQ(sh.lanes & (sh.lanes - 1), 0);
      EXPECT_EQ(32 % sh.lanes, 0);
      EXPECT_EQ(sh.threads % 32, 0);
      EXPECT_GE(sh.threads, sh.lanes * sh.n_seg);
      EXPECT_LE(sh.threads, gpu::kEmaThreads);
      EXPECT_GE(sh.n_seg, 1);
    }
  }
}

namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Random EMA weights with some very slow decays (1 - q = 1e-3) among them.
mega::EmaWeights make_ema(std::mt19937& rng, int32_t rows, int32_t n_dim, int32_t K) {
  mega::EmaWeights w;
  w.n_rows = rows;
  w.n_dim = n_dim;
  w.truncation = K;
  const size_t count = size_t(rows) * size_t(n_dim);
  std::uniform_real_distribution<double> u(-3.0, 3.0), b(-1.0, 1.0);
  for (size_t i = 0; i < count; ++i) {
    const double p = sigmoid(u(rng));
    double q = 1.0 - p * sigmoid(u(rng));
    if (i % 5 == 0) q = 0.999;
    w.gain.push_back(p * b(rng));
    w.decay.push_back(q);
    w.decay_k.push_back(K > 0 ? std::pow(q, double(K)) : 0.0);
    w.out.push_back(b(rng) * std::sqrt(1.0 / n_dim));
  }
  if (K > 0) {
    w.kernel.resize(size_t(rows) * size_t(K));
    mega::cpu::ema_lag_kernel(w, w.kernel.data());
  }
  return w;
}

// Float copies of the coefficients, as the device holds them.
struct EmaCoeffs {
  std::vector<float> a, g, qk, out;
  explicit EmaCoeffs(const mega::EmaWeights& w) {
    for (size_t i = 0; i < w.decay.size(); ++i) {
      a.push_back(float(1.0 - w.decay[i]));
      g.push_back(float(w.gain[i]));
      qk.push_back(float(w.decay_k[i]));
      out.push_back(float(w.out[i]));
    }
  }
  // A plain pass (no epilogue) over n_streams spans of T tokens.
  gpu::EmaParams<float> params(const float* x, float* y, int32_t n_streams, int64_t T, int32_t d, int32_t N, int32_t K,
                               gpu::EmaMode mode) const {
    gpu::EmaParams<float> p;
    p.x = x;
    p.y = y;
    p.a = a.data();
    p.g = g.data();
    p.qk = qk.data();
    p.out = out.data();
    p.n_streams = n_streams;
    p.n_tok = T;
    p.d = d;
    p.n = N;
    p.k = K;
    p.mode = mode;
    p.epilogue = false;
    return p;
  }
};

// Bound on |y| per channel: sum over lags of |kernel| (inputs are in [-1, 1]).
std::vector<double> ema_magnitude(const mega::EmaWeights& w, int32_t d, int32_t half) {
  std::vector<double> mag(size_t(d), 0.0);
  for (int32_t c = 0; c < d; ++c) {
    for (int32_t n = 0; n < w.n_dim; ++n) {
      const size_t i = size_t(c + half * d) * size_t(w.n_dim) + size_t(n);
      mag[size_t(c)] += std::fabs(w.gain[i] * w.out[i]) / (1.0 - w.decay[i]);
    }
  }
  return mag;
}

}  // namespace

// Streams of equal chunks through the device scan (host emulation) and the
// CPU reference, two streams per batch with the second one reset midway.
TEST(GpuHostEma, StreamingScanMatchesCpuReference) {
  std::mt19937 rng(7);
  double worst = 0.0;
  for (int32_t d : {1, 3, 7}) {
    for (int32_t N : {1, 3, 5, 16, 17, 32}) {
      for (int32_t K : {0, 1, 5, 15, 64}) {
        for (int64_t T : {1, 4, 10, 37, 100}) {
          const mega::EmaWeights w = make_ema(rng, d, N, K);
          const EmaCoeffs co(w);
          const std::vector<double> mag = ema_magnitude(w, d, 0);
          const int32_t n_steps = 6, reset_at = 3;  // stream 1 restarts at step 3
          // device-side state and buffers for 2 streams
          std::vector<float> ring(size_t(2 * std::max(K, 1) * d), 0.0f), h(size_t(2 * d * N), 0.0f);
          std::vector<float> x(size_t(2 * T * d)), y(x.size());
          int64_t index[2] = {0, 0};
          // CPU reference state per stream
          std::vector<double> ref_h[2];
          std::vector<float> ref_ring[2];
          int64_t ref_seen[2] = {0, 0};
          for (int s = 0; s < 2; ++s) {
            ref_h[s].assign(size_t(d * N), 0.0);
            ref_ring[s].assign(size_t(std::max(K, 1) * d), 0.0f);
          }
          for (int32_t step = 0; step < n_steps; ++step) {
            if (step == reset_at) {
              index[1] = 0;
              ref_h[1].assign(ref_h[1].size(), 0.0);
              ref_ring[1].assign(ref_ring[1].size(), 0.0f);
              ref_seen[1] = 0;
            }
            x = uniform(rng, x.size(), -1.0f, 1.0f);
            gpu::EmaParams<float> p = co.params(x.data(), y.data(), 2, T, d, N, K, gpu::EmaMode::stream);
            p.ring = ring.data();
            p.h = h.data();
            p.chunk_index = index;
            const int32_t n_seg = int32_t(step % 3 == 2 ? gpu::ema_n_ext(p) + 3 : step % 3);  // 0 = kernel's choice
            for (int32_t b = 0; b < 2; ++b) {
              for (int32_t c = 0; c < d; ++c) gpu::ema_channel_host(p, b, c, n_seg);
            }
            for (int32_t b = 0; b < 2; ++b) {
              std::vector<float> want(size_t(T * d));
              mega::cpu::EmaParams rp;
              rp.w = &w;
              rp.d = d;
              rp.n = T;
              rp.x = x.data() + b * T * d;
              rp.y = want.data();
              rp.h = ref_h[b].data();
              rp.ring = ref_ring[b].data();
              rp.tokens_seen = ref_seen[b];
              rp.ref_kernel = w.kernel.data();
              mega::cpu::ema_causal_ref(rp);
              ref_seen[b] += T;
              for (int64_t t = 0; t < T; ++t) {
                for (int32_t c = 0; c < d; ++c) {
                  const double got = y[size_t((b * T + t) * d + c)], ref = want[size_t(t * d + c)];
                  const double err = std::fabs(got - ref) / (mag[size_t(c)] + 1e-30);
                  worst = std::max(worst, err);
                  ASSERT_LE(err, 2e-5) << "d " << d << " N " << N << " K " << K << " T " << T << " step " << step
                                       << " stream " << b << " token " << t << " channel " << c << ": " << got
                                       << " vs " << ref;
                }
              }
              ++index[b];
            }
          }
        }
      }
    }
  }
  std::printf("[ gpu-ema  ] streaming scan: worst |err| / magnitude %.3g\n", worst);
}

TEST(GpuHostEma, BidirectionalAndEpilogueMatchCpuReference) {
  std::mt19937 rng(11);
  double worst = 0.0;
  for (int32_t d : {1, 2, 5}) {
    for (int32_t N : {1, 3, 16}) {
      for (int32_t K : {0, 1, 5, 15}) {
        for (int64_t T : {1, 9, 40, 131}) {
          const mega::EmaWeights w = make_ema(rng, 2 * d, N, K);
          const EmaCoeffs co(w);
          std::vector<double> mag = ema_magnitude(w, d, 0);
          const std::vector<double> mag2 = ema_magnitude(w, d, 1);
          for (int32_t c = 0; c < d; ++c) mag[size_t(c)] += mag2[size_t(c)];
          const std::vector<float> x = uniform(rng, size_t(T * d), -1.0f, 1.0f);
          const std::vector<float> omega = uniform(rng, size_t(d), -1.0f, 1.0f);
          std::vector<float> want(x.size()), got(x.size()), got_mx(x.size());
          mega::cpu::EmaParams rp;
          rp.w = &w;
          rp.d = d;
          rp.n = T;
          rp.x = x.data();
          rp.y = want.data();
          mega::cpu::ema_bidir_ref(rp);
          for (int with_epilogue = 0; with_epilogue < 2; ++with_epilogue) {
            gpu::EmaParams<float> p = co.params(x.data(), with_epilogue ? got_mx.data() : got.data(), 1, T, d, N, K,
                                                gpu::EmaMode::forward);
            p.omega = omega.data();
            mega::gpu::HostOps ops;
            ASSERT_EQ(ops.ema(p), mega::Status::ok);
            p.mode = gpu::EmaMode::backward;
            p.row_offset = d;
            p.accumulate = true;
            p.epilogue = with_epilogue == 1;
            ASSERT_EQ(ops.ema(p), mega::Status::ok);
          }
          for (int64_t t = 0; t < T; ++t) {
            for (int32_t c = 0; c < d; ++c) {
              const size_t i = size_t(t * d + c);
              const double err = std::fabs(double(got[i]) - want[i]) / mag[size_t(c)];
              worst = std::max(worst, err);
              ASSERT_LE(err, 2e-5) << "d " << d << " N " << N << " K " << K << " T " << T << " t " << t;
              const float mx = mega::math::silu(got[i] + omega[size_t(c)] * x[i]);
              ASSERT_TRUE(same_bits(got_mx[i], mx)) << got_mx[i] << " vs " << mx;
            }
          }
        }
      }
    }
  }
  std::printf("[ gpu-ema  ] bidirectional: worst |err| / magnitude %.3g\n", worst);
}

TEST(GpuHostGemm, LinearDescriptorMatchesCpuLinear) {
  std::mt19937 rng(3);
  for (int32_t rows : {1, 3, 10}) {
    for (int32_t n_in : {1, 5, 60}) {
      for (int32_t n_out : {1, 7, 270}) {
        const auto x = uniform(rng, size_t(rows * n_in), -1.0f, 1.0f);
        const auto wv = uniform(rng, size_t(n_out * n_in), -1.0f, 1.0f);
        mega::LinearWeights lw;
        lw.w = wv.data();
        lw.n_in = n_in;
        lw.n_out = n_out;
        std::vector<float> want(size_t(rows * n_out)), got(want.size());
        mega::cpu::LinearParams lp;
        lp.x = x.data();
        lp.n = rows;
        lp.w = &lw;
        lp.y = want.data();
        mega::cpu::linear_ref(lp);
        gpu::LinearDev ld;
        ld.w = wv.data();
        ld.n_in = n_in;
        ld.n_out = n_out;
        mega::gpu::HostOps ops;
        ASSERT_EQ(ops.gemm(gpu::linear_gemm(ld, x.data(), rows, got.data())), mega::Status::ok);
        EXPECT_LE(max_abs_diff(got.data(), want.data(), got.size()), 1e-5 * n_in)
            << rows << "x" << n_in << " -> " << n_out;
      }
    }
  }
}

// attention_forward (both GEMMs, the weight pass, softmax rows, batching in
// groups that do not divide the chunk count) against the CPU reference.
TEST(GpuHostAttention, ChunkAttentionMatchesCpuReference) {
  std::mt19937 rng(5);
  for (mega::AttentionFn fn : {mega::AttentionFn::laplace, mega::AttentionFn::softmax, mega::AttentionFn::relu2}) {
    for (int32_t c : {1, 3, 10}) {
      for (int32_t z : {1, 6}) {
        for (int32_t h : {1, 5}) {
          const int64_t chunks = 5;
          gpu::Dims dm;
          dm.c = c;
          dm.z = z;
          dm.h = h;
          dm.fn = fn;
          gpu::Capacity cap;
          cap.group = 2;
          const auto q = uniform(rng, size_t(chunks * c * z), -2.0f, 2.0f);
          const auto k = uniform(rng, size_t(chunks * c * z), -2.0f, 2.0f);
          const auto v = uniform(rng, size_t(chunks * c * h), -1.0f, 1.0f);
          const auto bias = uniform(rng, size_t(2 * c - 1), -0.5f, 0.5f);
          std::vector<float> scores(size_t(cap.group * c * c)), o(size_t(chunks * c * h));
          gpu::Buffers<float> bf;
          bf.q = const_cast<float*>(q.data());
          bf.k = const_cast<float*>(k.data());
          bf.v = const_cast<float*>(v.data());
          bf.scores = scores.data();
          bf.o = o.data();
          gpu::LayerDev L;
          L.rel_bias = bias.data();
          mega::gpu::HostOps ops;
          ASSERT_EQ(gpu::attention_forward(ops, dm, cap, bf, L, 0, chunks * c), mega::Status::ok);
          for (int64_t ch = 0; ch < chunks; ++ch) {
            std::vector<float> ref_scores(size_t(c * c)), ref_o(size_t(c * h));
            mega::cpu::AttentionParams ap;
            ap.q = q.data() + ch * c * z;
            ap.k = k.data() + ch * c * z;
            ap.v = v.data() + ch * c * h;
            ap.rel_pos_bias = bias.data();
            ap.chunk = c;
            ap.c = c;
            ap.z = z;
            ap.hdim = h;
            ap.fn = fn;
            ap.scores = ref_scores.data();
            ap.o = ref_o.data();
            mega::cpu::attention_ref(ap);
            EXPECT_LE(max_abs_diff(o.data() + ch * c * h, ref_o.data(), ref_o.size()), 2e-5 * c)
                << "fn " << int(fn) << " c " << c << " z " << z << " h " << h << " chunk " << ch;
          }
        }
      }
    }
  }
}

TEST(GpuHostNorm, NormsMatchCpuReference) {
  std::mt19937 rng(9);
  for (mega::NormType type : {mega::NormType::batch_norm, mega::NormType::layer_norm, mega::NormType::scale_norm,
                              mega::NormType::rms_norm}) {
    for (int32_t d : {1, 3, 60}) {
      const int64_t rows = 7;
      const auto x = uniform(rng, size_t(rows * d), -3.0f, 3.0f);
      const auto a = uniform(rng, size_t(d), 0.5f, 1.5f);
      const auto b = uniform(rng, size_t(d), -0.5f, 0.5f);
      mega::NormWeights nw;
      nw.type = type;
      nw.eps = 1e-5f;
      nw.scalar = 1.7f;
      nw.weight = a.data();
      nw.bias = b.data();
      nw.bn_scale = a;
      nw.bn_shift = b;
      std::vector<float> want(x.size()), got(x.size()), in_place = x;
      mega::cpu::norm_apply(nw, x.data(), want.data(), rows, d);
      gpu::NormDev nd;
      nd.type = type;
      nd.eps = nw.eps;
      nd.scalar = nw.scalar;
      nd.a = a.data();
      nd.b = b.data();
      mega::gpu::HostOps ops;
      ASSERT_EQ(gpu::norm_into(ops, nd, x.data(), got.data(), rows, d, 1.0f), mega::Status::ok);
      ASSERT_EQ(gpu::norm_into(ops, nd, in_place.data(), in_place.data(), rows, d, 1.0f), mega::Status::ok);
      EXPECT_LE(max_abs_diff(got.data(), want.data(), got.size()), 2e-6 * 3 * 1.7) << int(type) << " d " << d;
      EXPECT_EQ(got, in_place) << "in place differs, type " << int(type) << " d " << d;
    }
  }
}

namespace {

void check_fixture(const std::string& dir, const std::string& name, double tol) {
  Golden g;
  auto m = mega_test::load_fixture(dir, name, &g);
  ASSERT_TRUE(m);
  const auto& in = g.at("input");
  HostGpuEmulation s(m, 1, int64_t(in.size()));
  std::vector<float> logits(size_t(m->hparams().n_classes)), chunks;
  ASSERT_EQ(s.classify(in.data(), int64_t(in.size()), logits.data(), &chunks), mega::Status::ok);
  const double d = max_abs_diff(logits.data(), g.at("logits").data(), logits.size());
  EXPECT_LE(d, tol) << name << " clip logits";
  std::printf("[ gpu-host ] %s: clip logits max abs diff %.3g\n", name.c_str(), d);
  if (!m->streamable() || !g.has("chunk_logits")) return;
  // a unidirectional clip runs as a stream: its per-chunk window logits
  const auto& want = g.at("chunk_logits");
  ASSERT_EQ(chunks.size(), want.size()) << name;
  const double dc = max_abs_diff(chunks.data(), want.data(), chunks.size());
  EXPECT_LE(dc, tol) << name << " per-chunk logits";
  std::printf("[ gpu-host ] %s: per-chunk logits max abs diff %.3g\n", name.c_str(), dc);
}

}  // namespace

TEST(GpuHostParity, TinyModelsMatchPyTorch) {
  for (const char* name : {"tiny_uni", "tiny_bi", "tiny_softmax_ln_post", "tiny_relu2_scale_noffn",
                           "tiny_rms_bi_untrunc", "tiny_patch", "tiny_logpower", "tiny_lognorm", "tiny_logmel", "tiny_scan"}) {
    check_fixture(MEGA_FIXTURES, name, 2e-5);
  }
}

TEST(GpuHostParity, BaseUnidirectionalMatchesPyTorch) { check_fixture(MEGA_GENERATED, "base_uni", 1e-4); }

TEST(GpuHostParity, BaseBidirectionalMatchesPyTorch) { check_fixture(MEGA_GENERATED, "base_bi", 1e-4); }

// The teacher's front end (kernels/cuda/teacher_forward.h) on the host: the
// CPU's TeacherParity bound.
TEST(GpuHostParity, TeacherMatchesPyTorch) { check_fixture(MEGA_GENERATED, "teacher_tiny", 1e-4); }

// Three streams in one batch (different audio, one reset midway) give what
// three one-stream sessions give, within the parity tolerance: the BLAS may
// take another kernel for another matrix shape (OpenBLAS on a Xeon with
// AVX-512 FP16 and AMX differed by up to 3.8e-6 on tiny_patch; this AMD
// machine's build gives bit-identical logits), while mixing up two streams'
// state moves the logits by far more.
TEST(GpuHostBatch, BatchedStreamsEqualSingleStreams) {
  for (const char* name : {"tiny_uni", "tiny_patch", "tiny_relu2_scale_noffn"}) {
    Golden g;
    auto m = mega_test::load_fixture(MEGA_FIXTURES, name, &g);
    ASSERT_TRUE(m);
    const auto& in = g.at("input");
    const int64_t cs = m->hparams().chunk_samples();
    const int32_t nc = m->hparams().n_classes;
    const int64_t n_chunks = int64_t(in.size()) / cs;
    const int64_t reset_at = n_chunks / 2;
    std::vector<std::vector<float>> audio(3, std::vector<float>(in.size()));
    for (size_t i = 0; i < in.size(); ++i) {
      audio[0][i] = in[i];
      audio[1][i] = in[in.size() - 1 - i];
      audio[2][i] = 0.5f * in[(i * 7) % in.size()];
    }
    HostGpuEmulation batch(m, 3);
    std::vector<std::unique_ptr<HostGpuEmulation>> single;
    for (int b = 0; b < 3; ++b) single.emplace_back(new HostGpuEmulation(m, 1));
    std::vector<float> step_in(static_cast<size_t>(3 * cs)), logits(static_cast<size_t>(3 * nc)), one(static_cast<size_t>(nc));
    for (int64_t c = 0; c < n_chunks; ++c) {
      if (c == reset_at) {
        batch.reset(1);
        single[1]->reset(0);
      }
      for (int b = 0; b < 3; ++b) {
        std::copy(audio[size_t(b)].begin() + c * cs, audio[size_t(b)].begin() + (c + 1) * cs,
                  step_in.begin() + b * cs);
      }
      ASSERT_EQ(batch.step(step_in.data(), logits.data()), mega::Status::ok);
      for (int b = 0; b < 3; ++b) {
        ASSERT_EQ(single[size_t(b)]->step(step_in.data() + b * cs, one.data()), mega::Status::ok);
        EXPECT_LE(max_abs_diff(logits.data() + b * nc, one.data(), size_t(nc)), 2e-5)
            << name << " stream " << b << " chunk " << c;
      }
    }
  }
}

// Chunks per strided-batched attention GEMM: all of them when they fit the
// scores budget, never more than cuBLAS's batch limit (65535: the batch is a
// grid dimension), at least one.
TEST(GpuHostPlan, AttentionGroupIsCappedForCuBlas) {
  using mega::gpu::attention_group;
  using mega::gpu::kMaxGemmBatch;
  EXPECT_EQ(attention_group(10 * 40, 10, int64_t(1) << 30, 4), 40);
  EXPECT_EQ(attention_group(10 * 40, 10, 10 * 10 * 4 * 7, 4), 7);
  EXPECT_EQ(attention_group(int64_t(10) * 70000, 10, int64_t(1) << 40, 4), kMaxGemmBatch);
  EXPECT_EQ(attention_group(int64_t(10) * 65535, 10, int64_t(1) << 40, 2), 65535);
  EXPECT_EQ(attention_group(int64_t(10) * 65536, 10, int64_t(1) << 40, 2), 65535);
  EXPECT_EQ(attention_group(1000, 1000, 16, 4), 1);
}
