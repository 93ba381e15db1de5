// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's steps (runtime/src/core/ops.h) one at a time on a device, for the
// backend-comparison harness (tests/kernels/test_backend_ops.cpp): forward.h's GpuOps
// over the kernels and cuBLAS, on the device setup a DeviceStep makes
// (weights, memory plan, stream, cuBLAS: DevicePlan, device_plan.h),
// without the step's staging slots and graphs. The harness gives every
// backend the same inputs and reads their outputs, so the span's samples and
// chunk indices and the activations are copied between host and device
// memory here.
//
// Steps are launched on the ops' own stream with their device current (the
// caller's is given back); a copy waits for the steps before it, so a step's
// output can be read as soon as the step returns. Test use: nothing here is
// tuned, every copy synchronizes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "device_step.h"
#include "ops.h"

namespace mega::gpu {

class DeviceOps : public Ops {
 public:
  // Sized as a step of opts.n_streams streams (and clips of
  // opts.max_clip_samples for bidirectional models), float16 storage with
  // opts.fp16; max_in_flight and graphs are not used. Null on failure, with
  // *status and *error (either may be null) saying why (Status::no_device
  // without a usable device).
  static std::unique_ptr<DeviceOps> create(std::shared_ptr<const Model> model, const DeviceOptions& opts,
                                           std::string* error, Status* status);

  // *device = host over device copies of host's samples and chunk indices: a
  // step's (streaming) or a clip's, within the sizes the ops were made for.
  // The copies stay until the next upload_span().
  virtual Status upload_span(const Span& host, Span* device) = 0;
  // rows x D values of activation a from or to host memory (float; float16
  // storage is converted).
  virtual Status upload(Act a, const float* src, int64_t rows) = 0;
  virtual Status download(Act a, float* dst, int64_t rows) = 0;
  // The last failure: a CUDA call with file:line, or a bad argument ("" if none).
  virtual const char* last_error() const = 0;
};

}  // namespace mega::gpu
