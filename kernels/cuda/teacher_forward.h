// SPDX-License-Identifier: Apache-2.0
// The teacher's front end over a span (GpuOps::embed for a model with
// PatchFeatures::teacher_embedding): the tokens of every stream from its
// staged block [the last 11872 samples | n_tok * 1280 new ones], as the CPU
// backend makes them (kernels/cpu/cpu_ops.cpp, embed_teacher).
//
// The block holds everything the span's tokens read: the n_tok + 9 steps of 8
// frames from its start, each floored under its own maximum, and token t's
// window is frames [8t, 8t + 76) of them. So the front end keeps no state of
// its own: the stager's context is its state, zeros at every clear (creation,
// reset, a clip, non-finite recovery), as the CPU front end is seeded with
// zeros. The embedding graph runs over each stream's frames as one image,
// whose output row t is token t's embedding (the CPU steps it row by row; the
// same sums); all streams share each layer's launch, Capacity::
// teacher_streams streams per pass. Then W e + b into the token buffer x.
#pragma once

#include "ops.h"
#include "plan.h"

namespace mega::gpu {

template <typename T, typename Launch>
Status teacher_embed(Launch& ops, const Dims& dm, const Capacity& cap, const Buffers<T>& bf, const WeightsDev& w,
                     const Span& sp) {
  namespace tg = teacher;
  const TeacherDev& tw = w.teacher;
  const int64_t n_tok = sp.n_tok, frames = teacher_span_frames(n_tok);
  if (n_tok > cap.teacher_tok) return Status::invalid_argument;  // the scratch is sized for cap.teacher_tok
  for (int32_t b0 = 0; b0 < sp.n_streams; b0 += cap.teacher_streams) {
    const int32_t n_streams = sp.n_streams - b0 < cap.teacher_streams ? sp.n_streams - b0 : cap.teacher_streams;
    TeacherMelParams mp;
    mp.samples = sp.samples + b0 * sp.sample_stride;
    mp.stream_stride = sp.sample_stride;
    mp.n_streams = n_streams;
    mp.n_frames = frames;
    mp.input_scale = tg::kInputScale;
    mp.stft_real = tw.stft_real;
    mp.stft_imag = tw.stft_imag;
    mp.mel = tw.mel;
    mp.clip_min = tw.clip_min;
    mp.power = bf.t_power;
    mp.db = bf.t_db;
    MEGA_TRY(ops.teacher_mel(mp));
    MEGA_TRY(ops.teacher_floor(TeacherFloorParams{bf.t_db, n_streams * frames / tg::kStepFrames, tw.top_db,
                                                  bf.t_frames}));
    // the layers over each stream's frames as one image: window t is frames
    // [8t, 8t + 76), the graph is unpadded in time and its pools stride 8
    // frames in all, so its output row t is token t's embedding (the same sums
    // as the window alone)
    TeacherConvParams cp;
    cp.x = bf.t_frames;
    cp.x_stride = frames * tg::kMel;
    cp.n = n_streams;
    cp.h = teacher_graph_rows(n_tok);
    cp.w = tg::kMel;
    cp.alpha = tw.leaky_alpha;
    cp.floor = tw.max_floor;
    float* act[2] = {bf.t_act, bf.t_next};
    int32_t out = 0;  // the buffer the next op writes
    for (int32_t i = 0; i < tg::kConvLayers; ++i) {
      const tg::ConvSpec& s = tg::kConvSpecs[i];
      cp.c_in = s.c_in;
      cp.weight = tw.conv_weight[i];
      cp.bias = tw.conv_bias[i];
      cp.c_out = s.c_out;
      cp.kh = s.kh;
      cp.kw = s.kw;
      cp.pad_w = s.pad_w;
      cp.epilogue = i + 1 < tg::kConvLayers;
      cp.y = act[out];
      MEGA_TRY(ops.teacher_conv(cp));
      int32_t h = teacher_conv_h(cp), width = teacher_conv_w(cp);
      if (s.pool_h) {
        MEGA_TRY(ops.teacher_pool(TeacherPoolParams{act[out], cp.n, s.c_out, h, width, s.pool_h, s.pool_w,
                                                    act[1 - out]}));
        out = 1 - out;
        h /= s.pool_h;
        width /= s.pool_w;
      }
      cp.x = act[out];  // the next layer reads this one's output, stream after stream
      cp.x_stride = int64_t(s.c_out) * h * width;
      cp.h = h;
      cp.w = width;
      out = 1 - out;
    }
    // cp.x: (streams x kEmbedding x n_tok x 1)
    TeacherProjectParams<T> pp;
    pp.e = cp.x;
    pp.n_tok = n_tok;
    pp.rows = n_streams * n_tok;
    pp.w = w.embed_w;
    pp.b = w.embed_b;
    pp.d = dm.d;
    pp.xs = dm.x_scale;
    pp.x = bf.x + b0 * n_tok * dm.d;
    MEGA_TRY(ops.teacher_project(pp));
  }
  return Status::ok;
}

}  // namespace mega::gpu
