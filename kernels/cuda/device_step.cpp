// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's step (device_step.h): staging slots, graphs and events on
// a DevicePlan (device_plan.h); the forward pass itself is forward.h over
// CudaOps. The streams around it are the core's (runtime/src/core/stream.cpp).
#include "device_step.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>
#include <vector>

#include "device_plan.h"

namespace mega::gpu {

namespace {

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
};

template <typename T>
class Step final : public DeviceStep {
 public:
  ~Step() override { release(); }

  Status init(std::shared_ptr<const Model> model, const DeviceOptions& o);

  int32_t n_slots() const override { return int32_t(slots_.size()); }
  StepSlot slot(int32_t r) override {
    const Slot& s = slots_[size_t(r)];
    return {s.samples, s.index, s.logits};
  }
  Status launch(int32_t r) override;
  Status ready(int32_t r, bool* done) override;
  Status finish(int32_t r) override;
  Status clear_state(int32_t b) override;
  Status clip_head(int32_t r, float* logits) override;
  float* clip_samples() override { return clip_; }
  int64_t clip_tokens() const override { return plan_.cap.clip_tokens; }
  Status classify_span(int64_t n_tok, float* logits) override;

  bool uses_graphs() const override { return o_.graphs && !plan_.dm.bidir; }
  int64_t memory_bytes() const override {
    return int64_t(plan_.dev_bytes + plan_.weight_bytes + pinned_bytes_ + sizeof(Slot) * slots_.size());
  }
  const char* last_error() const override { return error_; }

 private:
  // Records the failure text; device errors leave the step unusable.
  Status note(Status s) {
    if (s == Status::ok) return s;
    std::snprintf(error_, sizeof error_, "%s", last_device_error());
    if (s == Status::device_error) broken_ = true;
    return s;
  }
  Status enqueue_step(const Slot& s);
  Status capture(Slot* s);
  void capture_all();
  Status run_step(Slot* s);
  Status clear_device_state(int32_t b);
  Status head_sync(const int64_t* chunk_index, int64_t n_tok, float* logits);
  Status run_span(int64_t n_tok, float* logits);
  void release();

  DeviceOptions o_;
  DevicePlan<T> plan_;
  std::shared_ptr<const Model> model_;
  bool broken_ = false;

  uint8_t* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  std::vector<Slot> slots_;
  float* clip_ = nullptr;          // pinned: a clip's staged samples
  const float* d_clip_ = nullptr;  // its device view (mapped), or plan_.bf.clip
  float* clip_logits_ = nullptr;   // pinned
  float* d_clip_logits_ = nullptr;
  char error_[512] = "";
};

template <typename T>
Status Step<T>::init(std::shared_ptr<const Model> model, const DeviceOptions& o) {
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

  for (Slot& s : slots_) CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));

  if (!dm.bidir) {
    // one eager step first (loads the modules, lets cuBLAS settle; the state it
    // leaves is never read, as every stream's next step is its chunk 0), then
    // one graph per slot
    MEGA_TRY(enqueue_step(slots_[0]));
    CUDA_CHECK(cudaStreamSynchronize(plan_.stream));
    if (o.graphs) capture_all();
  }
  CUDA_CHECK(cudaStreamSynchronize(plan_.stream));
  return Status::ok;
}

// The step's own resources; the plan frees the device memory, the stream
// and cuBLAS afterwards (it is destroyed after this runs).
template <typename T>
void Step<T>::release() {
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
Status Step<T>::enqueue_step(const Slot& s) {
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
Status Step<T>::capture(Slot* s) {
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

// One graph per slot; a driver that cannot capture this step launches
// directly instead (uses_graphs() tells; the CUDA tests require graphs).
template <typename T>
void Step<T>::capture_all() {
  for (Slot& s : slots_) {
    if (capture(&s) == Status::ok) continue;
    std::snprintf(error_, sizeof error_, "graph capture failed, using direct launches: %s", last_device_error());
    cudaGetLastError();
    for (Slot& t : slots_) {
      if (t.exec) cudaGraphExecDestroy(t.exec);
      t.exec = nullptr;
    }
    o_.graphs = false;
    return;
  }
}

template <typename T>
Status Step<T>::run_step(Slot* s) {
  if (o_.graphs) {
    CUDA_CHECK(cudaGraphLaunch(s->exec, plan_.stream));
  } else {
    MEGA_TRY(enqueue_step(*s));
  }
  CUDA_CHECK(cudaEventRecord(s->done, plan_.stream));
  return Status::ok;
}

template <typename T>
Status Step<T>::launch(int32_t r) {
  if (plan_.dm.bidir) return Status::not_streamable;
  if (broken_) return Status::device_error;
  DeviceGuard guard(plan_.device);
  if (!guard.ok()) return note(report_cuda(cudaGetLastError(), "cudaSetDevice", __FILE__, __LINE__));
  return note(run_step(&slots_[size_t(r)]));
}

template <typename T>
Status Step<T>::ready(int32_t r, bool* done) {
  *done = false;
  if (broken_) return Status::device_error;
  const cudaError_t e = cudaEventQuery(slots_[size_t(r)].done);
  if (e == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is not an error; keep it out of later checks
    return Status::ok;
  }
  if (e != cudaSuccess) return note(report_cuda(e, "cudaEventQuery(step)", __FILE__, __LINE__));
  *done = true;
  return Status::ok;
}

template <typename T>
Status Step<T>::finish(int32_t r) {
  if (broken_) return Status::device_error;
  const cudaError_t e = cudaEventSynchronize(slots_[size_t(r)].done);
  if (e != cudaSuccess) return note(report_cuda(e, "cudaEventSynchronize(step)", __FILE__, __LINE__));
  return Status::ok;
}

template <typename T>
Status Step<T>::clear_state(int32_t b) {
  if (broken_) return Status::device_error;
  DeviceGuard guard(plan_.device);
  return note(clear_device_state(b));
}

// Stream b's recurrent state back to silence, its position kept: EMA rings
// and carried states, pooling window and total. Ordered on the stream before
// its next step; steps already queued ran on the old state.
template <typename T>
Status Step<T>::clear_device_state(int32_t b) {
  const Dims& dm = plan_.dm;
  const Buffers<T>& bf = plan_.bf;
  auto zero = [&](void* p, size_t bytes) { return cudaMemsetAsync(p, 0, bytes, plan_.stream); };
  for (int32_t l = 0; l < dm.n_layers; ++l) {
    if (dm.k > 0) {  // truncated: the ring of the last K inputs and the recurrent EMA's h
      CUDA_CHECK(zero(bf.ring_of(dm, plan_.cap, l) + int64_t(b) * dm.k * dm.d, sizeof(T) * size_t(dm.k * dm.d)));
      CUDA_CHECK(zero(bf.hd_of(dm, plan_.cap, l) + int64_t(b) * dm.d * dm.n, sizeof(double) * size_t(dm.d * dm.n)));
    } else {  // untruncated: the carried h
      CUDA_CHECK(zero(bf.h_of(dm, plan_.cap, l) + int64_t(b) * dm.d * dm.n, sizeof(float) * size_t(dm.d * dm.n)));
    }
  }
  CUDA_CHECK(zero(bf.pool + int64_t(b) * dm.w * dm.d, sizeof(double) * size_t(dm.w * dm.d)));
  CUDA_CHECK(zero(bf.total + int64_t(b) * dm.d, sizeof(double) * size_t(dm.d)));
  if (dm.patch_norm) {  // the running mean back to its start
    CUDA_CHECK(cudaMemcpyAsync(bf.embed_mean + int64_t(b) * dm.d, plan_.w.embed_m0, sizeof(float) * size_t(dm.d),
                               cudaMemcpyDeviceToDevice, plan_.stream));
  }
  return Status::ok;
}

// The head over stream 0's total since its chunk 0, synchronously.
template <typename T>
Status Step<T>::head_sync(const int64_t* chunk_index, int64_t n_tok, float* logits) {
  CudaOps<T> ops = plan_.launcher();
  MEGA_TRY(head_forward(ops, plan_.dm, plan_.bf, plan_.w, 1, chunk_index, false, n_tok, d_clip_logits_));
  if (!plan_.integrated) {
    CUDA_CHECK(cudaMemcpyAsync(clip_logits_, plan_.bf.logits, sizeof(float) * size_t(plan_.dm.n_classes),
                               cudaMemcpyDeviceToHost, plan_.stream));
  }
  CUDA_CHECK(cudaStreamSynchronize(plan_.stream));
  std::copy(clip_logits_, clip_logits_ + plan_.dm.n_classes, logits);
  return Status::ok;
}

template <typename T>
Status Step<T>::clip_head(int32_t r, float* logits) {
  if (broken_) return Status::device_error;
  DeviceGuard guard(plan_.device);
  if (!guard.ok()) return note(report_cuda(cudaGetLastError(), "cudaSetDevice", __FILE__, __LINE__));
  return note(head_sync(slots_[size_t(r)].d_index, plan_.dm.c, logits));
}

template <typename T>
Status Step<T>::run_span(int64_t n_tok, float* logits) {
  if (!plan_.integrated) {
    CUDA_CHECK(cudaMemcpyAsync(plan_.bf.clip, clip_, sizeof(float) * size_t(plan_.dm.ctx + n_tok * plan_.dm.patch_s),
                               cudaMemcpyHostToDevice, plan_.stream));
  }
  CudaOps<T> ops = plan_.launcher();
  Span sp;
  sp.n_streams = 1;
  sp.n_tok = n_tok;
  sp.streaming = false;
  sp.samples = d_clip_;
  sp.chunk_index = plan_.bf.zero_index;
  MEGA_TRY(encode(ops, *model_, plan_.dm, plan_.cap, plan_.bf, plan_.w, sp));
  return head_sync(plan_.bf.zero_index, n_tok, logits);
}

template <typename T>
Status Step<T>::classify_span(int64_t n_tok, float* logits) {
  if (broken_) return Status::device_error;
  DeviceGuard guard(plan_.device);
  if (!guard.ok()) return note(report_cuda(cudaGetLastError(), "cudaSetDevice", __FILE__, __LINE__));
  return note(run_span(n_tok, logits));
}

}  // namespace

std::unique_ptr<DeviceStep> DeviceStep::create(std::shared_ptr<const Model> model, const DeviceOptions& o,
                                               std::string* error, Status* status) {
  return make_initialized<DeviceStep, Step>(std::move(model), o, error, status);
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
