// SPDX-License-Identifier: Apache-2.0
// Turning per-hop window posteriors into keyword detections.
//
// Per chunk hop the session's window logits become posteriors (softmax); they
// are averaged over the last `smoothing_hops` hops; a keyword fires when its
// smoothed score reaches its threshold and it is the best keyword above
// threshold. After a detection every keyword is suppressed for
// `refractory_ms`, and the keyword that fired must fall back below its
// threshold before it can fire again, so one spoken word gives one
// detection. Labels starting with '_' (_silence_, _unknown_) never fire.
// The first `warmup_hops` hops of a stream (a model's: its window, W chunks)
// neither fire nor enter the average: while its window fills from a fresh
// start the model reads a tone, a square wave or a sentence's first syllable
// as a keyword (0.99 "go" for a 440 Hz tone, then _unknown_ once the window
// has filled). A word said from the start still fires from the hops after;
// a stream that ends within its warm-up (a clip) is judged by finish().
// All memory is allocated by create(); update() allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mega/detection_limits.hpp"

namespace mega {

class Model;

struct DetectorConfig {
  std::vector<float> thresholds;  // per label, in (0, 1]
  int32_t smoothing_hops = 1;     // >= 1
  int32_t refractory_ms = 1000;   // >= 0
  int32_t hop_ms = 0;             // duration of one hop (the model's chunk), > 0
  int32_t warmup_hops = 0;        // first hops of a stream that neither fire nor smooth (see update()), >= 0
};

struct Detection {
  int32_t label = -1;      // index into the model's labels
  float score = 0.0f;      // smoothed posterior when it fired
  int64_t hop_index = 0;   // hop that fired (0-based since reset)
  // When the word was heard: walking back from hop_index over the smoothed
  // hops, the earliest hop of the run in which this keyword was the most
  // probable label. Smoothing delays firing; it does not move event_hop.
  int64_t event_hop = 0;
};

// Changes to a model's stored detection defaults (keyword_spotter's
// --threshold, --smoothing, --refractory-ms, --sensitivity; the C API's
// mega_detector_options). Negative or empty: keep the model's value.
struct DetectorOverrides {
  std::vector<float> thresholds;  // one per label, in (0, 1]; empty: see threshold
  float threshold = -1.0f;        // every label, in (0, 1]; not with thresholds
  int32_t smoothing_hops = -1;    // kMinSmoothingHops..kMaxSmoothingHops (1..1024; detection_limits.hpp)
  int32_t refractory_ms = -1;     // kMinRefractoryMs..kMaxRefractoryMs (0..600000)
  float sensitivity = -1.0f;      // 0..1, applied to the thresholds last (apply_sensitivity)
};

class Detector {
 public:
  // Null and *error set if the config is invalid (thresholds count/range, ...).
  static std::unique_ptr<Detector> create(const std::vector<std::string>& labels, const DetectorConfig& cfg,
                                          std::string* error);
  // The configuration a model's stored defaults give after the overrides:
  // thresholds from the model (0.5 each when it has none tuned), replaced by
  // the overrides' thresholds or threshold, then moved by the sensitivity;
  // smoothing and refractory time from the model unless overridden; the hop
  // is the model's chunk. False and *error set for an override out of range.
  static bool config_for_model(const Model& model, const DetectorOverrides& overrides, DetectorConfig* cfg,
                               std::string* error);
  // config_for_model() then create().
  static std::unique_ptr<Detector> for_model(const Model& model, const DetectorOverrides& overrides,
                                             std::string* error);
  // One hop: logits (n_labels, finite: a session's always are; the C API's
  // mega_detector_update refuses others). Returns true and fills *out when a
  // keyword fires. In the warm-up hops: never; after them the average is over
  // the hops since the warm-up (fewer than smoothing_hops at first), and a
  // detection's event_hop may reach back into the warm-up (a word said from
  // the start).
  bool update(const float* logits, Detection* out);
  // The end of the stream, after the last hop's update(): a word in the last
  // hops has not yet filled the smoothing window, so the window shrinks from
  // the end as it grew after the warm-up (the mean of the last
  // smoothing_hops - 1 hops after the warm-up, then of fewer, down to the last
  // one alone), each under the same firing rules, until a keyword fires. A
  // stream that ended within its warm-up is a clip no update judged: the
  // windows start from all its hops (at most smoothing_hops). Returns true and fills *out for that
  // detection (hop_index: the last hop); at most one. Allocates nothing; the
  // stream continues normally if more updates follow.
  bool finish(Detection* out);
  // Smoothed posteriors after the last update (n_labels; zeros in the warm-up).
  const float* smoothed() const { return smoothed_.data(); }
  // Hops updated since creation or reset (the next update's hop_index).
  int64_t hops_seen() const { return hop_; }
  void reset();

  // Thresholds after a sensitivity in [0, 1]: 0.5 keeps them exactly, 1 lowers
  // every threshold by 0.5, 0 raises it by 0.5, the move limited to
  // [0.01, 0.99]: below 0.5 no threshold falls, above 0.5 none rises (a stored
  // 0.995 stays 0.995 at 0.5 and below).
  static std::vector<float> apply_sensitivity(const std::vector<float>& thresholds, float sensitivity);

  // When the word of a detection was heard, in seconds from the start of the
  // stream: the end of its event hop (not of the later hop in which smoothing
  // let it fire). end_sample: samples the session had consumed when the
  // firing chunk completed (ChunkResult::end_sample); hop_samples: the
  // model's chunk (HParams::chunk_samples()).
  static double event_time_s(const Detection& d, int64_t end_sample, int64_t hop_samples, int32_t sample_rate);

 private:
  Detector() = default;
  int32_t argmax_at(int64_t hop) const;  // most probable label in a remembered hop
  // Smooths over the `window` hops ending at `hop`, then applies the firing rules at `hop`.
  bool fire_at(int64_t hop, int64_t window, Detection* out);
  std::vector<bool> can_fire_;      // label does not start with '_'
  std::vector<bool> armed_;         // fell below threshold since it last fired
  std::vector<float> thresholds_;
  std::vector<float> history_;      // (smoothing_hops x n) posteriors, ring
  std::vector<float> smoothed_;
  std::vector<float> probs_;
  int32_t n_ = 0;
  int32_t hops_ = 1;
  int64_t refractory_hops_ = 0;
  int64_t warmup_ = 0;
  int64_t hop_ = 0;
  int64_t suppressed_until_ = 0;    // first hop allowed to fire again
};

}  // namespace mega
