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
  auto d = mega::Detector::for_model(m, o, &err);
  if (!d) std::fprintf(stderr, "keyword_spotter: bad detection settings: %s\n", err.c_str());
  return d;
}

}  // namespace kws
