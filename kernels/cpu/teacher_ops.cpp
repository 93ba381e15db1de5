// SPDX-License-Identifier: Apache-2.0
// Optimized twins of the teacher's ops (teacher_ops.h): the STFT and mel
// matrix as dgemms over a block of frames, the convolution as im2row and the
// packed SIMD projection with its LeakyRelu and Max fused, the max-pool
// row-wise. Held to the references in teacher_ref.cpp by
// tests/kernels/cpu/test_teacher_ops.cpp.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/kernels.h"
#include "cpu/packed_weights.h"
#include "cpu/simd_kernels.h"
#include "cpu/teacher_ops.h"

namespace mega::teacher {

namespace {
constexpr double kLn10 = double(2.3025851f);  // as mel_db_ref: the graph's float32 divisor
}  // namespace

void mel_pack_stft(const float* real, const float* imag, double* stft) {
  for (int32_t i = 0; i < kFft; ++i) {
    double* row = stft + int64_t(i) * 2 * kBins;
    for (int32_t k = 0; k < kBins; ++k) {
      row[k] = real[k * kFft + i];
      row[kBins + k] = imag[k * kFft + i];
    }
  }
}

void mel_db_fast(const MelParams& p, const MelFastParams& f) {
  if (p.n_frames == 0) return;
  // frames overlap (hop < fft): a row each, as a gemm wants a fixed leading dimension >= its width
  for (int32_t t = 0; t < p.n_frames; ++t) {
    const float* src = p.samples + int64_t(t) * kHop;
    double* dst = f.frames + int64_t(t) * kFft;
    for (int32_t i = 0; i < kFft; ++i) dst[i] = src[i];
  }
  constexpr int32_t two_bins = 2 * kBins;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p.n_frames, two_bins, kFft, 1.0, f.frames, kFft, f.stft,
              two_bins, 0.0, f.spectrum, two_bins);
  for (int32_t t = 0; t < p.n_frames; ++t) {  // power into the row's first half
    double* s = f.spectrum + int64_t(t) * two_bins;
    for (int32_t k = 0; k < kBins; ++k) s[k] = s[k] * s[k] + s[kBins + k] * s[kBins + k];
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p.n_frames, kMel, kBins, 1.0, f.spectrum, two_bins, f.mel,
              kMel, 0.0, p.db, kMel);
  const double lo = p.clip_min;
  const int64_t n = int64_t(p.n_frames) * kMel;
  for (int64_t i = 0; i < n; ++i) p.db[i] = std::log(std::max(p.db[i], lo)) * 10.0 / kLn10;
}

namespace {

int32_t conv2d_k(const Conv2dParams& p) { return p.c_in * p.kh * p.kw; }

LinearWeights conv2d_linear(const Conv2dParams& p) {
  LinearWeights w;
  w.w = p.weight;
  w.b = p.bias;
  w.n_out = p.c_out;
  w.n_in = conv2d_k(p);
  return w;
}

// rows (h_out w_out x c_in kh kw): row (oy, ox) holds the inputs under the kernel at that output, zero padded,
// in the weight's (c, i, j) order.
void im2row(const Conv2dParams& p, int32_t h_out, int32_t w_out, float* rows) {
  const int32_t k = conv2d_k(p);
  for (int32_t oy = 0; oy < h_out; ++oy) {
    for (int32_t ox = 0; ox < w_out; ++ox) {
      float* row = rows + (int64_t(oy) * w_out + ox) * k;
      for (int32_t c = 0; c < p.c_in; ++c) {
        for (int32_t i = 0; i < p.kh; ++i) {
          const int32_t iy = oy * p.stride_h + i * p.dilation_h - p.pad_top;
          if (iy < 0 || iy >= p.h) {  // a padding row
            row = std::fill_n(row, p.kw, 0.0f);
            continue;
          }
          const float* src = p.x + (int64_t(c) * p.h + iy) * p.w;
          for (int32_t j = 0; j < p.kw; ++j) {
            const int32_t ix = ox * p.stride_w + j * p.dilation_w - p.pad_left;
            *row++ = ix >= 0 && ix < p.w ? src[ix] : 0.0f;
          }
        }
      }
    }
  }
}

// y (c_out x n) = the epilogue of yt (n x c_out), which has the bias already. The epilogue runs in place over
// yt's contiguous values, in a form the compiler vectorizes: for 0 <= alpha <= 1, LeakyRelu is max(v, alpha v)
// (a NaN stays NaN: the comparison keeps the first operand).
void epilogue_transpose(float* yt, int64_t n, int32_t c_out, const ConvEpilogue& e, float* y) {
  const int64_t all = n * c_out;
  const float alpha = e.alpha, floor = e.floor;
  if (e.active && alpha >= 0.0f && alpha <= 1.0f) {
    for (int64_t i = 0; i < all; ++i) {
      const float v = yt[i], a = alpha * v;
      const float r = v < a ? a : v;
      yt[i] = r < floor ? floor : r;
    }
  } else if (e.active) {
    for (int64_t i = 0; i < all; ++i) {
      const float r = yt[i] >= 0.0f ? yt[i] : alpha * yt[i];
      yt[i] = r < floor ? floor : r;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int32_t o = 0; o < c_out; ++o) y[int64_t(o) * n + i] = yt[i * c_out + o];
  }
}

}  // namespace

int64_t conv2d_packed_floats(const Conv2dParams& p) {
  return int64_t(conv2d_k(p) + 1) * cpu::linear_padded_outputs(p.c_out);
}

void conv2d_pack(const Conv2dParams& p, float* packed) { cpu::linear_pack(conv2d_linear(p), packed); }

int64_t conv2d_scratch_floats(const Conv2dParams& p) {
  return int64_t(conv2d_out_h(p)) * conv2d_out_w(p) * (conv2d_k(p) + p.c_out);
}

void conv2d_fast(const Conv2dParams& p, const ConvEpilogue& e, const float* packed, float* scratch) {
  const int32_t h_out = conv2d_out_h(p), w_out = conv2d_out_w(p);
  const int64_t n = int64_t(h_out) * w_out;
  if (n == 0 || p.c_out == 0) return;
  float* rows = scratch;
  float* yt = scratch + n * conv2d_k(p);
  im2row(p, h_out, w_out, rows);
  const LinearWeights w = conv2d_linear(p);
  cpu::LinearParams lp;
  lp.x = rows;
  lp.n = n;
  lp.w = &w;
  lp.y = yt;
  lp.packed = packed;
  lp.ld = cpu::linear_padded_outputs(p.c_out);
  cpu::simd_kernels().linear(lp);
  epilogue_transpose(yt, n, p.c_out, e, p.y);
}

void maxpool_fast(const MaxPoolParams& p) {
  const int32_t h_out = maxpool_out_h(p), w_out = maxpool_out_w(p);
  for (int32_t c = 0; c < p.c; ++c) {
    const float* xc = p.x + int64_t(c) * p.h * p.w;
    for (int32_t oy = 0; oy < h_out; ++oy) {
      float* y = p.y + (int64_t(c) * h_out + oy) * w_out;
      const float* r0 = xc + int64_t(oy) * p.stride_h * p.w;
      // the window's rows folded first (contiguous, vectorizes), then its columns
      for (int32_t ox = 0; ox < w_out; ++ox) y[ox] = -INFINITY;
      for (int32_t i = 0; i < p.kh; ++i) {
        const float* r = r0 + int64_t(i) * p.w;
        for (int32_t j = 0; j < p.kw; ++j) {
          for (int32_t ox = 0; ox < w_out; ++ox) y[ox] = std::max(y[ox], r[ox * p.stride_w + j]);
        }
      }
    }
  }
}

}  // namespace mega::teacher
