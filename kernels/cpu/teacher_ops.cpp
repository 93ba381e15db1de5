// SPDX-License-Identifier: Apache-2.0
// Optimized twins of the teacher's ops (teacher_ops.h): the STFT and mel
// matrix as dgemms over a block of frames, the convolution as im2col and one
// sgemm with its LeakyRelu and Max fused, the max-pool row-wise. Held to the
// references in teacher_ref.cpp by tests/kernels/cpu/test_teacher_ops.cpp.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

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

int64_t conv2d_col_floats(const Conv2dParams& p) {
  return int64_t(p.c_in) * p.kh * p.kw * conv2d_out_h(p) * conv2d_out_w(p);
}

namespace {

// col (c_in kh kw x h_out w_out): row (c, i, j) holds the input under tap (i, j) for every output, zero padded.
void im2col(const Conv2dParams& p, int32_t h_out, int32_t w_out, float* col) {
  const int64_t n = int64_t(h_out) * w_out;
  for (int32_t c = 0; c < p.c_in; ++c) {
    const float* xc = p.x + int64_t(c) * p.h * p.w;
    for (int32_t i = 0; i < p.kh; ++i) {
      for (int32_t j = 0; j < p.kw; ++j) {
        float* row = col + ((int64_t(c) * p.kh + i) * p.kw + j) * n;
        for (int32_t oy = 0; oy < h_out; ++oy) {
          float* dst = row + int64_t(oy) * w_out;
          const int32_t iy = oy * p.stride_h + i * p.dilation_h - p.pad_top;
          if (iy < 0 || iy >= p.h) {
            std::fill(dst, dst + w_out, 0.0f);
            continue;
          }
          const float* src = xc + int64_t(iy) * p.w;
          const int32_t x0 = j * p.dilation_w - p.pad_left;
          for (int32_t ox = 0; ox < w_out; ++ox) {
            const int32_t ix = x0 + ox * p.stride_w;
            dst[ox] = ix >= 0 && ix < p.w ? src[ix] : 0.0f;
          }
        }
      }
    }
  }
}

// OpenBLAS allocates on some narrow shapes (it did on the embedding's last layers: 20 outputs, 1 output), and a
// stream allocates nothing per step; there a plain loop over the contiguous outputs serves as well.
constexpr int64_t kBlasMinOutputs = 32;

// y (m x n) = a (m x k) . b (k x n)
void narrow_gemm(const float* a, const float* b, int32_t m, int64_t n, int32_t k, float* y) {
  for (int32_t o = 0; o < m; ++o) {
    float* row = y + int64_t(o) * n;
    std::fill(row, row + n, 0.0f);
    for (int32_t i = 0; i < k; ++i) {
      const float w = a[int64_t(o) * k + i];
      const float* src = b + int64_t(i) * n;
      for (int64_t j = 0; j < n; ++j) row[j] += w * src[j];
    }
  }
}

void epilogue(const Conv2dParams& p, const ConvEpilogue& e, int64_t n) {
  for (int32_t o = 0; o < p.c_out; ++o) {
    float* y = p.y + int64_t(o) * n;
    const float b = p.bias ? p.bias[o] : 0.0f;
    if (!e.active) {
      for (int64_t i = 0; i < n; ++i) y[i] += b;
      continue;
    }
    const float alpha = e.alpha, floor = e.floor;
    for (int64_t i = 0; i < n; ++i) {
      const float v = y[i] + b;
      const float r = v >= 0.0f ? v : alpha * v;
      y[i] = r < floor ? floor : r;  // NaN stays NaN, as max_scalar_ref
    }
  }
}

}  // namespace

void conv2d_fast(const Conv2dParams& p, const ConvEpilogue& e, float* col) {
  const int32_t h_out = conv2d_out_h(p), w_out = conv2d_out_w(p);
  const int64_t n = int64_t(h_out) * w_out;
  if (n == 0 || p.c_out == 0) return;
  const int32_t k = p.c_in * p.kh * p.kw;
  im2col(p, h_out, w_out, col);
  if (n >= kBlasMinOutputs) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p.c_out, int(n), k, 1.0f, p.weight, k, col, int(n), 0.0f,
                p.y, int(n));
  } else {
    narrow_gemm(p.weight, col, p.c_out, n, k, p.y);
  }
  epilogue(p, e, n);
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
