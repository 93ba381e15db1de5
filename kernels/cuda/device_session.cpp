// The CUDA backend's session (device_session.h): memory, weights, graphs,
// staging slots; the forward pass itself is forward.h over CudaOps. Also the
// steps one at a time on the same device setup, for tests (device_ops.h).
#include "device_session.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "cuda_check.h"
#include "device_ops.h"
#include "forward.h"
#include "stager.h"

namespace mega::gpu {

template <>
struct StorageOf<__half> {
  static __half from(float v) { return __float2half_rn(v); }
  static float to(__half v) { return __half2float(v); }
};

namespace {

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
    const cudaDataType_t t = BlasType<T>::value;
    if (g.batch == 1) {
      CUBLAS_CHECK(cublasGemmEx(blas_, ta, CUBLAS_OP_N, g.m, g.n, g.k, &g.alpha, g.a, t, int(g.lda), g.b, t,
                                int(g.ldb), &zero, g.c, t, int(g.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
      CUBLAS_CHECK(cublasGemmStridedBatchedEx(blas_, ta, CUBLAS_OP_N, g.m, g.n, g.k, &g.alpha, g.a, t, int(g.lda),
                                              g.stride_a, g.b, t, int(g.ldb), g.stride_b, &zero, g.c, t,
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

 private:
  cudaStream_t s_;
  cublasHandle_t blas_;
};

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// One model on one device, sized for cap.n_streams streams: the memory plan's
// buffers (plan.h) and the packed weights in device memory, the non-blocking
// stream every upload and step goes on, and cuBLAS on that stream. The
// session and the step-by-step ops (device_ops.h) are both built on it, so
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

// One staging slot: pinned input and output of a step, their device views
// (mapped memory on integrated GPUs), its graph and completion event.
struct Slot {
  int64_t* index = nullptr;  // (n_streams) chunk indices
  float* samples = nullptr;  // (n_streams, ctx + chunk_samples)
  float* logits = nullptr;   // (n_streams, n_classes)
  const int64_t* d_index = nullptr;
  const float* d_samples = nullptr;
  float* d_logits = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t done = nullptr;
  int64_t step = 0;
};

template <typename T>
class Session final : public DeviceSession {
 public:
  ~Session() override { release(); }

  Status init(std::shared_ptr<const Model> model, const DeviceOptions& o);

  Status submit(const float* samples) override;
  Status poll(StepResult* out, bool* ready) override;
  Status wait(StepResult* out) override;
  Status drain() override;
  Status reset(int32_t b) override;
  Status classify_clip(const float* samples, int64_t n, float* logits) override;
  StreamStats stats(int32_t b) const override {
    return b >= 0 && b < plan_.cap.n_streams ? stats_[size_t(b)] : StreamStats();
  }

  const Model& model() const override { return *model_; }
  int32_t n_streams() const override { return plan_.cap.n_streams; }
  int32_t queued() const override { return queued_; }
  bool integrated() const override { return plan_.integrated; }
  bool uses_graphs() const override { return o_.graphs && !plan_.dm.bidir; }
  int64_t device_bytes() const override { return int64_t(plan_.dev_bytes + plan_.weight_bytes); }
  int64_t host_bytes() const override {
    return int64_t(pinned_bytes_ + sizeof(float) * (tails_.size() + chunk_.size()) +
                   sizeof(int64_t) * next_.size() + sizeof(Slot) * slots_.size());
  }
  const char* last_error() const override { return error_; }

 private:
  // Records the failure text; device errors leave the session unusable.
  Status note(Status s) {
    if (s == Status::ok) return s;
    std::snprintf(error_, sizeof error_, "%s", last_device_error());
    if (s == Status::device_error) broken_ = true;
    return s;
  }
  Status enqueue_step(const Slot& s);
  Status capture(Slot* s);
  Status launch(Slot* s);
  Status collect(Slot& s, StepResult* out);
  Status clear_state(int32_t b);
  Status finish_clip(const int64_t* chunk_index, int64_t n_tok, float* logits);
  void release();

  std::shared_ptr<const Model> model_;
  DeviceOptions o_;
  DevicePlan<T> plan_;
  bool broken_ = false;

  uint8_t* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  std::vector<Slot> slots_;
  float* clip_ = nullptr;          // pinned: a clip's staged samples
  const float* d_clip_ = nullptr;  // its device view (mapped), or plan_.bf.clip
  float* clip_logits_ = nullptr;   // pinned
  float* d_clip_logits_ = nullptr;

  std::vector<float> tails_, chunk_;
  std::vector<int64_t> next_;
  std::vector<StreamStats> stats_;
  bool in_clip_ = false;  // classify_clip() streams a clip through the slots
  Stager stager_;
  int32_t head_ = 0, queued_ = 0;
  int64_t step_ = 0;
  char error_[512] = "";
};

template <typename T>
Status Session<T>::init(std::shared_ptr<const Model> model, const DeviceOptions& o) {
  model_ = std::move(model);
  o_ = o;
  MEGA_TRY(plan_.init(*model_, o, error_, sizeof error_));
  DeviceGuard guard(plan_.device);
  if (!guard.ok()) CUDA_CHECK(cudaSetDevice(plan_.device));
  const Dims& dm = plan_.dm;

  // pinned host memory: the slots, then a clip's samples and logits
  const int32_t R = o.max_in_flight, B = o.n_streams;
  const int64_t stride = step_stride(dm);
  const int64_t clip_floats = plan_.cap.clip_tokens > 0 ? dm.ctx + plan_.cap.clip_tokens * dm.patch_s : 0;
  auto layout = [&](Carver& c) {
    for (Slot& s : slots_) {
      s.index = c.take<int64_t>(B);
      s.samples = c.take<float>(int64_t(B) * stride);
      s.logits = c.take<float>(int64_t(B) * dm.n_classes);
    }
    clip_ = c.take<float>(clip_floats);
    clip_logits_ = c.take<float>(dm.n_classes);
  };
  slots_.assign(size_t(R), Slot());
  Carver pin_size(0);
  layout(pin_size);
  pinned_bytes_ = pin_size.size();
  void* pinned = nullptr;
  CUDA_CHECK(cudaHostAlloc(&pinned, pinned_bytes_, plan_.integrated ? cudaHostAllocMapped : cudaHostAllocDefault));
  pinned_ = static_cast<uint8_t*>(pinned);
  std::memset(pinned_, 0, pinned_bytes_);
  Carver pin(reinterpret_cast<uintptr_t>(pinned_));
  layout(pin);
  uint8_t* dview = pinned_;
  if (plan_.integrated) {
    void* d = nullptr;
    CUDA_CHECK(cudaHostGetDevicePointer(&d, pinned_, 0));
    dview = static_cast<uint8_t*>(d);
  }
  auto view = [&](auto* host) {  // the device address of pinned host memory
    return reinterpret_cast<decltype(host)>(dview + (reinterpret_cast<uint8_t*>(host) - pinned_));
  };
  for (Slot& s : slots_) {
    s.d_index = plan_.integrated ? view(s.index) : plan_.bf.input_index;
    s.d_samples = plan_.integrated ? view(s.samples) : plan_.bf.input;
    s.d_logits = plan_.integrated ? view(s.logits) : plan_.bf.logits;
  }
  d_clip_ = plan_.integrated ? view(clip_) : plan_.bf.clip;
  d_clip_logits_ = plan_.integrated ? view(clip_logits_) : plan_.bf.logits;

  // host bookkeeping
  tails_.assign(size_t(int64_t(B) * dm.ctx), 0.0f);
  next_.assign(size_t(B), 0);
  stats_.assign(size_t(B), StreamStats());
  chunk_.assign(size_t(dm.chunk_samples), 0.0f);
  stager_.init(model_->info(), dm, B, tails_.data(), next_.data());

  for (Slot& s : slots_) CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));

  if (!dm.bidir) {
    // one eager step first (loads the modules, lets cuBLAS settle; the state it
    // leaves is never read, as every stream's next step is its chunk 0), then
    // one graph per slot
    MEGA_TRY(enqueue_step(slots_[0]));
    CUDA_CHECK(cudaStreamSynchronize(plan_.stream));
    if (o.graphs) {
      for (Slot& s : slots_) {
        if (capture(&s) == Status::ok) continue;
        // a driver that cannot capture this step: launch directly instead
        // (uses_graphs() tells; the CUDA tests require graphs)
        std::snprintf(error_, sizeof error_, "graph capture failed, using direct launches: %s", last_device_error());
        cudaGetLastError();
        for (Slot& t : slots_) {
          if (t.exec) cudaGraphExecDestroy(t.exec);
          t.exec = nullptr;
        }
        o_.graphs = false;
        break;
      }
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(plan_.stream));
  return Status::ok;
}

// The session's own resources; the plan frees the device memory, the stream
// and cuBLAS afterwards (it is destroyed after this runs).
template <typename T>
void Session<T>::release() {
  if (!plan_.stream && !pinned_) return;
  DeviceGuard guard(plan_.device);
  if (plan_.stream) cudaStreamSynchronize(plan_.stream);
  for (Slot& s : slots_) {
    if (s.exec) cudaGraphExecDestroy(s.exec);
    if (s.done) cudaEventDestroy(s.done);
  }
  if (pinned_) cudaFreeHost(pinned_);
  cudaGetLastError();  // nothing of this may leak into the caller's next check
}

// Everything of one step on the stream: the input copies (discrete GPUs),
// the forward pass, the window logits and their copy back.
template <typename T>
Status Session<T>::enqueue_step(const Slot& s) {
  CudaOps<T> ops = plan_.launcher();
  const Dims& dm = plan_.dm;
  const int32_t B = plan_.cap.n_streams;
  if (!plan_.integrated) {
    CUDA_CHECK(cudaMemcpyAsync(plan_.bf.input_index, s.index, sizeof(int64_t) * size_t(B), cudaMemcpyHostToDevice,
                               plan_.stream));
    CUDA_CHECK(cudaMemcpyAsync(plan_.bf.input, s.samples, sizeof(float) * size_t(int64_t(B) * step_stride(dm)),
                               cudaMemcpyHostToDevice, plan_.stream));
  }
  Span sp;
  sp.n_streams = B;
  sp.n_tok = dm.c;
  sp.streaming = true;
  sp.samples = s.d_samples;
  sp.sample_stride = step_stride(dm);
  sp.chunk_index = s.d_index;
  MEGA_TRY(encode(ops, *model_, dm, plan_.cap, plan_.bf, plan_.w, sp));
  MEGA_TRY(head_forward(ops, dm, plan_.bf, plan_.w, B, s.d_index, true, dm.c, s.d_logits));
  if (!plan_.integrated) {
    CUDA_CHECK(cudaMemcpyAsync(s.logits, plan_.bf.logits, sizeof(float) * size_t(int64_t(B) * dm.n_classes),
                               cudaMemcpyDeviceToHost, plan_.stream));
  }
  return Status::ok;
}

template <typename T>
Status Session<T>::capture(Slot* s) {
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(plan_.stream, cudaStreamCaptureModeThreadLocal));
  const Status st = enqueue_step(*s);
  const cudaError_t end = cudaStreamEndCapture(plan_.stream, &graph);
  if (st != Status::ok) {
    if (graph) cudaGraphDestroy(graph);
    return st;
  }
  CUDA_CHECK(end);
  const cudaError_t made = cudaGraphInstantiate(&s->exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(made);
  CUDA_CHECK(cudaGraphUpload(s->exec, plan_.stream));
  return Status::ok;
}

template <typename T>
Status Session<T>::launch(Slot* s) {
  if (o_.graphs) {
    CUDA_CHECK(cudaGraphLaunch(s->exec, plan_.stream));
  } else {
    MEGA_TRY(enqueue_step(*s));
  }
  CUDA_CHECK(cudaEventRecord(s->done, plan_.stream));
  return Status::ok;
}

template <typename T>
Status Session<T>::submit(const float* samples) {
  if (!samples) return Status::invalid_argument;
  if (plan_.dm.bidir) return Status::not_streamable;
  if (broken_) return Status::device_error;
  if (queued_ == int32_t(slots_.size())) return Status::busy;
  DeviceGuard guard(plan_.device);
  if (!guard.ok()) return note(report_cuda(cudaGetLastError(), "cudaSetDevice", __FILE__, __LINE__));
  Slot& s = slots_[size_t(head_)];
  stager_.stage(samples, s.samples, s.index, stats_.data());
  const Status st = note(launch(&s));
  if (st != Status::ok) return st;
  s.step = step_++;
  head_ = (head_ + 1) % int32_t(slots_.size());
  ++queued_;
  return Status::ok;
}

template <typename T>
Status Session<T>::poll(StepResult* out, bool* ready) {
  if (!out || !ready) return Status::invalid_argument;
  *ready = false;
  if (broken_) return Status::device_error;
  if (queued_ == 0) return Status::ok;
  const int32_t R = int32_t(slots_.size());
  const Slot& s = slots_[size_t((head_ - queued_ + R) % R)];
  const cudaError_t e = cudaEventQuery(s.done);
  if (e == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is not an error; keep it out of later checks
    return Status::ok;
  }
  if (e != cudaSuccess) return note(report_cuda(e, "cudaEventQuery(step)", __FILE__, __LINE__));
  MEGA_TRY(collect(slots_[size_t((head_ - queued_ + R) % R)], out));
  *ready = true;
  return Status::ok;
}

template <typename T>
Status Session<T>::wait(StepResult* out) {
  if (!out) return Status::invalid_argument;
  if (broken_) return Status::device_error;
  if (queued_ == 0) return Status::invalid_argument;
  const int32_t R = int32_t(slots_.size());
  const Slot& s = slots_[size_t((head_ - queued_ + R) % R)];
  const cudaError_t e = cudaEventSynchronize(s.done);
  if (e != cudaSuccess) return note(report_cuda(e, "cudaEventSynchronize(step)", __FILE__, __LINE__));
  return collect(slots_[size_t((head_ - queued_ + R) % R)], out);
}

// A finished step's results, with non-finite logits contained per stream.
template <typename T>
Status Session<T>::collect(Slot& s, StepResult* out) {
  --queued_;
  out->step = s.step;
  out->chunk_index = s.index;
  out->logits = s.logits;
  const int32_t nc = plan_.dm.n_classes;
  if (in_clip_) return Status::ok;  // a clip's chunks: only its final logits are checked
  for (int32_t b = 0; b < plan_.cap.n_streams; ++b) {
    float* row = s.logits + int64_t(b) * nc;
    if (std::all_of(row, row + nc, [](float v) { return std::isfinite(v); })) continue;
    std::fill(row, row + nc, 0.0f);
    ++stats_[size_t(b)].n_state_resets;
    MEGA_TRY(note(clear_state(b)));
  }
  return Status::ok;
}

// Stream b's recurrent state back to silence, its position kept (the CPU
// session's contain_non_finite): patch context, EMA rings and carried states,
// pooling window and total. Ordered on the stream before its next step;
// steps already queued ran on the old state.
template <typename T>
Status Session<T>::clear_state(int32_t b) {
  stager_.clear_context(b);
  DeviceGuard guard(plan_.device);
  const Dims& dm = plan_.dm;
  const Buffers<T>& bf = plan_.bf;
  auto zero = [&](void* p, size_t bytes) { return cudaMemsetAsync(p, 0, bytes, plan_.stream); };
  for (int32_t l = 0; l < dm.n_layers; ++l) {
    if (dm.k > 0) {  // truncated: the ring of the last K inputs is the whole state
      CUDA_CHECK(zero(bf.ring_of(dm, plan_.cap, l) + int64_t(b) * dm.k * dm.d, sizeof(T) * size_t(dm.k * dm.d)));
    } else {  // untruncated: the carried h
      CUDA_CHECK(zero(bf.h_of(dm, plan_.cap, l) + int64_t(b) * dm.d * dm.n, sizeof(float) * size_t(dm.d * dm.n)));
    }
  }
  CUDA_CHECK(zero(bf.pool + int64_t(b) * dm.w * dm.d, sizeof(double) * size_t(dm.w * dm.d)));
  CUDA_CHECK(zero(bf.total + int64_t(b) * dm.d, sizeof(double) * size_t(dm.d)));
  return Status::ok;
}

template <typename T>
Status Session<T>::drain() {
  StepResult r;
  while (queued_ > 0) MEGA_TRY(wait(&r));
  return broken_ ? Status::device_error : Status::ok;
}

template <typename T>
Status Session<T>::reset(int32_t b) {
  if (b < -1 || b >= plan_.cap.n_streams) return Status::invalid_argument;
  for (int32_t i = 0; i < plan_.cap.n_streams; ++i) {
    if (b == -1 || b == i) stager_.reset(i);
  }
  return Status::ok;
}

// The head over a stream's total (since its chunk 0), synchronously.
template <typename T>
Status Session<T>::finish_clip(const int64_t* chunk_index, int64_t n_tok, float* logits) {
  CudaOps<T> ops = plan_.launcher();
  MEGA_TRY(head_forward(ops, plan_.dm, plan_.bf, plan_.w, 1, chunk_index, false, n_tok, d_clip_logits_));
  if (!plan_.integrated) {
    CUDA_CHECK(cudaMemcpyAsync(clip_logits_, plan_.bf.logits, sizeof(float) * size_t(plan_.dm.n_classes),
                               cudaMemcpyDeviceToHost, plan_.stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(plan_.stream));
  std::copy(clip_logits_, clip_logits_ + plan_.dm.n_classes, logits);
  if (!std::all_of(logits, logits + plan_.dm.n_classes, [](float v) { return std::isfinite(v); })) {
    std::fill(logits, logits + plan_.dm.n_classes, 0.0f);  // as the CPU session: zeroed and counted
    ++stats_[0].n_state_resets;
  }
  return Status::ok;
}

template <typename T>
Status Session<T>::classify_clip(const float* samples, int64_t n, float* logits) {
  if (n < 0 || (n > 0 && !samples) || !logits) return Status::invalid_argument;
  if (plan_.cap.n_streams != 1) return Status::invalid_argument;
  if (broken_) return Status::device_error;
  DeviceGuard guard(plan_.device);
  if (!guard.ok()) return note(report_cuda(cudaGetLastError(), "cudaSetDevice", __FILE__, __LINE__));
  MEGA_TRY(drain());
  const HParams& hp = model_->hparams();
  const int64_t total = hp.padded_clip_samples(n);
  if (!plan_.dm.bidir) {
    // a unidirectional clip is a stream from a fresh start, pooled over all of it
    const int64_t cs = plan_.dm.chunk_samples;
    stager_.reset(0);
    in_clip_ = true;
    auto stream_clip = [&]() -> Status {
      for (int64_t c0 = 0; c0 < total; c0 += cs) {
        for (int64_t i = 0; i < cs; ++i) chunk_[size_t(i)] = c0 + i < n ? samples[c0 + i] : 0.0f;
        if (queued_ == int32_t(slots_.size())) {
          StepResult r;
          MEGA_TRY(wait(&r));
        }
        MEGA_TRY(submit(chunk_.data()));
      }
      return drain();
    };
    const Status streamed = stream_clip();
    in_clip_ = false;
    if (streamed != Status::ok) {
      stager_.reset(0);
      return streamed;
    }
    const int32_t R = int32_t(slots_.size());
    const Slot& last = slots_[size_t((head_ - 1 + R) % R)];
    const Status st = note(finish_clip(last.d_index, plan_.dm.c, logits));
    stager_.reset(0);
    return st;
  }
  if (total / plan_.dm.patch_s > plan_.cap.clip_tokens) return Status::too_long;
  stager_.stage_clip(samples, n, total, clip_, &stats_[0]);
  auto run = [&]() -> Status {
    if (!plan_.integrated) {
      CUDA_CHECK(cudaMemcpyAsync(plan_.bf.clip, clip_, sizeof(float) * size_t(plan_.dm.ctx + total),
                                 cudaMemcpyHostToDevice, plan_.stream));
    }
    CudaOps<T> ops = plan_.launcher();
    Span sp;
    sp.n_streams = 1;
    sp.n_tok = total / plan_.dm.patch_s;
    sp.streaming = false;
    sp.samples = d_clip_;
    sp.chunk_index = plan_.bf.zero_index;
    MEGA_TRY(encode(ops, *model_, plan_.dm, plan_.cap, plan_.bf, plan_.w, sp));
    return finish_clip(plan_.bf.zero_index, sp.n_tok, logits);
  };
  return note(run());
}

// The steps of kernels/ops.h one at a time (device_ops.h): GpuOps over
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
    // where a session stages a step's samples, or a clip's
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
      for (size_t i = 0; i < n; ++i) staging_[i] = StorageOf<T>::from(src[i]);
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
      for (size_t i = 0; i < n; ++i) dst[i] = StorageOf<T>::to(staging_[i]);
    }
    return Status::ok;
  }

  const char* last_error() const override { return error_; }

 private:
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
    return fail(Status::invalid_argument, "bad CUDA session options");
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

}  // namespace

std::unique_ptr<DeviceSession> DeviceSession::create(std::shared_ptr<const Model> model, const DeviceOptions& o,
                                                     std::string* error, Status* status) {
  return make_initialized<DeviceSession, Session>(std::move(model), o, error, status);
}

std::unique_ptr<DeviceOps> DeviceOps::create(std::shared_ptr<const Model> model, const DeviceOptions& o,
                                             std::string* error, Status* status) {
  return make_initialized<DeviceOps, StepOps>(std::move(model), o, error, status);
}

bool cuda_device_present(std::string* why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = "CUDA device 0 cannot be queried";
    return false;
  }
  if (why) {
    char buf[320];
    std::snprintf(buf, sizeof buf, "%s, compute capability %d.%d%s", prop.name, prop.major, prop.minor,
                  prop.integrated ? ", integrated" : "");
    *why = buf;
  }
  return true;
}

}  // namespace mega::gpu
