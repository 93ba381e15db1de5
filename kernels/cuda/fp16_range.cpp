// SPDX-License-Identifier: Apache-2.0
// The float16 range check (fp16_range.h): forward.h on the host with a
// launcher that records the peak of every output float16 storage would hold,
// the residual stream's apart from the rest.
#include "fp16_range.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <vector>

#include "host_emulation.h"

namespace mega::gpu {

namespace {

// HostOps, noting each step's output peak with its tensor and layer. Outputs
// that are float32 in either storage type (GemmDesc::c_f32, o, hb) are not
// noted; the scores GEMM's is noted as float16 stores it, scaled (forward.h),
// except for laplace attention: its weight 0.5 (1 + erf(...)) is exactly 0 or
// 1 long before float16's limit, so a score that overflows to +-Inf gives the
// weight float32 gives (the base model's scores reach 4e5 on its self-test
// clip), as long as the relative position bias added to it is far from the
// limit too.
class RangeProbe : public HostOps {
 public:
  // Laplace weights saturate within |score + bias| < 10; a bias this far from
  // the limit leaves an overflowed score saturated.
  static constexpr float kSaturatedBias = kFp16Max / 2;

  void watch(const Buffers<float>& bf, const Dims& dm) {
    bf_ = bf;
    dm_ = dm;
    score_scale_ = dm.fn == AttentionFn::softmax ? 1.0f / std::sqrt(float(dm.z)) : 1.0f / float(dm.c);
  }
  // The largest relative position bias of any layer (laplace: see above).
  void set_bias_peak(float b) { bias_peak_ = b; }
  const Fp16Peaks& range() const { return range_; }

  Status gemm(const GemmDesc& g) {
    MEGA_TRY(HostOps::gemm(g));
    if (g.c_f32) return Status::ok;
    const float* c = static_cast<const float*>(g.c);
    const int64_t n = int64_t(g.m) * g.n + (int64_t(g.batch) - 1) * g.stride_c;
    if (c == bf_.scores) {
      if (dm_.fn == AttentionFn::laplace && bias_peak_ < kSaturatedBias) return Status::ok;
      return note(&range_.other, "attention scores (q k^T scaled)", c, n, score_scale_);
    }
    if (c >= bf_.base && c < bf_.q) return note(&range_.other, "gate projection (u, z, r, hx)", c, n);
    // v_proj and fc1 read the residual stream: their raw outputs are scaled with it
    return note(&range_.residual, c >= bf_.v && c < bf_.base ? "v projection" : "FFN hidden layer", c, n);
  }
  Status embed(const EmbedParams<float>& p) {
    layer_ = -1;  // a forward pass begins
    MEGA_TRY(HostOps::embed(p));
    return note(&range_.residual, "patch embedding", p.x, int64_t(p.n_streams) * p.n_tok * p.d);
  }
  Status teacher_project(const TeacherProjectParams<float>& p) {
    layer_ = -1;  // a forward pass begins: the teacher's tokens
    MEGA_TRY(HostOps::teacher_project(p));
    return note(&range_.residual, "patch embedding", p.x, p.rows * p.d);
  }
  Status norm(const NormParams<float>& p) {
    MEGA_TRY(HostOps::norm(p));
    return note(&range_.residual, "norm output", p.y, p.rows * p.d);
  }
  Status ema(const EmaParams<float>& p) {
    if (p.mode != EmaMode::backward) ++layer_;
    MEGA_TRY(HostOps::ema(p));
    return note(&range_.other, "EMA output", p.y, int64_t(p.n_streams) * p.n_tok * p.d);
  }
  Status bias_act(const BiasActParams<float>& p) {
    MEGA_TRY(HostOps::bias_act(p));
    if (p.y >= bf_.v && p.y < bf_.base) return note(&range_.other, "v", p.y, p.rows * p.cols);
    return note(&range_.residual, "FFN hidden layer", p.y, p.rows * p.cols);
  }
  Status split(const SplitParams<float>& p) {
    MEGA_TRY(HostOps::split(p));
    MEGA_TRY(note(&range_.other, "gate (u, z, r, hx)", p.base, p.rows * p.g.cols()));
    MEGA_TRY(note(&range_.other, "q", p.q, p.rows * p.g.z));
    return note(&range_.other, "k", p.k, p.rows * p.g.z);
  }
  Status scores(const ScoreParams<float>& p) {
    MEGA_TRY(HostOps::scores(p));
    return note(&range_.other, "attention weights", p.scores, score_size(p));
  }
  Status softmax(const ScoreParams<float>& p) {
    MEGA_TRY(HostOps::softmax(p));
    return note(&range_.other, "attention weights", p.scores, score_size(p));
  }
  Status residual(const ResidualParams<float>& p) {
    MEGA_TRY(HostOps::residual(p));
    return note(&range_.residual, "residual stream x", p.x, p.rows * p.g.d);
  }
  Status add_residual(const AddResidualParams<float>& p) {
    MEGA_TRY(HostOps::add_residual(p));
    return note(&range_.residual, "residual stream x (after the FFN)", p.x, p.rows * p.cols);
  }

 private:
  Status note(Fp16Peak* peak, const char* tensor, const float* v, int64_t n, float scale = 1.0f) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; ++i) {
      const float a = std::fabs(v[i] * scale);
      if (!(a <= m)) m = std::isnan(a) ? INFINITY : a;
    }
    if (m > peak->value) {
      peak->value = m;
      peak->tensor = tensor;
      peak->layer = layer_;
    }
    return Status::ok;
  }

  Buffers<float> bf_;
  Dims dm_;
  float score_scale_ = 1.0f;
  float bias_peak_ = 0.0f;
  int32_t layer_ = -1;
  Fp16Peaks range_;
};

// One window of a gliding tone with a little noise (deterministic), the kind
// of clip the converter stores as the self-test (tools/mega_kws_tools/convert/mega_convert.py).
std::vector<float> synthetic_clip(const HParams& hp) {
  const int64_t n = hp.window_samples();
  std::vector<float> clip(static_cast<size_t>(n));
  uint32_t state = 1234;
  const double pi = 3.14159265358979323846;
  for (int64_t i = 0; i < n; ++i) {
    const double t = double(i) / hp.sample_rate;
    const double hann = n > 1 ? 0.5 - 0.5 * std::cos(2.0 * pi * double(i) / double(n - 1)) : 1.0;
    state = state * 1664525u + 1013904223u;
    const double noise = (double(state >> 8) / double(1u << 24) - 0.5) * 0.1;
    clip[size_t(i)] = float(0.3 * std::sin(2.0 * pi * (200.0 * t + 400.0 * t * t)) * hann + noise);
  }
  return clip;
}

std::atomic<int64_t> g_passes{0};

}  // namespace

int64_t fp16_range_passes() { return g_passes.load(); }

Fp16Peaks fp16_range(const Model& model) {
  ++g_passes;
  // the host only reads the model during this call
  std::shared_ptr<const Model> view(&model, [](const Model*) {});
  const std::vector<float> clip = model.self_test_input().empty() ? synthetic_clip(model.hparams())
                                                                  : model.self_test_input();
  HostEmulation<RangeProbe> host(view, 1, int64_t(clip.size()), 1);
  host.launcher().watch(host.buffers(), host.dims());
  float bias_peak = 0.0f;
  const int64_t n_bias = 2 * int64_t(model.hparams().chunk_size) - 1;
  for (const LayerWeights& L : model_weights(model).layers) {
    for (int64_t i = 0; i < n_bias; ++i) bias_peak = std::max(bias_peak, std::fabs(L.rel_pos_bias[i]));
  }
  host.launcher().set_bias_peak(bias_peak);
  std::vector<float> logits(size_t(model.hparams().n_classes));
  Fp16Peaks r = host.launcher().range();
  r.present = true;
  if (host.classify(clip.data(), int64_t(clip.size()), logits.data()) != Status::ok) {
    r.other.value = INFINITY;
    r.other.tensor = "(the calibration clip could not be run)";
    return r;
  }
  r = host.launcher().range();
  r.present = true;
  return r;
}

Status fp16_x_scale(const Model& model, float* x_scale, char* error, size_t error_size) {
  const char* clip = model.self_test_input().empty() ? "calibration" : "self-test";
  const Fp16Peaks& stored = model.info().fp16_peaks;
  if (stored.present) return fp16_x_scale_from(stored, clip, x_scale, error, error_size);
  return fp16_x_scale_from(fp16_range(model), clip, x_scale, error, error_size);
}

Status fp16_x_scale_from(const Fp16Peaks& r, const char* clip, float* x_scale, char* error, size_t error_size) {
  const float limit = kFp16Max / kFp16Headroom;
  float scale = 1.0f;
  while (scale < kFp16MaxScale && !(r.residual.value / scale <= limit)) scale *= 2.0f;
  const bool residual_fits = r.residual.value / scale <= limit;
  if (residual_fits && r.other.value <= limit) {
    *x_scale = scale;
    return Status::ok;
  }
  const Fp16Peak& p = residual_fits ? r.other : r.residual;
  char where[32];
  if (p.layer < 0) {
    std::snprintf(where, sizeof where, "before the first layer");
  } else {
    std::snprintf(where, sizeof where, "in layer %d", int(p.layer));
  }
  char fits[96];
  std::snprintf(fits, sizeof fits, residual_fits ? "%.0f" : "%.0f even scaled by 1/%.0f", double(limit),
                double(kFp16MaxScale));
  std::snprintf(error, error_size,
                "this model's activations do not fit float16 (fp16): its %s %s reaches %.3g on the %s clip, "
                "beyond %s (float16's largest value, 65504, with %gx headroom for louder input); "
                "use float32 (no fp16)",
                p.tensor.c_str(), where, double(p.value), clip, fits, double(kFp16Headroom));
  return Status::unsupported_model;
}

}  // namespace mega::gpu
