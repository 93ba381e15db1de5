// SPDX-License-Identifier: Apache-2.0
// Host emulation of the CUDA backend: the Ops of forward.h run on the CPU,
// each kernel as a loop over the same element function its CUDA kernel calls,
// the EMA's segmented scan phase by phase, the GEMMs through column-major
// cblas_sgemm with the arguments cuBLAS gets. Float storage only. Used by the
// tests (tests/kernels/cuda/test_gpu_host.cpp) so that the host build checks everything of
// the CUDA code except its thread mapping, shuffles and the cuBLAS calls.
#pragma once

#include <cblas.h>

#include <vector>

#include "forward.h"

namespace mega::gpu {

// The EMA kernel's algorithm for one (stream, channel), thread by thread.
// n_seg_override > 0 replaces the kernel's choice of segments (tests).
template <typename T>
void ema_channel_host(const EmaParams<T>& p, int32_t b, int32_t c, int32_t n_seg_override = 0) {
  const int64_t n_ext = ema_n_ext(p), n_warm = ema_n_warm(p);
  const EmaShape shape = ema_shape(n_ext, p.n);
  const int32_t lanes = shape.lanes, n_seg = n_seg_override > 0 ? n_seg_override : shape.n_seg;
  const EmaChannel ch = ema_channel(p, b, c);
  std::vector<float> a(size_t(lanes), 0.0f), g(a), qk(a), out(a);
  for (int32_t n = 0; n < p.n; ++n) {
    const int64_t i = int64_t(p.row_offset + c) * p.n + n;
    a[size_t(n)] = p.a[i];
    g[size_t(n)] = p.g[i];
    qk[size_t(n)] = p.qk[i];
    out[size_t(n)] = p.out[i];
  }
  // phase 1: each (segment, lane) from zero
  std::vector<float> ends(size_t(n_seg * lanes));
  for (int32_t s = 0; s < n_seg; ++s) {
    const EmaRange r = ema_segment(n_ext, n_seg, s);
    const int64_t m0 = r.m0, m1 = r.m1;
    for (int32_t n = 0; n < lanes; ++n) {
      ends[size_t(s * lanes + n)] = ema_scan_range(p, ch, a[size_t(n)], g[size_t(n)], qk[size_t(n)], m0, m1, 0.0f);
    }
  }
  // phase 2: every segment's start state (before anything is written back)
  std::vector<float> starts(size_t(n_seg * lanes));
  for (int32_t s = 0; s < n_seg; ++s) {
    for (int32_t n = 0; n < lanes; ++n) {
      const float q_len = ema_decay_pow(a[size_t(n)], ema_segment_len(n_ext, n_seg));
      starts[size_t(s * lanes + n)] = ema_segment_start(q_len, ema_h_init(p, ch, n), ends.data() + n, lanes, s);
    }
  }
  // phase 3: rescan, outputs summed over the lanes
  std::vector<float> h(static_cast<size_t>(lanes));
  for (int32_t s = 0; s < n_seg; ++s) {
    const EmaRange r = ema_segment(n_ext, n_seg, s);
    const int64_t m0 = r.m0, m1 = r.m1;
    for (int32_t n = 0; n < lanes; ++n) h[size_t(n)] = starts[size_t(s * lanes + n)];
    for (int64_t m = m0; m < m1; ++m) {
      float acc = 0.0f;
      for (int32_t n = 0; n < lanes; ++n) {
        h[size_t(n)] = ema_scan_range(p, ch, a[size_t(n)], g[size_t(n)], qk[size_t(n)], m, m + 1, h[size_t(n)]);
        acc += out[size_t(n)] * h[size_t(n)];
      }
      if (m >= n_warm) ema_finish(p, b, ema_token(p, m), c, acc);
    }
    if (p.mode == EmaMode::stream && p.k == 0 && m1 == n_ext && m1 > m0) {
      for (int32_t n = 0; n < p.n; ++n) p.h[(int64_t(b) * p.d + c) * p.n + n] = h[size_t(n)];
    }
  }
  if (ema_stream_truncated(p)) {
    const int64_t kept = p.n_tok < p.k ? p.n_tok : p.k;
    for (int64_t i = 0; i < kept; ++i) ema_ring_store(p, ch, i);
  }
}

// The recurrent form (ema.cuh) for one (stream, channel), lane by lane.
template <typename T>
void ema_recur_channel_host(const EmaParams<T>& p, int32_t b, int32_t c) {
  const EmaChannel ch = ema_channel(p, b, c);
  std::vector<double> h(size_t(p.n));
  for (int32_t n = 0; n < p.n; ++n) h[size_t(n)] = ema_recur_h0(p, ch, n);
  for (int64_t t = 0; t < p.n_tok; ++t) {
    float acc = 0.0f;
    for (int32_t n = 0; n < p.n; ++n) {
      const int64_t i = int64_t(p.row_offset + c) * p.n + n;
      h[size_t(n)] = ema_recur_step(p.a[i], p.g[i], p.qk[i], h[size_t(n)], ema_recur_input(p, ch, t),
                                    ema_recur_old(p, ch, t));
      acc += float(double(p.out[i]) * h[size_t(n)]);
    }
    ema_finish(p, b, t, c, acc);
  }
  for (int32_t n = 0; n < p.n; ++n) p.hd[(int64_t(b) * p.d + c) * p.n + n] = h[size_t(n)];
  const int64_t kept = p.n_tok < p.k ? p.n_tok : p.k;
  for (int64_t i = 0; i < kept; ++i) ema_ring_store(p, ch, i);
}

class HostOps {
 public:
  template <typename P, typename F>
  static Status each(int64_t n, const P& p, F f) {
    for (int64_t i = 0; i < n; ++i) f(p, i);
    return Status::ok;
  }

  Status gemm(const GemmDesc& g) {
    for (int32_t i = 0; i < g.batch; ++i) {
      cblas_sgemm(CblasColMajor, g.trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, g.m,
                  g.n, g.k, g.alpha, static_cast<const float*>(g.a) + i * g.stride_a, int(g.lda),
                  static_cast<const float*>(g.b) + i * g.stride_b, int(g.ldb), 0.0f,
                  static_cast<float*>(g.c) + i * g.stride_c, int(g.ldc));
    }
    return Status::ok;
  }
  Status embed(const EmbedParams<float>& p) {
    MEGA_TRY(each(embed_size(p), p, embed_element<float>));
    MEGA_TRY(each(embed_column_size(p), p, embed_column<float>));
    return each(embed_mix_size(p), p, embed_mix<float>);
  }
  Status norm(const NormParams<float>& p) { return each(norm_size(p), p, norm_element<float>); }
  Status bias_act(const BiasActParams<float>& p) { return each(p.rows * p.cols, p, bias_act_element<float>); }
  Status split(const SplitParams<float>& p) { return each(p.rows * p.g.cols(), p, split_element<float>); }
  Status out_gate(const OutGateParams<float>& p) { return each(p.rows * p.g.h, p, out_gate_element<float>); }
  Status residual(const ResidualParams<float>& p) { return each(p.rows * p.g.d, p, residual_element<float>); }
  Status add_residual(const AddResidualParams<float>& p) {
    return each(p.rows * p.cols, p, add_residual_element<float>);
  }
  Status scores(const ScoreParams<float>& p) { return each(score_size(p), p, score_element<float>); }
  Status softmax(const ScoreParams<float>& p) { return each(p.n_chunks * p.c, p, softmax_row<float>); }
  Status ema(const EmaParams<float>& p) {
    for (int32_t b = 0; b < p.n_streams; ++b) {
      for (int32_t c = 0; c < p.d; ++c) {
        if (ema_recurrent(p)) {
          ema_recur_channel_host(p, b, c);
        } else {
          ema_channel_host(p, b, c);
        }
      }
    }
    return Status::ok;
  }
  Status pool(const PoolParams<float>& p) { return each(int64_t(p.n_streams) * p.d, p, pool_element<float>); }
  Status head(const HeadParams& p) {
    for (int32_t b = 0; b < p.n_streams; ++b) head_stream(p, b);
    return Status::ok;
  }
  Status teacher_mel(const TeacherMelParams& p) {
    MEGA_TRY(each(teacher_frames(p) * teacher::kBins, p, teacher_power_element));
    return each(teacher_frames(p) * teacher::kMel, p, teacher_db_element);
  }
  Status teacher_floor(const TeacherFloorParams& p) { return each(p.n_steps, p, teacher_floor_element); }
  Status teacher_conv(const TeacherConvParams& p) { return each(teacher_conv_size(p), p, teacher_conv_element); }
  Status teacher_pool(const TeacherPoolParams& p) { return each(teacher_pool_size(p), p, teacher_pool_element); }
  Status teacher_project(const TeacherProjectParams<float>& p) {
    return each(p.rows * p.d, p, teacher_project_element<float>);
  }
};

}  // namespace mega::gpu
