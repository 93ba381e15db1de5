// SPDX-License-Identifier: Apache-2.0
// DeviceOps (device_ops.h): the steps of runtime/src/core/ops.h one at a time on a
// DevicePlan of their own, for the backend-comparison harness.
#include "device_ops.h"

#include <string>
#include <type_traits>
#include <vector>

#include "device_plan.h"

namespace mega::gpu {

namespace {

// The steps of runtime/src/core/ops.h one at a time (device_ops.h): GpuOps over
// CudaOps on a plan of their own, each step under a DeviceGuard.
template <typename T>
class StepOps final : public DeviceOps {
 public:
  Status init(std::shared_ptr<const Model> model, const DeviceOptions& o) {
    MEGA_TRY(plan_.init(*model, o, error_, sizeof error_));  // the weights are copied: model may go
    launch_ = plan_.launcher();
    if (!std::is_same<T, float>::value) staging_.resize(size_t(plan_.cap.rows * plan_.dm.d));
    return Status::ok;
  }

  int64_t pass_rows(const Span& sp) const override { return ops_.pass_rows(sp); }
  Status embed(const Span& sp) override {
    return on_device([&] { return ops_.embed(sp); });
  }
  Status norm(NormSite site, int32_t layer, Act in, Act out, int64_t r0, int64_t rows) override {
    return on_device([&] { return ops_.norm(site, layer, in, out, r0, rows); });
  }
  Status ema(int32_t layer, Act in, const Span& sp) override {
    return on_device([&] { return ops_.ema(layer, in, sp); });
  }
  Status gate_inputs(int32_t layer, Act in, int64_t r0, int64_t rows) override {
    return on_device([&] { return ops_.gate_inputs(layer, in, r0, rows); });
  }
  Status attention(int32_t layer, int64_t r0, int64_t rows) override {
    return on_device([&] { return ops_.attention(layer, r0, rows); });
  }
  Status gate_output(int32_t layer, int64_t r0, int64_t rows) override {
    return on_device([&] { return ops_.gate_output(layer, r0, rows); });
  }
  Status ffn(int32_t layer, Act in, int64_t r0, int64_t rows) override {
    return on_device([&] { return ops_.ffn(layer, in, r0, rows); });
  }
  Status pool(const Span& sp) override {
    return on_device([&] { return ops_.pool(sp); });
  }

  Status upload_span(const Span& host, Span* device) override {
    const Dims& dm = plan_.dm;
    const Capacity& cap = plan_.cap;
    const int64_t per_stream = dm.ctx + host.n_tok * dm.patch_s;
    if (!device || !host.samples || !host.chunk_index || host.n_streams < 1 || host.n_streams > cap.n_streams ||
        host.n_tok < dm.c || host.n_tok % dm.c != 0 || host.rows() > cap.rows ||
        (host.n_streams > 1 && host.sample_stride < per_stream)) {
      return bad_argument("a span this device's ops were not made for");
    }
    // where a step stages its samples, or a clip's
    float* samples = host.streaming ? plan_.bf.input : plan_.bf.clip;
    const int64_t room = host.streaming ? cap.n_streams * step_stride(dm)
                                        : (cap.clip_tokens > 0 ? dm.ctx + cap.clip_tokens * dm.patch_s : 0);
    const int64_t n = int64_t(host.n_streams - 1) * host.sample_stride + per_stream;
    if (n > room) return bad_argument("the span's samples do not fit");
    MEGA_TRY(on_device([&]() -> Status {
      CUDA_CHECK(cudaMemcpyAsync(samples, host.samples, sizeof(float) * size_t(n), cudaMemcpyHostToDevice,
                                 plan_.stream));
      CUDA_CHECK(cudaMemcpyAsync(plan_.bf.input_index, host.chunk_index, sizeof(int64_t) * size_t(host.n_streams),
                                 cudaMemcpyHostToDevice, plan_.stream));
      CUDA_CHECK(cudaStreamSynchronize(plan_.stream));
      return Status::ok;
    }));
    *device = host;
    device->samples = samples;
    device->chunk_index = plan_.bf.input_index;
    return Status::ok;
  }

  Status upload(Act a, const float* src, int64_t rows) override {
    if (!src || rows < 0 || rows > plan_.cap.rows) return bad_argument("bad activation upload");
    const size_t n = size_t(rows * plan_.dm.d);
    const void* from = src;
    if (!staging_.empty()) {
      const float xs = scale_of(a);
      for (size_t i = 0; i < n; ++i) staging_[i] = StorageOf<T>::from(src[i] / xs);
      from = staging_.data();
    }
    return on_device([&]() -> Status {
      CUDA_CHECK(cudaMemcpyAsync(activation(plan_.bf, a), from, sizeof(T) * n, cudaMemcpyHostToDevice, plan_.stream));
      CUDA_CHECK(cudaStreamSynchronize(plan_.stream));
      return Status::ok;
    });
  }

  Status download(Act a, float* dst, int64_t rows) override {
    if (!dst || rows < 0 || rows > plan_.cap.rows) return bad_argument("bad activation download");
    const size_t n = size_t(rows * plan_.dm.d);
    void* to = staging_.empty() ? static_cast<void*>(dst) : staging_.data();
    MEGA_TRY(on_device([&]() -> Status {
      CUDA_CHECK(cudaMemcpyAsync(to, activation(plan_.bf, a), sizeof(T) * n, cudaMemcpyDeviceToHost, plan_.stream));
      CUDA_CHECK(cudaStreamSynchronize(plan_.stream));
      return Status::ok;
    }));
    if (!staging_.empty()) {
      const float xs = scale_of(a);
      for (size_t i = 0; i < n; ++i) dst[i] = StorageOf<T>::to(staging_[i]) * xs;
    }
    return Status::ok;
  }

  const char* last_error() const override { return error_; }

 private:
  // x and xn are stored as value / x_scale (plan.h, Dims); mx is not
  float scale_of(Act a) const { return a == Act::mx ? 1.0f : plan_.dm.x_scale; }

  template <typename F>
  Status on_device(F f) {
    DeviceGuard guard(plan_.device);
    Status s = guard.ok() ? f() : report_cuda(cudaGetLastError(), "cudaSetDevice", __FILE__, __LINE__);
    if (s != Status::ok) std::snprintf(error_, sizeof error_, "%s", last_device_error());
    return s;
  }
  Status bad_argument(const char* what) {
    std::snprintf(error_, sizeof error_, "%s", what);
    return Status::invalid_argument;
  }

  DevicePlan<T> plan_;
  CudaOps<T> launch_{nullptr, nullptr};  // plan_'s, once it is made
  GpuOps<T, CudaOps<T>> ops_{launch_, plan_.dm, plan_.cap, plan_.bf, plan_.w};
  std::vector<T> staging_;  // float16 storage: activations converted on the host
  char error_[512] = "";
};

}  // namespace

std::unique_ptr<DeviceOps> DeviceOps::create(std::shared_ptr<const Model> model, const DeviceOptions& o,
                                             std::string* error, Status* status) {
  return make_initialized<DeviceOps, StepOps>(std::move(model), o, error, status);
}

}  // namespace mega::gpu
