// SPDX-License-Identifier: Apache-2.0
// Scalar references of the teacher's ops (teacher_ops.h): plain loops that
// follow the ONNX nodes one by one; never optimized.
#include <algorithm>
#include <cmath>

#include "cpu/teacher_ops.h"

namespace mega::teacher {

namespace {
// The graph's log then "* 10 / 2.3025851": its divisor is a float32 constant.
constexpr double kLn10 = double(2.3025851f);
}  // namespace

void mel_db_ref(const MelParams& p) {
  for (int32_t f = 0; f < p.n_frames; ++f) {
    const float* frame = p.samples + int64_t(f) * kHop;
    double power[kBins];
    for (int32_t k = 0; k < kBins; ++k) {  // Conv (real), Conv (imag), Pow 2, Add
      double re = 0.0, im = 0.0;
      for (int32_t i = 0; i < kFft; ++i) {
        re += double(p.stft_real[k * kFft + i]) * double(frame[i]);
        im += double(p.stft_imag[k * kFft + i]) * double(frame[i]);
      }
      power[k] = re * re + im * im;
    }
    for (int32_t m = 0; m < kMel; ++m) {  // MatMul, Clip, Log, Mul 10, Div ln 10
      double acc = 0.0;
      for (int32_t k = 0; k < kBins; ++k) acc += power[k] * double(p.mel[k * kMel + m]);
      acc = std::max(acc, double(p.clip_min));
      p.db[int64_t(f) * kMel + m] = std::log(acc) * 10.0 / kLn10;
    }
  }
}

void mel_floor_scale(const double* db, int64_t n_frames, double top_db, float* out) {
  const int64_t n = n_frames * kMel;
  if (n == 0) return;
  double top = db[0];
  for (int64_t i = 1; i < n; ++i) top = std::max(top, db[i]);
  const double floor = top - top_db;
  for (int64_t i = 0; i < n; ++i) out[i] = float(std::max(db[i], floor) / 10.0 + 2.0);
}

int32_t conv2d_out_size(int32_t in, int32_t kernel, int32_t pad_begin, int32_t pad_end, int32_t stride,
                        int32_t dilation) {
  const int32_t span = dilation * (kernel - 1) + 1;
  const int32_t padded = in + pad_begin + pad_end;
  return padded < span ? 0 : (padded - span) / stride + 1;
}

int32_t conv2d_out_h(const Conv2dParams& p) {
  return conv2d_out_size(p.h, p.kh, p.pad_top, p.pad_bottom, p.stride_h, p.dilation_h);
}

int32_t conv2d_out_w(const Conv2dParams& p) {
  return conv2d_out_size(p.w, p.kw, p.pad_left, p.pad_right, p.stride_w, p.dilation_w);
}

void conv2d_ref(const Conv2dParams& p) {
  const int32_t h_out = conv2d_out_h(p), w_out = conv2d_out_w(p);
  for (int32_t o = 0; o < p.c_out; ++o) {
    for (int32_t oy = 0; oy < h_out; ++oy) {
      for (int32_t ox = 0; ox < w_out; ++ox) {
        float acc = p.bias ? p.bias[o] : 0.0f;
        for (int32_t c = 0; c < p.c_in; ++c) {
          for (int32_t i = 0; i < p.kh; ++i) {
            const int32_t iy = oy * p.stride_h + i * p.dilation_h - p.pad_top;
            if (iy < 0 || iy >= p.h) continue;  // zero padding
            for (int32_t j = 0; j < p.kw; ++j) {
              const int32_t ix = ox * p.stride_w + j * p.dilation_w - p.pad_left;
              if (ix < 0 || ix >= p.w) continue;
              const float wv = p.weight[((int64_t(o) * p.c_in + c) * p.kh + i) * p.kw + j];
              acc += wv * p.x[(int64_t(c) * p.h + iy) * p.w + ix];
            }
          }
        }
        p.y[(int64_t(o) * h_out + oy) * w_out + ox] = acc;
      }
    }
  }
}

void leaky_relu_ref(const float* x, float alpha, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] >= 0.0f ? x[i] : alpha * x[i];
}

void max_scalar_ref(const float* x, float b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::max(x[i], b);
}

int32_t maxpool_out_h(const MaxPoolParams& p) { return conv2d_out_size(p.h, p.kh, 0, 0, p.stride_h, 1); }
int32_t maxpool_out_w(const MaxPoolParams& p) { return conv2d_out_size(p.w, p.kw, 0, 0, p.stride_w, 1); }

void maxpool_ref(const MaxPoolParams& p) {
  const int32_t h_out = maxpool_out_h(p), w_out = maxpool_out_w(p);
  for (int32_t c = 0; c < p.c; ++c) {
    for (int32_t oy = 0; oy < h_out; ++oy) {
      for (int32_t ox = 0; ox < w_out; ++ox) {
        float m = -INFINITY;
        for (int32_t i = 0; i < p.kh; ++i) {
          for (int32_t j = 0; j < p.kw; ++j) {
            m = std::max(m, p.x[(int64_t(c) * p.h + oy * p.stride_h + i) * p.w + ox * p.stride_w + j]);
          }
        }
        p.y[(int64_t(c) * h_out + oy) * w_out + ox] = m;
      }
    }
  }
}

}  // namespace mega::teacher
