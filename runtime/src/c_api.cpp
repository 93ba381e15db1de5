// SPDX-License-Identifier: Apache-2.0
// The C API: thin wrappers over the C++ classes that never let an exception
// (for example std::bad_alloc from a message string) cross the boundary.
#include "mega/mega_kws.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <string>

#include "c_api_handles.h"

namespace {

thread_local std::string g_load_error;

mega_status to_c(mega::Status s) { return static_cast<mega_status>(static_cast<int32_t>(s)); }

void set_status(mega_status* out, mega_status s) {
  if (out) *out = s;
}

}  // namespace

extern "C" {

mega_model* mega_model_load(const char* path, mega_status* status) {
  try {
    g_load_error.clear();
    if (!path) {
      g_load_error = "null path";
      set_status(status, MEGA_ERR_INVALID_ARGUMENT);
      return nullptr;
    }
    mega::Status st = mega::Status::ok;
    auto model = mega::Model::load(path, &g_load_error, &st);
    set_status(status, to_c(st));
    if (!model) return nullptr;
    return new mega_model{std::move(model)};
  } catch (...) {
    set_status(status, MEGA_ERR_OUT_OF_MEMORY);
    return nullptr;
  }
}

const char* mega_load_error(void) { return g_load_error.c_str(); }

void mega_model_free(mega_model* model) { delete model; }

int32_t mega_model_sample_rate(const mega_model* m) { return m ? m->model->hparams().sample_rate : 0; }
int32_t mega_model_n_classes(const mega_model* m) { return m ? m->model->hparams().n_classes : 0; }
const char* mega_model_label(const mega_model* m, int32_t i) {
  if (!m || i < 0 || i >= m->model->hparams().n_classes) return nullptr;
  return m->model->labels()[size_t(i)].c_str();
}
int64_t mega_model_chunk_samples(const mega_model* m) { return m ? m->model->hparams().chunk_samples() : 0; }
int64_t mega_model_window_samples(const mega_model* m) { return m ? m->model->hparams().window_samples() : 0; }
int32_t mega_model_streamable(const mega_model* m) { return m && m->model->streamable() ? 1 : 0; }

void mega_session_options_init(mega_session_options* o) {
  if (!o) return;
  o->backend = "cpu";
  o->n_threads = 1;
  o->fp16 = 0;
  o->device = 0;
}

mega_session* mega_session_create_with_options(const mega_model* model, const mega_session_options* options,
                                               mega_status* status) {
  try {
    g_load_error.clear();
    mega_session_options o;
    mega_session_options_init(&o);
    if (options) o = *options;
    std::string backend = o.backend ? o.backend : "cpu";
    if (backend == "auto") backend = mega::default_backend();
    const bool known = backend == "cpu" || backend == "reference" || backend == "cuda";
    if (!model || !known || o.n_threads < 1 || o.n_threads > 16 || (o.fp16 != 0 && o.fp16 != 1) || o.device < 0) {
      g_load_error = !model  ? "null model"
                     : !known ? "unknown backend '" + backend + "' (cpu, reference, cuda or auto)"
                         : "bad session option (n_threads 1..16, fp16 0 or 1, device >= 0)";
      set_status(status, MEGA_ERR_INVALID_ARGUMENT);
      return nullptr;
    }
    mega::EngineOptions eo;
    eo.n_threads = o.n_threads;
    eo.fp16 = o.fp16 != 0;
    eo.device = o.device;
    mega::Status st = mega::Status::ok;
    auto e = mega::create_engine(backend, model->model, eo, &g_load_error, &st);
    set_status(status, to_c(st));
    if (!e) return nullptr;
    return new mega_session(std::move(e));
  } catch (...) {
    set_status(status, MEGA_ERR_OUT_OF_MEMORY);
    return nullptr;
  }
}

mega_session* mega_session_create(const mega_model* model, mega_status* status) {
  return mega_session_create_with_options(model, nullptr, status);
}

const char* mega_session_backend(const mega_session* s) { return s ? s->session->backend() : ""; }

void mega_session_free(mega_session* s) { delete s; }

void mega_session_reset(mega_session* s) {
  if (s) s->stream.reset();
}

mega_status mega_session_push(mega_session* s, const float* samples, int64_t n, int64_t* n_consumed,
                              int32_t* chunk_done, float* logits) {
  if (!s || !n_consumed || !chunk_done) return MEGA_ERR_INVALID_ARGUMENT;
  bool done = false;
  const mega::Status st = s->stream.push(samples, n, n_consumed, &done);
  *chunk_done = done ? 1 : 0;
  if (st == mega::Status::ok && done && logits) {
    const auto& r = s->session->last_result();
    std::memcpy(logits, r.logits, sizeof(float) * size_t(s->session->model().hparams().n_classes));
  }
  return to_c(st);
}

mega_status mega_session_classify(mega_session* s, const float* samples, int64_t n, float* logits) {
  if (!s) return MEGA_ERR_INVALID_ARGUMENT;
  const mega::Status st = s->session->classify_clip(samples, n, logits);
  s->stream.restarted();  // classify_clip resets the stream
  return to_c(st);
}

mega_status mega_session_stats(const mega_session* s, int64_t* n_nonfinite_samples, int64_t* n_clamped_samples,
                               int64_t* n_state_resets) {
  if (!s) return MEGA_ERR_INVALID_ARGUMENT;
  const mega::StreamStats st = s->session->stats();
  if (n_nonfinite_samples) *n_nonfinite_samples = st.n_nonfinite_samples;
  if (n_clamped_samples) *n_clamped_samples = st.n_clamped_samples;
  if (n_state_resets) *n_state_resets = st.n_state_resets;
  return MEGA_OK;
}

mega_status mega_session_self_test(mega_session* s, float* max_abs_diff) {
  if (!s) return MEGA_ERR_INVALID_ARGUMENT;
  const mega::Status st = s->session->self_test(max_abs_diff);
  s->stream.restarted();  // through classify_clip, which resets the stream
  return to_c(st);
}

void mega_detector_options_init(mega_detector_options* o) {
  if (!o) return;
  o->struct_size = uint32_t(sizeof(mega_detector_options));
  o->thresholds = nullptr;
  o->n_thresholds = 0;
  o->threshold = -1.0f;
  o->smoothing_hops = -1;
  o->refractory_ms = -1;
  o->sensitivity = -1.0f;
}

mega_detector* mega_detector_create(const mega_model* model, const mega_detector_options* options,
                                    mega_status* status) {
  try {
    g_load_error.clear();
    mega_detector_options o;
    mega_detector_options_init(&o);
    if (options) o = *options;
    auto refuse = [&](const std::string& why) -> mega_detector* {
      g_load_error = why;
      set_status(status, MEGA_ERR_INVALID_ARGUMENT);
      return nullptr;
    };
    if (!model) return refuse("null model");
    if (o.struct_size != sizeof(mega_detector_options)) {
      return refuse("mega_detector_options.struct_size is " + std::to_string(o.struct_size) + ", not " +
                    std::to_string(sizeof(mega_detector_options)) + ": fill the options with mega_detector_options_init()");
    }
    if (o.n_thresholds < 0 || (o.thresholds == nullptr) != (o.n_thresholds == 0)) {
      return refuse("thresholds and n_thresholds: both set (n_thresholds > 0) or neither");
    }
    mega::DetectorOverrides ov;
    if (o.thresholds) ov.thresholds.assign(o.thresholds, o.thresholds + o.n_thresholds);
    ov.threshold = o.threshold;
    ov.smoothing_hops = o.smoothing_hops;
    ov.refractory_ms = o.refractory_ms;
    ov.sensitivity = o.sensitivity;
    std::unique_ptr<mega_detector> d(new mega_detector);
    d->model = model->model;
    std::string err;
    if (!mega::Detector::config_for_model(*d->model, ov, &d->config, &err)) return refuse(err);
    d->detector = mega::Detector::create(d->model->labels(), d->config, &err);
    if (!d->detector) return refuse(err);
    set_status(status, MEGA_OK);
    return d.release();
  } catch (...) {
    set_status(status, MEGA_ERR_OUT_OF_MEMORY);
    return nullptr;
  }
}

void mega_detector_free(mega_detector* d) { delete d; }

void mega_detector_reset(mega_detector* d) {
  if (d) d->detector->reset();
}

mega_status mega_detector_settings(const mega_detector* d, float* thresholds, int32_t* smoothing_hops,
                                   int32_t* refractory_ms) {
  if (!d) return MEGA_ERR_INVALID_ARGUMENT;
  if (thresholds) std::memcpy(thresholds, d->config.thresholds.data(), sizeof(float) * d->config.thresholds.size());
  if (smoothing_hops) *smoothing_hops = d->config.smoothing_hops;
  if (refractory_ms) *refractory_ms = d->config.refractory_ms;
  return MEGA_OK;
}

namespace {

// A detection as the C API reports it; end_sample: where the firing chunk ended in the stream.
void describe(const mega_detector* d, const mega::Detection& det, int64_t end_sample, mega_detection* out) {
  if (!out) return;
  const mega::HParams& hp = d->model->hparams();
  out->label_index = det.label;
  out->label = d->model->labels()[size_t(det.label)].c_str();
  out->score = det.score;
  out->time_s = mega::Detector::event_time_s(det, end_sample, hp.chunk_samples(), hp.sample_rate);
  out->hop_index = det.hop_index;
}

// The keyword stream's detections into the caller's array (the callers
// checked that it holds them all: one per completed chunk, one for a flush).
class Collect final : public mega::DetectionSink {
 public:
  Collect(const mega_detector* d, mega_detection* out, int32_t capacity) : d_(d), out_(out), capacity_(capacity) {}
  void on_detection(int64_t end_sample, const mega::Detection& det) override {
    if (n_ < capacity_) describe(d_, det, end_sample, out_ + n_++);
  }
  int32_t count() const { return n_; }

 private:
  const mega_detector* d_;
  mega_detection* out_;
  int32_t capacity_;
  int32_t n_ = 0;
};

bool same_labels(const mega_session* s, const mega_detector* d) {
  const mega::Model& a = s->session->model();
  const mega::Model& b = *d->model;
  return &a == &b || a.labels() == b.labels();
}

}  // namespace

mega_status mega_detector_update(mega_detector* d, const float* logits, mega_detection* out, int32_t* fired) {
  if (fired) *fired = 0;
  if (!d || !logits || !fired) return MEGA_ERR_INVALID_ARGUMENT;
  // a NaN or infinity would sit in the smoothing window for smoothing_hops
  // hops and mute every keyword: refused before the detector is touched
  const size_t n = d->model->labels().size();
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(logits[i])) return MEGA_ERR_INVALID_ARGUMENT;
  }
  // the detector's own hop count stands for the stream position (hop_index is the hop about to be updated)
  const int64_t end_sample = (d->detector->hops_seen() + 1) * d->model->hparams().chunk_samples();
  mega::Detection det;
  *fired = d->detector->update(logits, &det) ? 1 : 0;
  if (*fired) describe(d, det, end_sample, out);
  return MEGA_OK;
}

mega_status mega_session_detect(mega_session* s, mega_detector* d, const float* samples, int64_t n,
                                mega_detection* out, int32_t capacity, int32_t* n_out) {
  if (n_out) *n_out = 0;
  if (!s || !d || !n_out || n < 0 || (n > 0 && !samples) || capacity < 0 || (capacity > 0 && !out) ||
      !same_labels(s, d)) {
    return MEGA_ERR_INVALID_ARGUMENT;
  }
  if (s->stream.chunks_completed_by(n) > capacity) return MEGA_ERR_INVALID_ARGUMENT;
  Collect found(d, out, capacity);
  const mega::Status st = s->stream.feed(*d->detector, samples, n, found);
  *n_out = found.count();
  return to_c(st);
}

mega_status mega_session_detect_flush(mega_session* s, mega_detector* d, mega_detection* out, int32_t capacity,
                                      int32_t* n_out) {
  if (n_out) *n_out = 0;
  if (!s || !d || !n_out || capacity < 0 || (capacity > 0 && !out) || !same_labels(s, d)) {
    return MEGA_ERR_INVALID_ARGUMENT;
  }
  if ((s->stream.pending() > 0 || d->detector->hops_seen() > 0) && capacity < 1) return MEGA_ERR_INVALID_ARGUMENT;
  Collect found(d, out, capacity);
  const mega::Status st = s->stream.flush(*d->detector, found);
  *n_out = found.count();
  return to_c(st);
}

const char* mega_status_string(mega_status status) { return mega::status_name(mega::Status(status)); }

// MEGA_KWS_VERSION_STRING: project(... VERSION) in the top-level CMakeLists.txt
const char* mega_version(void) { return MEGA_KWS_VERSION_STRING; }

}  // extern "C"
