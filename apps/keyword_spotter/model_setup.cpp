// SPDX-License-Identifier: Apache-2.0
// The model, the session and the detector as the options ask for them.
#include "model_setup.h"

#include <cstdio>
#include <string>

namespace kws {

std::shared_ptr<const mega::Model> load_model(const Params& p) {
  std::string err;
  auto model = mega::Model::load(p.model_path, &err);
  if (!model) std::fprintf(stderr, "keyword_spotter: cannot load model: %s\n", err.c_str());
  return model;
}

std::unique_ptr<mega::Engine> make_session(const std::shared_ptr<const mega::Model>& m, const Params& p,
                                           int64_t max_clip_samples) {
  std::string err;
  auto s = mega::create_engine(p.backend, m, engine_options(p, max_clip_samples), &err);
  if (!s) std::fprintf(stderr, "keyword_spotter: cannot create a session: %s\n", err.c_str());
  return s;
}

std::unique_ptr<mega::Detector> make_detector(const mega::Model& m, const Params& p) {
  mega::DetectorOverrides o;  // the same rules as the C API's mega_detector_create
  o.threshold = p.threshold;
  o.smoothing_hops = p.smoothing;
  o.refractory_ms = p.refractory_ms;
  o.sensitivity = p.sensitivity;
  std::string err;
  if (!p.label_thresholds.empty()) {
    // the model's thresholds, with those named replaced
    mega::DetectorConfig base;
    if (!mega::Detector::config_for_model(m, mega::DetectorOverrides(), &base, &err)) {
      std::fprintf(stderr, "keyword_spotter: bad detection settings: %s\n", err.c_str());
      return nullptr;
    }
    o.thresholds = base.thresholds;
    for (const auto& lt : p.label_thresholds) {
      size_t i = 0;
      while (i < m.labels().size() && m.labels()[i] != lt.first) ++i;
      if (i == m.labels().size()) {
        std::string labels;
        for (const std::string& l : m.labels()) labels += (labels.empty() ? "" : ",") + l;
        std::fprintf(stderr, "keyword_spotter: --threshold: the model has no label '%s' (its labels: %s)\n",
                     lt.first.c_str(), labels.c_str());
        return nullptr;
      }
      o.thresholds[i] = lt.second;
    }
  }
  auto d = mega::Detector::for_model(m, o, &err);
  if (!d) std::fprintf(stderr, "keyword_spotter: bad detection settings: %s\n", err.c_str());
  return d;
}

}  // namespace kws
