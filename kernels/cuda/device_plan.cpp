// SPDX-License-Identifier: Apache-2.0
// DevicePlan (device_plan.h): checks the model and the device, sizes and
// allocates the memory plan, uploads the packed weights, and makes the stream
// and the cuBLAS handle; frees what it made.
#include "device_plan.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <vector>

#include "fp16_range.h"

namespace mega::gpu {

template <typename T>
Status DevicePlan<T>::init(const Model& model, const DeviceOptions& o, char* error, size_t error_size) {
  const ModelWeights& md = model_weights(model);
  const HParams& hp = model.hparams();
  dm = make_dims(hp, md);
  if (dm.n > kEmaMaxN) {
    std::snprintf(error, error_size, "the CUDA backend supports n_dim <= %d (the model has %d)", kEmaMaxN, dm.n);
    return Status::unsupported_model;
  }
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess) {  // no driver, or a driver too old for this runtime
    cudaGetLastError();
    std::snprintf(error, error_size, "no usable CUDA device (%s)", cudaGetErrorString(counted));
    return Status::no_device;
  }
  if (o.device < 0 || o.device >= count) {
    std::snprintf(error, error_size, "no CUDA device %d (%d present)", o.device, count);
    return Status::no_device;
  }
  device = o.device;
  DeviceGuard guard(device);
  if (!guard.ok()) CUDA_CHECK(cudaSetDevice(device));
  int is_integrated = 0, can_map = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&is_integrated, cudaDevAttrIntegrated, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, device));
  integrated = is_integrated != 0 && can_map != 0;
  // float16 storage: the residual stream's scale, or a refusal for a model
  // whose activations do not fit float16 (fp16_range.h)
  if (!std::is_same<T, float>::value) MEGA_TRY(fp16_x_scale(model, &dm.x_scale, error, error_size));

  // sizes
  cap.n_streams = o.n_streams;
  if (dm.bidir) {
    const int64_t clip = std::max(o.max_clip_samples, hp.window_samples());
    cap.clip_tokens = hp.padded_clip_samples(clip) / dm.patch_s;
  }
  cap.rows = std::max(int64_t(o.n_streams) * dm.c, cap.clip_tokens);
  if (cap.rows * std::max({dm.base_cols(), dm.f, dm.h}) > INT32_MAX) {  // cuBLAS dimensions are int
    std::snprintf(error, error_size, "too many streams or too long a clip for one batch (%lld tokens)",
                  static_cast<long long>(cap.rows));
    return Status::invalid_argument;
  }
  teacher_capacity(dm, &cap);
  cap.group = attention_group(cap.rows, dm.c, o.attention_bytes, int64_t(sizeof(T)));

  // device memory: buffers and state, then weights
  Carver sizing(0);
  carve_buffers(sizing, dm, cap, kWorkspaceBytes, &bf);
  dev_bytes = sizing.size();
  CUDA_CHECK(cudaMalloc(&dev, dev_bytes));
  Carver carve(reinterpret_cast<uintptr_t>(dev));
  carve_buffers(carve, dm, cap, kWorkspaceBytes, &bf);
  WeightPacker size_pk(nullptr, 0);
  pack_weights<T>(size_pk, md, dm, &w);
  weight_bytes = size_pk.size();
  CUDA_CHECK(cudaMalloc(&weights, weight_bytes));
  // Every upload and kernel goes on our non-blocking stream: a plain
  // cudaMemcpy would be ordered on the legacy default stream instead, which
  // that stream does not wait for.
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    std::vector<uint8_t> staging(weight_bytes, 0);
    WeightPacker pk(staging.data(), reinterpret_cast<uintptr_t>(weights));
    pack_weights<T>(pk, md, dm, &w);
    CUDA_CHECK(cudaMemcpyAsync(weights, staging.data(), weight_bytes, cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));  // staging is pageable and freed next
  }
  // cuBLAS (its workspace is ours, so graph capture allocates nothing)
  CUBLAS_CHECK(cublasCreate(&blas));
  CUBLAS_CHECK(cublasSetStream(blas, stream));
  CUBLAS_CHECK(cublasSetWorkspace(blas, bf.workspace, bf.workspace_bytes));
  CUDA_CHECK(cudaMemsetAsync(dev, 0, dev_bytes, stream));
  return Status::ok;
}

template <typename T>
void DevicePlan<T>::release() {
  if (!stream && !dev && !weights) return;
  DeviceGuard guard(device);
  if (stream) cudaStreamSynchronize(stream);
  if (blas) cublasDestroy(blas);
  if (stream) cudaStreamDestroy(stream);
  if (weights) cudaFree(weights);
  if (dev) cudaFree(dev);
  cudaGetLastError();  // nothing of this may leak into the caller's next check
}

template struct DevicePlan<float>;
template struct DevicePlan<__half>;

}  // namespace mega::gpu
