// SPDX-License-Identifier: Apache-2.0
// Whether, and how, a model's activations fit float16 storage
// (EngineOptions::fp16).
//
// With float16 storage the CUDA backend keeps the attention output, o * r and
// the h_proj / FFN outputs in float32 (gating.cuh), and the rest in __half,
// whose largest value is 65504. The residual stream (x, xn, the FFN hidden
// layer, v_proj's raw output) is stored divided by a power of two,
// Dims::x_scale; the other float16 tensors (the EMA output, v, the gate's u, z,
// r, hx, q, k, the attention scores and weights) are stored as they are.
//
// Both depend on the weights and the input, so they are measured: the
// largest magnitude of every tensor float16 would hold, over a calibration
// clip (the model's self-test clip, or a synthetic one of the same kind when
// the file has none). The converter measures them once and stores them in the
// model file (schema 5, Model.fp16_range; tools/mega_kws_tools/convert/fp16_peaks.py),
// so engine creation only reads them. For older files the backend's own
// forward pass (forward.h) runs in float32 on the host (host_emulation.h) over
// the clip instead, which costs seconds on the base model. x_scale is the
// smallest power of two (up to kFp16MaxScale) that brings the residual
// stream's peak within kFp16Max / kFp16Headroom; a model whose other tensors
// exceed that, or whose residual stream needs more than kFp16MaxScale, is
// refused at engine creation with the tensor, its layer and its peak in the
// message, instead of running to zeroed chunks. Input louder than the clip can
// still overflow at run time; those chunks are zeroed and counted, as on the
// CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "mega/mega.hpp"

namespace mega::gpu {

// The largest finite float16.
constexpr float kFp16Max = 65504.0f;
// Peaks on the calibration clip must stay within kFp16Max / kFp16Headroom.
constexpr float kFp16Headroom = 2.0f;
// Larger scales would push ordinary residual values (order 1) towards
// float16's subnormals (below 6.1e-5), where it loses precision.
constexpr float kFp16MaxScale = 1024.0f;

// Peaks over the calibration clip, in float32, by the host pass (whatever the
// file stores): the residual stream's (before any scaling) and the other
// float16 tensors'. Allocates host memory (may throw std::bad_alloc).
Fp16Peaks fp16_range(const Model& model);

// How many times fp16_range has run in this process: engine creation with a
// file that stores its peaks leaves it unchanged (the tests' observable).
int64_t fp16_range_passes();

// ok and *x_scale for float16 storage, or unsupported_model with the reason
// in error: from the peaks the file stores, or from fp16_range when it has
// none.
Status fp16_x_scale(const Model& model, float* x_scale, char* error, size_t error_size);

// The same decision from given peaks (measured on the clip named in the
// message: "self-test" or "calibration").
Status fp16_x_scale_from(const Fp16Peaks& peaks, const char* clip, float* x_scale, char* error,
                         size_t error_size);

}  // namespace mega::gpu
