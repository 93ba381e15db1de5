#include "mega/detector.hpp"

#include <algorithm>
#include <cmath>

namespace mega {

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
    if (!(t > 0.0f && t <= 1.0f)) return fail("thresholds must be in (0, 1]");
  }
  if (cfg.smoothing_hops < 1 || cfg.smoothing_hops > 1024) return fail("smoothing must be 1..1024 hops");
  if (cfg.refractory_ms < 0 || cfg.refractory_ms > 600000) return fail("refractory time must be 0..600000 ms");
  if (cfg.hop_ms <= 0) return fail("hop duration must be positive");
  std::unique_ptr<Detector> d(new Detector());
  d->n_ = int32_t(n);
  d->hops_ = cfg.smoothing_hops;
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
  // average over the hops seen so far (at most hops_)
  const int64_t seen = std::min<int64_t>(hop_ + 1, hops_);
  for (int32_t i = 0; i < n_; ++i) {
    double acc = 0.0;
    for (int64_t h = 0; h < seen; ++h) acc += history_[size_t(h) * size_t(n_) + size_t(i)];
    smoothed_[size_t(i)] = float(acc / double(seen));
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
  const int64_t hop = hop_++;
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
    int64_t event = hop;
    while (event > hop - seen + 1 && argmax_at(event - 1) == best) --event;
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
  for (float& t : out) t = std::min(0.99f, std::max(0.01f, t + shift));
  return out;
}

}  // namespace mega
