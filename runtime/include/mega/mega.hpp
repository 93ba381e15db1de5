// SPDX-License-Identifier: Apache-2.0
// Mega-chunk keyword spotting runtime: the C++ API.
//
// A Model holds immutable weights loaded (and fully validated) from a .mega
// file; it is shared by any number of engines. An Engine (mega/engine.hpp)
// is one stream on one backend, with its state in memory allocated once at
// creation. Nothing here throws: failures come back as a Status plus a message.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mega {

enum class Status : int32_t {
  ok = 0,
  invalid_argument = 1,   // a bad pointer, size or option from the caller
  io_error = 2,           // the file could not be opened, read or mapped
  bad_model = 3,          // the file is not a valid .mega model (message names the problem)
  unsupported_model = 4,  // a valid file this runtime cannot run (newer schema, unknown option)
  not_streamable = 5,     // streaming asked of a bidirectional model
  too_long = 6,           // a clip longer than the engine was sized for (max_clip_samples)
  out_of_memory = 7,
  self_test_failed = 8,
  no_device = 9,          // the backend is not built in, or no device is present (engine.hpp)
  device_error = 10,      // a GPU call failed (the engine's last_error() names it)
  busy = 11,              // asynchronous engines: too many results uncollected; poll first
};

const char* status_name(Status s);

enum class EmaDirection : int32_t { unidirectional = 0, bidirectional = 1 };
enum class AttentionFn : int32_t { laplace = 0, softmax = 1, relu2 = 2 };
enum class NormType : int32_t { batch_norm = 0, layer_norm = 1, scale_norm = 2, rms_norm = 3 };
enum class Activation : int32_t { silu = 0, relu = 1, gelu = 2, gelu_tanh = 3, linear = 4 };
// What the patch embedding computes per window (formats/mega_model.fbs, PatchFeatures).
// teacher_embedding: the pretrained teacher's melspectrogram and speech embedding.
enum class PatchFeatures : int32_t { linear = 0, log_power = 1, log_mel = 2, teacher_embedding = 3 };
// What is done to log-power features before their scale and bias (PatchNorm):
// running_mean subtracts each channel's causal running mean.
enum class PatchNorm : int32_t { off = 0, running_mean = 1 };

// Everything the spec names; counts of tokens unless said otherwise.
struct HParams {
  int32_t embed_dim = 0;       // D
  int32_t hidden_dim = 0;      // H
  int32_t ffn_hidden_dim = 0;  // F (0: no FFN sublayer)
  int32_t z_dim = 0;           // Z
  int32_t n_dim = 0;           // N
  int32_t n_layers = 0;
  int32_t chunk_size = 0;      // C
  int32_t truncation = 0;      // K (0: untruncated)
  EmaDirection ema_direction = EmaDirection::unidirectional;
  AttentionFn attention_fn = AttentionFn::laplace;
  NormType norm_type = NormType::batch_norm;
  float norm_eps = 1e-5f;
  bool prenorm = true;
  Activation activation = Activation::silu;
  int32_t classifier_layers = 1;
  int32_t classifier_dim = 0;
  Activation classifier_activation = Activation::gelu;
  int32_t n_classes = 0;
  int32_t patch_kernel = 1;    // samples per token window (k)
  int32_t patch_stride = 1;    // samples per token (s)
  PatchFeatures patch_features = PatchFeatures::linear;
  float patch_log_eps = 1e-6f;  // log_power: log(a^2 + b^2 + eps); log_mel: log(band + eps)
  int32_t patch_bins = 0;       // log_mel: spectrum bins (filter pairs), P
  int32_t patch_bands = 0;      // log_mel: bands pooled from the bins, B
  PatchNorm patch_norm = PatchNorm::off;
  float patch_norm_decay = 0.01f;  // running_mean: m += decay * (p - m) per token
  int32_t window_chunks = 0;   // W
  int32_t sample_rate = 16000;

  int64_t chunk_samples() const { return int64_t(chunk_size) * patch_stride; }
  int64_t window_samples() const { return chunk_samples() * window_chunks; }
  // What classify_clip() runs on a clip of n samples: zero-padded to whole
  // chunks, and to at least one window.
  int64_t padded_clip_samples(int64_t n) const {
    const int64_t cs = chunk_samples();
    const int64_t padded = ((n > 1 ? n : 1) + cs - 1) / cs * cs;
    return padded > window_samples() ? padded : window_samples();
  }
};

struct DetectionDefaults {
  std::vector<float> thresholds;  // per label; empty if the model carries none
  int32_t smoothing_hops = 1;
  int32_t refractory_ms = 1000;
};

// The largest magnitude one kind of activation reaches on the self-test clip,
// and where (the CUDA backend's tensor name; layer -1: the patch embedding).
// Infinity stands for NaN or Inf.
struct Fp16Peak {
  float value = 0.0f;
  std::string tensor;
  int32_t layer = -1;
};

// The float16 peaks the converter measured (schema 5): the residual stream's
// and the other float16 tensors'. They decide float16 storage on the CUDA
// backend (kernels/cuda/fp16_range.h); absent, it measures them itself.
struct Fp16Peaks {
  bool present = false;
  Fp16Peak residual, other;
};

struct ModelInfo {
  uint32_t schema_version = 0;
  HParams hparams;
  std::vector<std::string> labels;
  bool input_scaling = false;
  float input_mean = 0.0f;
  float input_std = 1.0f;
  DetectionDefaults detection;
  std::string converter_version, source_sha256, source_format, notes;
  int64_t n_params = 0;
  bool fp16 = false;
  int64_t file_bytes = 0;
  int64_t self_test_samples = 0;  // 0: the file has no self-test
  Fp16Peaks fp16_peaks;
};

class Model {
 public:
  // Maps and validates a .mega file. Returns null and sets *error on failure
  // (a message naming the culprit: the tensor, the field, the offset).
  static std::shared_ptr<const Model> load(const std::string& path, std::string* error,
                                           Status* status = nullptr);
  // Same, from bytes in memory (copied).
  static std::shared_ptr<const Model> load_from_memory(const void* data, size_t size,
                                                       std::string* error, Status* status = nullptr);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelInfo& info() const;
  const HParams& hparams() const { return info().hparams; }
  const std::vector<std::string>& labels() const { return info().labels; }
  bool streamable() const { return hparams().ema_direction == EmaDirection::unidirectional; }

  // The converter's self-test input and logits (empty if absent).
  const std::vector<float>& self_test_input() const;
  const std::vector<float>& self_test_logits() const;
  float self_test_tolerance() const;
  // Logits computed for self_test_input() against the file's: *max_abs_diff
  // gets the largest difference (infinity for NaN); self_test_failed beyond
  // the tolerance, invalid_argument if the file has no self-test.
  Status check_self_test(const float* logits, float* max_abs_diff) const;

 private:
  Model();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend struct ModelAccess;
};

// Which CPU kernels an engine runs: the plain scalar references (for tests)
// or the optimized ones (OpenBLAS sgemm, vectorized math).
enum class KernelImpl : int32_t { reference = 0, optimized = 1 };

// The most threads a CPU engine's chunks may be split across (EngineOptions::n_threads).
constexpr int32_t kMaxThreads = 16;

// What an engine produces each time a chunk completes.
struct ChunkResult {
  int64_t chunk_index = 0;       // 0-based, since creation or reset
  int64_t end_sample = 0;        // samples consumed when the chunk completed
  int32_t n_chunks_pooled = 0;   // min(chunk_index + 1, W)
  const float* logits = nullptr; // n_classes, over the last n_chunks_pooled chunks; valid until the next push
};

// Input hygiene: samples are audio in [-1, 1] (full scale). A non-finite
// sample (NaN, +-Inf) is replaced by 0, and one beyond full scale is clipped
// to +-kMaxSampleMagnitude, as an ADC would, before the model's input
// scaling; both are counted (stats()). Should a chunk's logits still come out
// non-finite, they are zeroed and the stream's state (EMA, pooling window) is
// cleared, so one bad chunk cannot poison the stream for good.
constexpr float kMaxSampleMagnitude = 1.0f;

// What a stream has seen: the one set of counts, in C++ (Engine::stats(),
// KeywordStream::stats()), the CLI and the C API (mega_session_stats).
struct StreamStats {
  // input hygiene, since the engine was created (reset() keeps them)
  int64_t n_nonfinite_samples = 0;  // NaN/Inf samples replaced by 0
  int64_t n_clamped_samples = 0;    // samples beyond full scale, clipped to +-kMaxSampleMagnitude
  int64_t n_state_resets = 0;       // chunks (or clips) whose logits were non-finite: zeroed, state cleared
  // a keyword stream's, since its reset (zeros from Engine::stats())
  int64_t n_samples = 0;     // audio samples streamed (not the silence a flush adds)
  int64_t n_chunks = 0;      // chunks completed (a flush's included)
  int64_t n_detections = 0;  // detections reported
};

// One sample after the input hygiene above (before the model's scaling), counted in *stats.
inline float clean_sample(float s, StreamStats* stats) {
  if (!std::isfinite(s)) {
    ++stats->n_nonfinite_samples;
    return 0.0f;
  }
  if (s > kMaxSampleMagnitude || s < -kMaxSampleMagnitude) {
    ++stats->n_clamped_samples;
    return s > 0.0f ? kMaxSampleMagnitude : -kMaxSampleMagnitude;
  }
  return s;
}

// Threads OpenBLAS may use for the optimized kernels (process-wide).
void set_blas_threads(int n);

}  // namespace mega
