// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's session (device_session.h): staging slots, graphs and
// stream bookkeeping on a DevicePlan (device_plan.h); the forward pass itself
// is forward.h over CudaOps.
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

#include "device_plan.h"
#include "stager.h"

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

}  // namespace

std::unique_ptr<DeviceSession> DeviceSession::create(std::shared_ptr<const Model> model, const DeviceOptions& o,
                                                     std::string* error, Status* status) {
  return make_initialized<DeviceSession, Session>(std::move(model), o, error, status);
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
