// SPDX-License-Identifier: Apache-2.0
// The streams: an Engine (one stream, pushed synchronously or through an
// asynchronous submit/poll pair, and offline clips) and a BatchEngine (many
// independent streams advanced one chunk per step), on a compute backend
// chosen by name. "cpu" is always there; "cuda" runs on an NVIDIA GPU when the
// library was built with -DMEGA_CUDA=ON and a device is present.
//
// As everywhere in this API: status codes, never exceptions; all memory
// (host and device) is allocated at creation; nothing allocates per chunk.
// An engine is used by one thread at a time (any thread); one model serves
// any number of engines.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mega/mega.hpp"

namespace mega {

struct EngineOptions {
  // cpu: the scalar reference kernels (tests) or the optimized ones
  KernelImpl kernels = KernelImpl::optimized;
  // Longest clip classify_clip() takes for bidirectional models, in samples
  // (0: one model window); unidirectional models take clips of any length.
  int64_t max_clip_samples = 0;
  // cpu: threads that share each chunk's work (1..kMaxThreads), the caller's
  // included: the engine starts n_threads - 1 workers at creation (none for
  // models whose chunks are under 128 tokens, too short to split). Results
  // are the same for any count. With more than one, keep OpenBLAS at one
  // thread (set_blas_threads(1)); the engine already splits its matrix
  // products. Batch engines run each stream on one thread.
  int32_t n_threads = 1;
  // cuda: float16 storage of activations and GEMM operands (float32
  // accumulation and elementwise math) instead of float32
  bool fp16 = false;
  // cuda: device ordinal
  int32_t device = 0;
  // Steps submit() may queue before it answers Status::busy (results not yet
  // collected with poll()/wait() count as queued). 1 to 16.
  int32_t max_in_flight = 3;
};

// One stream. Use either push() (synchronous) or submit()/poll()
// (asynchronous), not both: push() collects results itself and drops any that
// submit() left uncollected.
class Engine {
 public:
  virtual ~Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  virtual const char* backend() const = 0;  // "cpu" or "cuda"
  virtual const Model& model() const = 0;

  // Streaming (unidirectional models; Status::not_streamable otherwise).
  // Consumes samples up to and including the one that completes the next
  // chunk, or all n; returns how many in *n_consumed, and when a chunk
  // completed, waits for its result and sets *chunk_done (last_result() then
  // describes it). Never allocates.
  virtual Status push(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done) = 0;
  // Convenience: feeds all n samples, calling on_chunk for each completed chunk.
  template <typename F>
  Status push_all(const float* samples, int64_t n, F&& on_chunk) {
    while (n > 0) {
      int64_t used = 0;
      bool done = false;
      const Status s = push(samples, n, &used, &done);
      if (s != Status::ok) return s;
      if (done) on_chunk(last_result());
      samples += used;
      n -= used;
    }
    return Status::ok;
  }
  virtual const ChunkResult& last_result() const = 0;

  // Asynchronous streaming: consumes samples like push(), but when a chunk
  // completes it only starts its computation (*chunk_submitted) and returns
  // without waiting. Status::busy (nothing consumed) when max_in_flight chunks
  // are queued or uncollected: collect one and try again.
  virtual Status submit(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_submitted) = 0;
  // The oldest submitted chunk's result, if it is finished: *ready says
  // whether *out was filled. Its logits stay valid until the next submit().
  virtual Status poll(ChunkResult* out, bool* ready) = 0;
  // Same, waiting for it; invalid_argument if nothing is queued.
  virtual Status wait(ChunkResult* out) = 0;

  // Back to a fresh stream (drops queued results).
  virtual void reset() = 0;

  // Offline forward of the official model on one clip: the clip is
  // zero-padded to a multiple of the chunk and to at least one window
  // (padded_clip_samples()), and pooled over all of it. Works for both EMA
  // directions (bidirectional clips up to EngineOptions::max_clip_samples,
  // Status::too_long beyond). A stream in progress is reset. logits:
  // n_classes floats.
  virtual Status classify_clip(const float* samples, int64_t n, float* logits) = 0;
  int64_t padded_clip_samples(int64_t n) const { return model().hparams().padded_clip_samples(n); }
  // The model file's self-test through classify_clip().
  Status self_test(float* max_abs_diff);

  // Input hygiene counts (mega.hpp: non-finite and clipped samples, state resets).
  virtual StreamStats stats() const = 0;
  // Memory this engine allocated (host and device).
  virtual int64_t memory_bytes() const = 0;
  // The last failure's description (device errors name the call, file and line).
  virtual const char* last_error() const = 0;

 protected:
  Engine() = default;
};

// One step's results for every stream of a BatchEngine.
struct BatchResult {
  int64_t step = 0;                      // 0-based, since creation
  int32_t n_streams = 0;
  int32_t n_classes = 0;
  const int64_t* chunk_index = nullptr;  // per stream: the chunk this step completed (0 after a reset)
  const float* logits = nullptr;         // n_streams x n_classes window logits; valid until the next submit()
};

// B independent streams of a streaming (unidirectional) model, all advanced
// by one chunk per step: for multi-microphone devices and servers.
class BatchEngine {
 public:
  virtual ~BatchEngine() = default;
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  virtual const char* backend() const = 0;
  virtual const Model& model() const = 0;
  virtual int32_t n_streams() const = 0;

  // One chunk for every stream: samples[b * chunk_samples + i], raw audio as
  // given to Engine::push. Starts the step and returns (cuda) or computes it
  // (cpu); Status::busy when max_in_flight steps are uncollected.
  virtual Status submit(const float* samples) = 0;
  virtual Status poll(BatchResult* out, bool* ready) = 0;
  virtual Status wait(BatchResult* out) = 0;
  // Stream b (or every stream, b = -1) starts afresh at the next submit().
  virtual Status reset(int32_t b) = 0;
  // Stream b's input hygiene counts (mega.hpp: non-finite and clipped
  // samples, state resets); zeros for a b out of range.
  virtual StreamStats stats(int32_t b) const = 0;

  virtual int64_t memory_bytes() const = 0;
  virtual const char* last_error() const = 0;

 protected:
  BatchEngine() = default;
};

// "cpu", or "cuda" (Status::no_device, with the reason in *error, when this
// build has no CUDA backend or no device is present).
std::unique_ptr<Engine> create_engine(const std::string& backend, std::shared_ptr<const Model> model,
                                      const EngineOptions& opts, std::string* error, Status* status = nullptr);
// Needs a streamable model (Status::not_streamable otherwise); n_streams >= 1.
std::unique_ptr<BatchEngine> create_batch_engine(const std::string& backend, std::shared_ptr<const Model> model,
                                                 int32_t n_streams, const EngineOptions& opts, std::string* error,
                                                 Status* status = nullptr);

// Whether create_engine() can make this backend here; *why says why not, or
// names the device ("NVIDIA H100 80GB HBM3, compute capability 9.0").
bool backend_available(const std::string& backend, std::string* why = nullptr);
// "cuda" when available, else "cpu".
const char* default_backend();

}  // namespace mega
