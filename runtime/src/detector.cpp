// SPDX-License-Identifier: Apache-2.0
#include "mega/detector.hpp"

#include <algorithm>
#include <cmath>

#include "mega/detection_limits.hpp"
#include "mega/mega.hpp"

namespace mega {
namespace {

// The ranges as the error messages state them, from detection_limits.hpp.
std::string smoothing_range() {
  return std::to_string(kMinSmoothingHops) + ".." + std::to_string(kMaxSmoothingHops);
}
std::string refractory_range() {
  return std::to_string(kMinRefractoryMs) + ".." + std::to_string(kMaxRefractoryMs);
}

}  // namespace

std::unique_ptr<Detector> Detector::create(const std::vector<std::string>& labels, const DetectorConfig& cfg,
                                           std::string* error) {
  auto fail = [&](const std::string& m) -> std::unique_ptr<Detector> {
    if (error) *error = m;
    return nullptr;
  };
  const size_t n = labels.size();
  if (n == 0) return fail("no labels");
  if (cfg.thresholds.size() != n) {
    return fail("need " + std::to_string(n) + " thresholds, got " + std::to_string(cfg.thresholds.size()));
  }
  for (float t : cfg.thresholds) {
    if (!threshold_in_range(t)) return fail("thresholds must be in (0, 1]");
  }
  if (cfg.smoothing_hops < kMinSmoothingHops || cfg.smoothing_hops > kMaxSmoothingHops) {
    return fail("smoothing must be " + smoothing_range() + " hops");
  }
  if (cfg.refractory_ms < kMinRefractoryMs || cfg.refractory_ms > kMaxRefractoryMs) {
    return fail("refractory time must be " + refractory_range() + " ms");
  }
  if (cfg.hop_ms <= 0) return fail("hop duration must be positive");
  if (cfg.warmup_hops < 0) return fail("warm-up hops must be >= 0");
  std::unique_ptr<Detector> d(new Detector());
  d->n_ = int32_t(n);
  d->hops_ = cfg.smoothing_hops;
  d->warmup_ = cfg.warmup_hops;
  d->thresholds_ = cfg.thresholds;
  d->refractory_hops_ = (int64_t(cfg.refractory_ms) + cfg.hop_ms - 1) / cfg.hop_ms;
  d->can_fire_.resize(n);
  for (size_t i = 0; i < n; ++i) d->can_fire_[i] = !labels[i].empty() && labels[i][0] != '_';
  d->armed_.assign(n, true);
  d->history_.assign(n * size_t(cfg.smoothing_hops), 0.0f);
  d->smoothed_.assign(n, 0.0f);
  d->probs_.assign(n, 0.0f);
  return d;
}

void Detector::reset() {
  std::fill(armed_.begin(), armed_.end(), true);
  std::fill(history_.begin(), history_.end(), 0.0f);
  std::fill(smoothed_.begin(), smoothed_.end(), 0.0f);
  hop_ = 0;
  suppressed_until_ = 0;
}

bool Detector::update(const float* logits, Detection* out) {
  // softmax
  float mx = logits[0];
  for (int32_t i = 1; i < n_; ++i) mx = std::max(mx, logits[i]);
  double sum = 0.0;
  for (int32_t i = 0; i < n_; ++i) {
    probs_[size_t(i)] = std::exp(logits[i] - mx);
    sum += probs_[size_t(i)];
  }
  const size_t slot = size_t(hop_ % hops_) * size_t(n_);
  for (int32_t i = 0; i < n_; ++i) history_[slot + size_t(i)] = float(probs_[size_t(i)] / sum);
  const int64_t hop = hop_++;
  if (hop < warmup_) {
    // the model is still filling its window: remembered (event_hop may reach
    // back here) but neither averaged nor fired on
    std::fill(smoothed_.begin(), smoothed_.end(), 0.0f);
    return false;
  }
  // average over the hops since the warm-up (at most hops_)
  return fire_at(hop, std::min<int64_t>(hop - warmup_ + 1, hops_), out);
}

bool Detector::finish(Detection* out) {
  if (hop_ == 0) return false;
  const int64_t last = hop_ - 1;
  // A stream that ended within its warm-up is a clip no longer than the
  // model's window: no update judged it, so its end does, over all its hops.
  const bool clip = hop_ <= warmup_;
  const int64_t hops = clip ? hop_ : hop_ - warmup_;
  // the window shrinks from the end as it grew at the start: the last hops alone
  for (int64_t window = std::min<int64_t>(hops, hops_) - (clip ? 0 : 1); window >= 1; --window) {
    if (fire_at(last, window, out)) return true;
  }
  return false;
}

bool Detector::fire_at(int64_t hop, int64_t window, Detection* out) {
  // smoothed_ = mean of the posteriors of hops (hop - window, hop], summed in ring-slot order
  for (int32_t i = 0; i < n_; ++i) {
    double acc = 0.0;
    for (int64_t s = 0; s < std::min<int64_t>(hop + 1, hops_); ++s) {
      const int64_t age = (hop - s) % hops_;  // hops back from `hop` to the one in slot s (s <= hop)
      if (age < window) acc += history_[size_t(s) * size_t(n_) + size_t(i)];
    }
    smoothed_[size_t(i)] = float(acc / double(window));
  }
  int32_t best = -1;
  for (int32_t i = 0; i < n_; ++i) {
    const bool above = smoothed_[size_t(i)] >= thresholds_[size_t(i)];
    if (!above) armed_[size_t(i)] = true;
    if (above && can_fire_[size_t(i)] && armed_[size_t(i)] &&
        (best < 0 || smoothed_[size_t(i)] > smoothed_[size_t(best)])) {
      best = i;
    }
  }
  if (best < 0) return false;
  // Whatever is above threshold now (the winner, a confusable runner-up, or
  // anything during suppression) must fall below before it may fire: the
  // tail of one spoken word never yields a second detection.
  for (int32_t i = 0; i < n_; ++i) {
    if (smoothed_[size_t(i)] >= thresholds_[size_t(i)]) armed_[size_t(i)] = false;
  }
  if (hop < suppressed_until_) return false;
  suppressed_until_ = hop + 1 + refractory_hops_;
  if (out) {
    out->label = best;
    out->score = smoothed_[size_t(best)];
    out->hop_index = hop;
    // back over the averaged hops; a window that starts where the warm-up
    // ended goes on into the remembered warm-up hops (a word said from the start)
    int64_t first = hop - window + 1;
    if (first == warmup_) first = std::max<int64_t>(0, hop - hops_ + 1);
    int64_t event = hop;
    while (event > first && argmax_at(event - 1) == best) --event;
    out->event_hop = event;
  }
  return true;
}

int32_t Detector::argmax_at(int64_t hop) const {
  const float* row = &history_[size_t(hop % hops_) * size_t(n_)];
  return int32_t(std::max_element(row, row + n_) - row);
}

std::vector<float> Detector::apply_sensitivity(const std::vector<float>& thresholds, float sensitivity) {
  std::vector<float> out(thresholds);
  const float shift = 0.5f - std::min(1.0f, std::max(0.0f, sensitivity));
  // the clamp to [0.01, 0.99] limits the move; it never moves a threshold the
  // other way (a stored 0.995 stays at sensitivity <= 0.5; 0.5 changes nothing)
  for (float& t : out) {
    t = shift > 0.0f ? std::max(t, std::min(0.99f, t + shift)) : std::min(t, std::max(0.01f, t + shift));
  }
  return out;
}

bool Detector::config_for_model(const Model& model, const DetectorOverrides& o, DetectorConfig* cfg,
                                std::string* error) {
  auto fail = [&](const std::string& m) {
    if (error) *error = m;
    return false;
  };
  const ModelInfo& info = model.info();
  const size_t n = info.labels.size();
  // negative means "the model's"; anything else must be in range (NaN never is)
  if (!(o.threshold < 0.0f || threshold_in_range(o.threshold))) {
    return fail("threshold must be in (0, 1] (negative: the model's)");
  }
  if (!o.thresholds.empty() && o.threshold >= 0.0f) return fail("give thresholds per label or one threshold, not both");
  if (!o.thresholds.empty() && o.thresholds.size() != n) {
    return fail("need " + std::to_string(n) + " thresholds (one per label), got " + std::to_string(o.thresholds.size()));
  }
  for (float t : o.thresholds) {
    if (!threshold_in_range(t)) return fail("thresholds must be in (0, 1]");
  }
  if (!(o.sensitivity < 0.0f || (o.sensitivity >= 0.0f && o.sensitivity <= 1.0f))) {
    return fail("sensitivity must be in [0, 1] (negative: none)");
  }
  // negative keeps the model's (refractory's lower bound, 0, is where "negative" starts)
  if ((o.smoothing_hops >= 0 && o.smoothing_hops < kMinSmoothingHops) || o.smoothing_hops > kMaxSmoothingHops) {
    return fail("smoothing must be " + smoothing_range() + " hops (negative: the model's)");
  }
  if (o.refractory_ms > kMaxRefractoryMs) {
    return fail("refractory time must be " + refractory_range() + " ms (negative: the model's)");
  }
  DetectorConfig c;
  // untuned models get 0.5 (the README says so)
  c.thresholds = info.detection.thresholds.empty() ? std::vector<float>(n, 0.5f) : info.detection.thresholds;
  if (!o.thresholds.empty()) c.thresholds = o.thresholds;
  if (o.threshold > 0.0f) c.thresholds.assign(n, o.threshold);
  if (o.sensitivity >= 0.0f) c.thresholds = apply_sensitivity(c.thresholds, o.sensitivity);
  c.smoothing_hops = o.smoothing_hops > 0 ? o.smoothing_hops : info.detection.smoothing_hops;
  c.refractory_ms = o.refractory_ms >= 0 ? o.refractory_ms : info.detection.refractory_ms;
  c.warmup_hops = info.hparams.window_chunks;
  c.hop_ms = std::max(1, int32_t(std::lround(1000.0 * double(info.hparams.chunk_samples()) / info.hparams.sample_rate)));
  *cfg = std::move(c);
  return true;
}

std::unique_ptr<Detector> Detector::for_model(const Model& model, const DetectorOverrides& overrides,
                                              std::string* error) {
  DetectorConfig c;
  if (!config_for_model(model, overrides, &c, error)) return nullptr;
  return create(model.labels(), c, error);
}

double Detector::event_time_s(const Detection& d, int64_t end_sample, int64_t hop_samples, int32_t sample_rate) {
  return double(end_sample - (d.hop_index - d.event_hop) * hop_samples) / sample_rate;
}

}  // namespace mega
