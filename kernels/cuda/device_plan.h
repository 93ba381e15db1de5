// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's device setup, shared by the step (device_step.cpp)
// and the step-by-step ops of the tests (device_ops.cpp): the launcher that
// runs forward.h's steps as kernels and cuBLAS calls on a stream (CudaOps),
// and one model's memory, weights, stream and cuBLAS on one device
// (DevicePlan). Internal to kernels/cuda.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <memory>
#include <new>
#include <string>

#include "cuda_check.h"
#include "device_step.h"
#include "forward.h"

namespace mega::gpu {

template <>
struct StorageOf<__half> {
  static __half from(float v) { return __float2half_rn(v); }
  static float to(__half v) { return __half2float(v); }
};

template <typename T>
struct BlasType;
template <>
struct BlasType<float> {
  static constexpr cudaDataType_t value = CUDA_R_32F;
};
template <>
struct BlasType<__half> {
  static constexpr cudaDataType_t value = CUDA_R_16F;
};

// Makes `device` current for a scope and gives the caller's thread its own
// device back afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      cudaGetLastError();
      prev_ = -1;
    }
    ok_ = prev_ == device || cudaSetDevice(device) == cudaSuccess;
  }
  ~DeviceGuard() {
    if (prev_ >= 0 && cudaSetDevice(prev_) != cudaSuccess) cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const { return ok_; }

 private:
  int prev_ = -1;
  bool ok_ = false;
};

// A kernel launcher's int result as a checked CUDA call.
#define MEGA_LAUNCH(call) CUDA_CHECK(static_cast<cudaError_t>(call))

// forward.h's Ops on a stream: kernels and cuBLAS (float32 accumulation in
// every GEMM, also for float16 storage; never TF32).
template <typename T>
class CudaOps {
 public:
  CudaOps(cudaStream_t stream, cublasHandle_t blas) : s_(stream), blas_(blas) {}

  Status gemm(const GemmDesc& g) {
    const float zero = 0.0f;
    const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cudaDataType_t t = g.ab_f32 ? CUDA_R_32F : BlasType<T>::value;
    const cudaDataType_t tc = g.c_f32 ? CUDA_R_32F : BlasType<T>::value;
    if (g.batch == 1) {
      CUBLAS_CHECK(cublasGemmEx(blas_, ta, CUBLAS_OP_N, g.m, g.n, g.k, &g.alpha, g.a, t, int(g.lda), g.b, t,
                                int(g.ldb), &zero, g.c, tc, int(g.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
      CUBLAS_CHECK(cublasGemmStridedBatchedEx(blas_, ta, CUBLAS_OP_N, g.m, g.n, g.k, &g.alpha, g.a, t, int(g.lda),
                                              g.stride_a, g.b, t, int(g.ldb), g.stride_b, &zero, g.c, tc,
                                              int(g.ldc), g.stride_c, g.batch, CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT));
    }
    return Status::ok;
  }
  Status embed(const EmbedParams<T>& p) {
    MEGA_LAUNCH(launch_embed(p, s_));
    return Status::ok;
  }
  Status norm(const NormParams<T>& p) {
    MEGA_LAUNCH(launch_norm(p, s_));
    return Status::ok;
  }
  Status bias_act(const BiasActParams<T>& p) {
    MEGA_LAUNCH(launch_bias_act(p, s_));
    return Status::ok;
  }
  Status split(const SplitParams<T>& p) {
    MEGA_LAUNCH(launch_split(p, s_));
    return Status::ok;
  }
  Status out_gate(const OutGateParams<T>& p) {
    MEGA_LAUNCH(launch_out_gate(p, s_));
    return Status::ok;
  }
  Status residual(const ResidualParams<T>& p) {
    MEGA_LAUNCH(launch_residual(p, s_));
    return Status::ok;
  }
  Status add_residual(const AddResidualParams<T>& p) {
    MEGA_LAUNCH(launch_add_residual(p, s_));
    return Status::ok;
  }
  Status scores(const ScoreParams<T>& p) {
    MEGA_LAUNCH(launch_scores(p, s_));
    return Status::ok;
  }
  Status softmax(const ScoreParams<T>& p) {
    MEGA_LAUNCH(launch_softmax(p, s_));
    return Status::ok;
  }
  Status ema(const EmaParams<T>& p) {
    MEGA_LAUNCH(launch_ema(p, s_));
    return Status::ok;
  }
  Status pool(const PoolParams<T>& p) {
    MEGA_LAUNCH(launch_pool(p, s_));
    return Status::ok;
  }
  Status head(const HeadParams& p) {
    MEGA_LAUNCH(launch_head(p, s_));
    return Status::ok;
  }
  Status teacher_mel(const TeacherMelParams& p) {
    MEGA_LAUNCH(launch_teacher_mel(p, s_));
    return Status::ok;
  }
  Status teacher_floor(const TeacherFloorParams& p) {
    MEGA_LAUNCH(launch_teacher_floor(p, s_));
    return Status::ok;
  }
  Status teacher_conv(const TeacherConvParams& p) {
    MEGA_LAUNCH(launch_teacher_conv(p, s_));
    return Status::ok;
  }
  Status teacher_pool(const TeacherPoolParams& p) {
    MEGA_LAUNCH(launch_teacher_pool(p, s_));
    return Status::ok;
  }
  Status teacher_project(const TeacherProjectParams<T>& p) {
    MEGA_LAUNCH(launch_teacher_project(p, s_));
    return Status::ok;
  }

 private:
  cudaStream_t s_;
  cublasHandle_t blas_;
};

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// One model on one device, sized for cap.n_streams streams: the memory plan's
// buffers (plan.h) and the packed weights in device memory, the non-blocking
// stream every upload and step goes on, and cuBLAS on that stream. The
// step and the step-by-step ops (device_ops.h) are both built on it, so
// the tests' ops run on exactly the device setup the engines do.
template <typename T>
struct DevicePlan {
  Dims dm;
  Capacity cap;
  int device = 0;
  bool integrated = false;  // host memory is device memory (Jetson): mapped pinned memory
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  void* dev = nullptr;  // the buffers
  size_t dev_bytes = 0;
  void* weights = nullptr;
  size_t weight_bytes = 0;
  Buffers<T> bf;
  WeightsDev w;

  DevicePlan() = default;
  DevicePlan(const DevicePlan&) = delete;
  DevicePlan& operator=(const DevicePlan&) = delete;
  ~DevicePlan() { release(); }

  // Failures other than a CUDA call's (model, device, sizes) are described in error.
  Status init(const Model& model, const DeviceOptions& o, char* error, size_t error_size);
  CudaOps<T> launcher() const { return CudaOps<T>(stream, blas); }

 private:
  void release();
};

extern template struct DevicePlan<float>;
extern template struct DevicePlan<__half>;

// Impl<__half> (o.fp16) or Impl<float>, initialized, or null and why not.
template <typename Base, template <typename> class Impl>
std::unique_ptr<Base> make_initialized(std::shared_ptr<const Model> model, const DeviceOptions& o,
                                       std::string* error, Status* status) {
  auto fail = [&](Status s, const std::string& msg) -> std::unique_ptr<Base> {
    if (error) *error = msg;
    if (status) *status = s;
    return nullptr;
  };
  if (!model) return fail(Status::invalid_argument, "no model");
  if (o.n_streams < 1 || o.max_in_flight < 1 || o.max_clip_samples < 0 || o.attention_bytes < 1) {
    return fail(Status::invalid_argument, "bad CUDA step options");
  }
  auto init = [&](auto* s) -> std::unique_ptr<Base> {
    std::unique_ptr<Base> owner(s);
    if (!s) return fail(Status::out_of_memory, "out of memory");
    Status st = Status::out_of_memory;
    try {  // host-side vectors sized here; nothing may escape the API
      st = s->init(std::move(model), o);
    } catch (const std::bad_alloc&) {
      return fail(Status::out_of_memory, "CUDA backend: out of host memory");
    }
    if (st != Status::ok) {
      const std::string msg = s->last_error()[0] ? s->last_error() : last_device_error();
      return fail(st, std::string("CUDA backend: ") + msg);
    }
    if (status) *status = Status::ok;
    return owner;
  };
  if (o.fp16) return init(new (std::nothrow) Impl<__half>());
  return init(new (std::nothrow) Impl<float>());
}

}  // namespace mega::gpu
