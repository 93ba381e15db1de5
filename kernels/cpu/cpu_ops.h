// SPDX-License-Identifier: Apache-2.0
// The CPU backend's ops (ops.h, stream_ops.h) for one stream: its activations,
// scratch and EMA state in one block allocated at creation, the worker
// threads that share each chunk, and the choice of kernels (the scalar
// references, or the optimized twins: packed SIMD projections, the fused
// chunk attention with its split last block, the channel-group EMA).
//
// Passes are one chunk: gate_inputs .. ffn run on the chunk's C rows, split
// into row tasks across the threads (the same tasks for any thread count, so
// results are bit-identical). Unidirectional spans are one chunk; a
// bidirectional clip is one span of up to max_span_tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/elementwise.h"
#include "cpu/kernels.h"
#include "cpu/packed_weights.h"
#include "cpu/simd_kernels.h"
#include "cpu/teacher_frontend.h"
#include "stream_ops.h"
#include "cpu/worker_pool.h"

namespace mega::cpu {

class CpuOps final : public StreamOps {
 public:
  // Tokens embedded per filter step (one linear map over their windows).
  static constexpr int64_t kEmbedBlock = 32;

  CpuOps() = default;
  ~CpuOps() override;
  CpuOps(const CpuOps&) = delete;
  CpuOps& operator=(const CpuOps&) = delete;

  // optimized: SIMD/BLAS kernels (else the scalar references); n_threads as
  // EngineOptions; max_span_tokens: the longest span (C, or a bidirectional
  // clip); packed: the optimized kernels' projections (null: packed here,
  // and counted in memory_bytes()). False if memory or threads cannot be had.
  bool init(const HParams& hp, const ModelWeights& w, bool optimized, int32_t n_threads, int64_t max_span_tokens,
            std::shared_ptr<const PackedWeights> packed = nullptr);

  void clear_state() override;
  int64_t memory_bytes() const override {
    return int64_t(block_bytes_) + own_packed_bytes_ + (front_ ? front_->memory_bytes() : 0);
  }
  KernelImpl math() const { return math_; }

  void set_trace(float* trace, int64_t trace_tokens, int64_t offset) override {
    trace_ = trace;
    trace_tokens_ = trace_tokens;
    trace_offset_ = offset;
  }
  // The span's activations (rows x D), for the backend-comparison harness.
  float* activation(Act a) const { return act(a); }
  const double* span_sum() const override { return sum_; }
  void head(const double* sum, int64_t n_tok, float* out) override;

  int64_t pass_rows(const Span& span) const override { return hp_.chunk_size; }
  Status embed(const Span& span) override;
  Status norm(NormSite site, int32_t layer, Act in, Act out, int64_t r0, int64_t rows) override;
  Status ema(int32_t layer, Act in, const Span& span) override;
  Status gate_inputs(int32_t layer, Act in, int64_t r0, int64_t rows) override;
  Status attention(int32_t layer, int64_t r0, int64_t rows) override;
  Status gate_output(int32_t layer, int64_t r0, int64_t rows) override;
  Status ffn(int32_t layer, Act in, int64_t r0, int64_t rows) override;
  Status pool(const Span& span) override;
  void trace(int32_t slot, const Span& span) override;

 private:
  struct LayerState {
    double* h = nullptr;           // (D x N) EMA state (causal)
    float* ring = nullptr;         // (K x D) last K EMA inputs
    double* ref_kernel = nullptr;  // (rows x K), reference kernels only
  };
  template <typename A>
  void layout(A& a);
  float* act(Act a) const { return a == Act::x ? x_ : a == Act::xn ? xn_ : mx_; }
  void embed_windows(const float* samples, int64_t n);
  void embed_rows(const float* rows, int64_t n, float* x);
  Status embed_teacher(const Span& span);
  void seed_teacher();
  void embed_token(const float* f, float* xt);
  const NormWeights& norm_weights(NormSite site, int32_t layer) const;
  // A layer's packed projection (none with the reference kernels).
  const PackedLinear& packed(int32_t layer, PackedLinear PackedWeights::Layer::*proj) const;
  void linear(const float* in, int64_t n, const LinearWeights& w, const PackedLinear& pw, float* out) const;
  // f(t0, t1) over the row tasks of each chunk in rows [r0, r0 + rows), on all threads
  template <typename F>
  void for_rows(int64_t r0, int64_t rows, F&& f);
  template <typename P, typename S>
  void run_units(const P& params, int32_t n_units, void (*kernel)(const P&, int32_t, int32_t, S*),
                 S* const* scratch);

  HParams hp_;
  const ModelWeights* w_ = nullptr;
  std::shared_ptr<const PackedWeights> packed_;  // optimized only
  int64_t own_packed_bytes_ = 0;
  bool optimized_ = true, bidir_ = false, fused_attention_ = false;
  KernelImpl math_ = KernelImpl::optimized;
  const SimdKernels* simd_ = nullptr;
  WorkerPool workers_;
  int32_t n_threads_ = 1;
  int64_t span_tokens_ = 0;

  uint8_t* block_ = nullptr;
  size_t block_bytes_ = 0;
  std::vector<LayerState> layers_;  // sized at init, never resized
  float *x_ = nullptr, *xn_ = nullptr, *mx_ = nullptr;  // (span x D)
  float *v_ = nullptr, *base_ = nullptr, *q_ = nullptr, *k_ = nullptr;  // one pass (C rows)
  float *scores_ = nullptr, *o_ = nullptr, *hb_ = nullptr, *ffn_ = nullptr;
  double* ema_scratch_ = nullptr;                 // bidirectional fast EMA
  float* attn_scratch_[kMaxThreads] = {};       // per thread: fused attention
  float* attn_partial_ = nullptr;                 // fused attention: the split last block's halves
  double* simd_ema_scratch_[kMaxThreads] = {};  // per thread: SIMD causal EMA
  double* sum_ = nullptr;                         // (D) the span's pooled sum
  float* embed_mean_ = nullptr;                   // (D) the log power's running mean (PatchNorm), or null
  float *mel_power_ = nullptr, *mel_log_ = nullptr;  // log_mel: one token's bin powers (P), band log energies (B)
  float* embed_filt_ = nullptr;                   // (kEmbedBlock x F) filter outputs of a block of tokens
  float* embed_win_ = nullptr;                    // (kEmbedBlock x k) the block's windows as rows; teacher: (span x 96)
  // teacher_embedding: the front end (its own state: the stream's last steps)
  // and the span's samples at its scale
  std::unique_ptr<teacher::TeacherFrontEnd> front_;
  float* teacher_in_ = nullptr;
  float *head_a_ = nullptr, *head_b_ = nullptr;
  float* trace_ = nullptr;
  int64_t trace_tokens_ = 0, trace_offset_ = 0;
};

}  // namespace mega::cpu

namespace mega {

// The CPU backend's StreamOps (the optimized and the reference backends'):
// impl picks the scalar references or the optimized kernels; n_threads
// (1..kMaxThreads) share each chunk; max_span_tokens is the longest span (C,
// or a bidirectional clip); packed: the optimized kernels' projections,
// shared (null: packed for these ops alone). Null if memory or threads
// cannot be had. Everything is allocated here.
std::unique_ptr<StreamOps> create_cpu_stream_ops(const HParams& hp, const ModelWeights& w, KernelImpl impl,
                                                   int32_t n_threads, int64_t max_span_tokens,
                                                   std::shared_ptr<const cpu::PackedWeights> packed = nullptr);

}  // namespace mega
