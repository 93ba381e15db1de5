// SPDX-License-Identifier: Apache-2.0
// Hand-vectorized kernels for the hot loops of the optimized CPU path: the
// fused chunk attention, the projections and the causal EMA. They are written once over the
// vector width (simd_kernels.inc) and compiled for AVX-512, for AVX2 + FMA and
// for plain 128-bit vectors (SSE2 / NEON); the best set this CPU runs is
// picked once at run time. Each kernel's scalar reference twin lives in
// kernels.h (attention_ref, linear_ref, ema_causal_ref) and tests/kernels/cpu/test_kernels.cpp holds
// every compiled set to it.
#pragma once

#include <cstdint>

#include "cpu/kernels.h"

namespace mega::cpu {

enum class SimdLevel : int32_t { portable = 0, avx2 = 1, avx512 = 2 };

struct SimdKernels {
  SimdLevel level = SimdLevel::portable;
  const char* name = "";
  // The kernels below run a range of work units, so that threads can take
  // disjoint ones, each with its own scratch: query blocks of query_block
  // queries for the attention, groups of ema_group channels for the EMA.
  int32_t query_block = 0;
  int32_t ema_group = 0;
  // Fused laplace or relu2 attention for the work units [begin, end) of
  // attention_units(): the scores of one query block are computed, passed
  // through the attention function and multiplied into v while they are in
  // cache; the (c x c) matrix is never written. scratch:
  // attention_scratch_floats() floats. Softmax is not fused (attention_blas).
  void (*attention)(const AttentionParams& p, int32_t begin, int32_t end, float* scratch) = nullptr;
  // y = x w^T + b for projections with packed weights (LinearParams::packed).
  void (*linear)(const LinearParams& p) = nullptr;
  // Causal truncated EMA (the exact recurrence, in double) vectorized across
  // channels, for the channel groups [begin, end). scratch:
  // ema_scratch_doubles() doubles. Leaves y, h and the ring (those groups'
  // channels of each) as ema_causal_ref would.
  void (*ema_causal)(const EmaParams& p, int32_t begin, int32_t end, double* scratch) = nullptr;
};

// The fastest set this CPU supports (chosen on first use).
const SimdKernels& simd_kernels();
// Every set this CPU supports, fastest first; returns how many (<= 3).
int32_t simd_kernel_sets(const SimdKernels** out, int32_t max);

// The fused attention's work units for a chunk of c tokens: one per query
// block, except that an odd number of blocks (more than one) has its last
// block split into two halves of the keys (weights without normalization add
// up over keys), so that two threads get equal shares. The split depends on c
// and the set only, never on the thread count, so the results do not either.
// After all units have run, attention_finish adds the halves into p.o.
int32_t attention_units(const SimdKernels& k, int32_t c);
void attention_finish(const SimdKernels& k, const AttentionParams& p);
// Every unit in turn, then attention_finish: the whole chunk on one thread.
void attention_all(const SimdKernels& k, const AttentionParams& p, float* scratch);

// Scratch sizes, valid for every set.
int64_t attention_partial_floats(int32_t hdim);
int64_t attention_scratch_floats(int32_t c, int32_t z);
int64_t ema_scratch_doubles(int32_t n_dim);

}  // namespace mega::cpu
