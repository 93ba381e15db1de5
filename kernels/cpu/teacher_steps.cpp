// SPDX-License-Identifier: Apache-2.0
// TeacherSteps (teacher_frontend.h): the embedding graph over a stream, each
// layer computing only its new rows. A stage (a convolution, or a max-pool)
// joins the rows it held from the last step to the new ones in held_, runs
// its kernel over them into rows_, and keeps the rows its next output still
// needs: kh - 1 for a convolution, the unpaired one for a 2-row pool.
#include <algorithm>
#include <cstring>
#include <new>

#include "cpu/teacher_frontend.h"

namespace mega::teacher {

namespace {

// dst (c x (held + k) x width) = src_held (c x held x width) then src_new (c x k x width), channel by channel.
void join_rows(const float* held, int32_t n_held, const float* fresh, int32_t k, int32_t c, int32_t width,
               float* dst) {
  const int64_t row = width, rows = n_held + k;
  for (int32_t ch = 0; ch < c; ++ch) {
    float* d = dst + ch * rows * row;
    std::copy(held + ch * n_held * row, held + (ch + 1) * n_held * row, d);
    std::copy(fresh + ch * k * row, fresh + (ch + 1) * k * row, d + n_held * row);
  }
}

// tail (c x keep x width) = the last keep of src's rows (c x rows x width).
void keep_rows(const float* src, int32_t rows, int32_t keep, int32_t c, int32_t width, float* tail) {
  for (int32_t ch = 0; ch < c; ++ch) {
    const float* s = src + (int64_t(ch) * rows + rows - keep) * width;
    std::copy(s, s + int64_t(keep) * width, tail + int64_t(ch) * keep * width);
  }
}

}  // namespace

bool TeacherSteps::init(const TeacherWeights& w, KernelImpl impl) {
  w_ = &w;
  impl_ = impl;
  int64_t rows = 0, held = 0, scratch = 0;
  int32_t k = kStepFrames, width = kMel;
  try {
    for (int32_t i = 0; i < kConvLayers; ++i) {  // the most rows each stage can see in one step
      const ConvSpec& s = kConvSpecs[i];
      Layer& l = layers_[i];
      Conv2dParams p = conv_params(w, i, s.kh - 1 + k, width);
      l.width = width;
      l.out_width = conv2d_out_w(p);
      l.in_tail.assign(size_t(s.c_in) * (s.kh - 1) * width, 0.0f);
      held = std::max(held, int64_t(s.c_in) * p.h * width);
      scratch = std::max(scratch, conv2d_scratch_floats(p));
      rows = std::max(rows, int64_t(s.c_out) * k * l.out_width);
      width = l.out_width;
      if (s.pool_h) {
        l.pool_tail.assign(size_t(s.c_out) * (s.pool_h - 1) * width, 0.0f);
        held = std::max(held, int64_t(s.c_out) * (s.pool_h - 1 + k) * width);
        k = (s.pool_h - 1 + k) / s.pool_h;
        width /= s.pool_w;
      }
    }
    rows_.assign(size_t(rows), 0.0f);
    held_.assign(size_t(held), 0.0f);
    scratch_.assign(size_t(scratch), 0.0f);
  } catch (const std::bad_alloc&) {
    return false;
  }
  return impl == KernelImpl::reference || packed_.init(w);
}

void TeacherSteps::reset() {
  for (Layer& l : layers_) l.in_rows = l.pool_rows = 0;
}

// rows_ (c_in x k x width) -> rows_ (c_out x k' x out_width), the layer's convolution over its held and new rows.
int32_t TeacherSteps::conv_rows(int32_t i, int32_t k) {
  const ConvSpec& s = kConvSpecs[i];
  Layer& l = layers_[i];
  const int32_t n = l.in_rows + k;
  join_rows(l.in_tail.data(), l.in_rows, rows_.data(), k, s.c_in, l.width, held_.data());
  const int32_t keep = std::min(n, s.kh - 1);
  if (n < s.kh) {  // not enough rows for one output yet
    keep_rows(held_.data(), n, keep, s.c_in, l.width, l.in_tail.data());
    l.in_rows = keep;
    return 0;
  }
  Conv2dParams p = conv_params(*w_, i, n, l.width);
  p.x = held_.data();
  p.y = rows_.data();
  conv_apply(impl_, p, ConvEpilogue{i + 1 < kConvLayers, w_->leaky_alpha, w_->max_floor}, packed_.layer(i),
             scratch_.data());
  keep_rows(held_.data(), n, keep, s.c_in, l.width, l.in_tail.data());
  l.in_rows = keep;
  return conv2d_out_h(p);
}

// rows_ (c_out x k x out_width) -> rows_, max-pooled with the row held from the last step, if any.
int32_t TeacherSteps::pool_rows(int32_t i, int32_t k) {
  const ConvSpec& s = kConvSpecs[i];
  Layer& l = layers_[i];
  const int32_t n = l.pool_rows + k, used = n / s.pool_h * s.pool_h;
  join_rows(l.pool_tail.data(), l.pool_rows, rows_.data(), k, s.c_out, l.out_width, held_.data());
  if (used > 0) {
    pool_apply(impl_, MaxPoolParams{held_.data(), s.c_out, n, l.out_width, s.pool_h, s.pool_w, s.pool_h, s.pool_w,
                                    rows_.data()});
  }
  keep_rows(held_.data(), n, n - used, s.c_out, l.out_width, l.pool_tail.data());
  l.pool_rows = n - used;
  return used / s.pool_h;
}

bool TeacherSteps::push(const float* frames, float* out) {
  std::copy(frames, frames + kStepFrames * kMel, rows_.data());  // (1 x 8 x 32)
  int32_t k = kStepFrames;
  for (int32_t i = 0; i < kConvLayers && k > 0; ++i) {
    k = conv_rows(i, k);
    if (k > 0 && kConvSpecs[i].pool_h) k = pool_rows(i, k);
  }
  // The last layer's rows are windows: one each step once the first is whole (its reach is 76 frames, its
  // stride 8), so k is 0 or 1 here.
  if (k != 1) return false;
  std::copy(rows_.data(), rows_.data() + kEmbedding, out);  // (96 x 1 x 1)
  return true;
}

}  // namespace mega::teacher
