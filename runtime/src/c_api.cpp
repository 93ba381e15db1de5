// The C API: thin wrappers over the C++ classes that never let an exception
// (for example std::bad_alloc from a message string) cross the boundary.
#include "mega/mega_kws.h"

#include <cstring>
#include <new>
#include <string>

#include "mega/engine.hpp"
#include "mega/mega.hpp"

struct mega_model {
  std::shared_ptr<const mega::Model> model;
};

// Every session is an engine (mega/engine.hpp): the CPU one wraps mega::Session.
struct mega_session {
  std::unique_ptr<mega::Engine> session;
};

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
    if (!model || (backend != "cpu" && backend != "cuda") || o.n_threads < 1 || o.n_threads > 16 ||
        (o.fp16 != 0 && o.fp16 != 1) || o.device < 0) {
      g_load_error = !model ? "null model"
                     : backend != "cpu" && backend != "cuda"
                         ? "unknown backend '" + backend + "' (cpu, cuda or auto)"
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
    return new mega_session{std::move(e)};
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
  if (s) s->session->reset();
}

mega_status mega_session_push(mega_session* s, const float* samples, int64_t n, int64_t* n_consumed,
                              int32_t* chunk_done, float* logits) {
  if (!s || !n_consumed || !chunk_done) return MEGA_ERR_INVALID_ARGUMENT;
  bool done = false;
  mega::Status st = s->session->push(samples, n, n_consumed, &done);
  *chunk_done = done ? 1 : 0;
  if (st == mega::Status::ok && done && logits) {
    const auto& r = s->session->last_result();
    std::memcpy(logits, r.logits, sizeof(float) * size_t(s->session->model().hparams().n_classes));
  }
  return to_c(st);
}

mega_status mega_session_classify(mega_session* s, const float* samples, int64_t n, float* logits) {
  if (!s) return MEGA_ERR_INVALID_ARGUMENT;
  return to_c(s->session->classify_clip(samples, n, logits));
}

mega_status mega_session_stats(const mega_session* s, int64_t* n_nonfinite_samples, int64_t* n_clamped_samples,
                               int64_t* n_state_resets) {
  if (!s) return MEGA_ERR_INVALID_ARGUMENT;
  const mega::SessionStats st = s->session->stats();
  if (n_nonfinite_samples) *n_nonfinite_samples = st.n_nonfinite_samples;
  if (n_clamped_samples) *n_clamped_samples = st.n_clamped_samples;
  if (n_state_resets) *n_state_resets = st.n_state_resets;
  return MEGA_OK;
}

mega_status mega_session_self_test(mega_session* s, float* max_abs_diff) {
  if (!s) return MEGA_ERR_INVALID_ARGUMENT;
  return to_c(s->session->self_test(max_abs_diff));
}

const char* mega_status_string(mega_status status) { return mega::status_name(mega::Status(status)); }

}  // extern "C"
