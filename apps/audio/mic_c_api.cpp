// SPDX-License-Identifier: Apache-2.0
// The microphone's C API (mega/mega_kws_audio.h): keyword_spotter listen's
// path (MicSource -> StreamPipeline -> session -> detector) behind status
// codes, for programs and the Python package. The pipeline runs on the
// reader's thread, inside mega_mic_read, until a detection or the reader's
// timeout stops it. Nothing prints; no exception crosses the boundary.
#include "mega/mega_kws_audio.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "audio_devices.h"
#include "c_api_handles.h"
#include "mic_source.h"
#include "stream_pipeline.h"

namespace {

thread_local std::string g_error;

// PortAudio's initialization, termination and device opening are not
// thread-safe. Timed: a close left to finish in the background (close_source)
// may hold it for as long as the wedged device blocks.
std::timed_mutex g_portaudio;
constexpr auto kLockWait = std::chrono::seconds(5);
constexpr auto kCloseWait = std::chrono::seconds(3);  // stopping a device; past it the close goes on in the background

constexpr const char* kNoInputDevices = "no audio input devices (is there a sound card, and a sound server running?)";
constexpr int32_t kQueueCapacity = 16;  // detections one read may make: the refractory time keeps it to one or two
constexpr int32_t kMaxTimeoutMs = 600000;

mega_status fail(mega_status* status, mega_status s, const std::string& why) {
  g_error = why;
  if (status) *status = s;
  return s;
}

// PortAudio's lock, or false after kLockWait (a wedged device's close still holds it).
bool lock_portaudio(std::unique_lock<std::timed_mutex>* lock, mega_status* status) {
  *lock = std::unique_lock<std::timed_mutex>(g_portaudio, std::defer_lock);
  if (lock->try_lock_for(kLockWait)) return true;
  fail(status, MEGA_ERR_DEVICE, "the audio system is still busy closing a device that stopped responding");
  return false;
}

// Stops and closes the device (abort: at once, for a broken one) on a thread
// of its own, waiting kCloseWait for it: PortAudio has no timeouts, and a
// device stuck in a read (a wedged driver or server) blocks the close too.
// The library cannot exit the process as keyword_spotter's watchdog does; it
// leaves such a close to finish in the background instead of hanging.
void close_source(std::unique_ptr<kws::MicSource> source, bool abort) {
  struct Closing {
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;
  };
  auto closing = std::make_shared<Closing>();
  std::thread t([closing, abort, mic = source.release()] {
    {
      std::lock_guard<std::timed_mutex> lock(g_portaudio);
      mic->close(abort);
      delete mic;  // the capture's ring lives until the stream is closed
    }
    std::lock_guard<std::mutex> lock(closing->mutex);
    closing->done = true;
    closing->cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(closing->mutex);
  const bool done = closing->cv.wait_for(lock, kCloseWait, [&] { return closing->done; });
  lock.unlock();
  if (done) {
    t.join();
  } else {
    t.detach();
  }
}

// The pipeline's observer for one read: queues the detections, and stops
// the pipeline at the first one or at the reader's deadline.
class Collector : public kws::StreamObserver {
 public:
  explicit Collector(std::shared_ptr<const mega::Model> model) : model_(std::move(model)) {}

  void arm(kws::Clock::time_point deadline) {
    deadline_ = deadline;
    stop_ = 0;
  }
  const volatile std::sig_atomic_t* stop_flag() const { return &stop_; }

  void on_detection(int64_t end_sample, const mega::Detection& d) override {
    stop_ = 1;
    if (n_ == kQueueCapacity) return;  // cannot happen (see kQueueCapacity); never overwrite
    const mega::HParams& hp = model_->hparams();
    mega_detection& out = queue_[(head_ + n_++) % kQueueCapacity];
    out.label_index = d.label;
    out.label = model_->labels()[size_t(d.label)].c_str();
    out.score = d.score;
    out.time_s = mega::Detector::event_time_s(d, end_sample, hp.chunk_samples(), hp.sample_rate);
    out.hop_index = d.hop_index;
  }
  void on_tick(kws::Clock::time_point now) override {
    if (now >= deadline_) stop_ = 1;
  }

  int32_t pending() const { return n_; }
  // Moves up to capacity queued detections to out; returns how many.
  int32_t take(mega_detection* out, int32_t capacity) {
    const int32_t n = std::min(n_, capacity);
    for (int32_t i = 0; i < n; ++i) out[i] = queue_[(head_ + i) % kQueueCapacity];
    head_ = (head_ + n) % kQueueCapacity;
    n_ -= n;
    return n;
  }

 private:
  std::shared_ptr<const mega::Model> model_;  // the label texts
  kws::Clock::time_point deadline_;
  volatile std::sig_atomic_t stop_ = 0;
  mega_detection queue_[kQueueCapacity] = {};
  int32_t head_ = 0, n_ = 0;
};

}  // namespace

struct mega_mic {
  explicit mega_mic(std::shared_ptr<const mega::Model> m) : model(m), collector(std::move(m)) {}
  ~mega_mic() {
    pipeline.reset();
    if (source) close_source(std::move(source), failed);
  }

  std::shared_ptr<const mega::Model> model;
  std::unique_ptr<kws::MicSource> source;
  std::unique_ptr<kws::StreamPipeline> pipeline;
  Collector collector;
  bool failed = false;  // no more audio: the reads after the queued detections say why
  mega_status failure = MEGA_OK;
  std::string why;
};

namespace {

// What a finished run of the pipeline means for the reader.
void note_end(mega_mic* m, kws::StreamEnd end) {
  if (end == kws::StreamEnd::stopped) return;
  m->failed = true;
  m->failure = MEGA_ERR_DEVICE;
  switch (end) {
    case kws::StreamEnd::stopped:
      break;
    case kws::StreamEnd::ended:
      m->why = "the input stream ended";
      break;
    case kws::StreamEnd::source_failed:
      m->why = "device " + std::to_string(m->source->device()) + " '" + m->source->device_name() + "' (" +
               m->source->host_api() + "): " + m->source->error();
      break;
    case kws::StreamEnd::inference_failed:
      m->failure = static_cast<mega_status>(static_cast<int32_t>(m->pipeline->status()));
      m->why = std::string("inference failed: ") + mega::status_name(m->pipeline->status());
      break;
    case kws::StreamEnd::resampler_failed:
      m->why = m->pipeline->error();
      break;
  }
}

void copy_text(char* dst, size_t size, const char* src) {
  std::snprintf(dst, size, "%s", src ? src : "");
}

}  // namespace

extern "C" {

void mega_audio_silence_library_messages(void) { kws::set_audio_library_messages(false); }

const char* mega_audio_error(void) { return g_error.c_str(); }

mega_status mega_audio_input_devices(mega_audio_device* out, int32_t capacity, int32_t* n_devices) {
  try {
    g_error.clear();
    if (!n_devices || capacity < 0 || (capacity > 0 && !out)) {
      return fail(nullptr, MEGA_ERR_INVALID_ARGUMENT, "n_devices is NULL, or capacity < 0, or out NULL with capacity > 0");
    }
    *n_devices = 0;
    std::unique_lock<std::timed_mutex> lock;
    if (!lock_portaudio(&lock, nullptr)) return MEGA_ERR_DEVICE;
    setenv("JACK_NO_START_SERVER", "1", 0);  // listing must not start a JACK server
    const PaError e = Pa_Initialize();
    if (e != paNoError) return fail(nullptr, MEGA_ERR_DEVICE, std::string("cannot initialize PortAudio: ") + Pa_GetErrorText(e));
    const PaDeviceIndex def = Pa_GetDefaultInputDevice();
    for (PaDeviceIndex i = 0, n = Pa_GetDeviceCount(); i < n; ++i) {
      const PaDeviceInfo* d = Pa_GetDeviceInfo(i);
      if (!d || d->maxInputChannels <= 0) continue;
      if (*n_devices < capacity) {
        mega_audio_device& o = out[*n_devices];
        o.index = int32_t(i);
        o.is_default = i == def ? 1 : 0;
        o.max_input_channels = d->maxInputChannels;
        o.default_sample_rate = d->defaultSampleRate;
        copy_text(o.name, sizeof o.name, d->name);
        copy_text(o.host_api, sizeof o.host_api, kws::host_api_name(d));
      }
      ++*n_devices;
    }
    Pa_Terminate();
    return MEGA_OK;
  } catch (...) {
    return MEGA_ERR_OUT_OF_MEMORY;
  }
}

void mega_mic_options_init(mega_mic_options* o) {
  if (!o) return;
  o->struct_size = uint32_t(sizeof(mega_mic_options));
  o->device = nullptr;
}

mega_mic* mega_mic_open(mega_session* session, mega_detector* detector, const mega_mic_options* options,
                        mega_status* status) {
  try {
    g_error.clear();
    mega_mic_options o;
    mega_mic_options_init(&o);
    if (options) o = *options;
    if (!session || !detector) return fail(status, MEGA_ERR_INVALID_ARGUMENT, "null session or detector"), nullptr;
    if (o.struct_size != sizeof(mega_mic_options)) {
      fail(status, MEGA_ERR_INVALID_ARGUMENT,
           "mega_mic_options.struct_size is " + std::to_string(o.struct_size) + ", not " +
               std::to_string(sizeof(mega_mic_options)) + ": fill the options with mega_mic_options_init()");
      return nullptr;
    }
    const mega::Model& model = session->session->model();
    if (model.labels() != detector->model->labels()) {
      return fail(status, MEGA_ERR_INVALID_ARGUMENT, "the detector is for another model than the session's"), nullptr;
    }
    if (!model.streamable()) {
      fail(status, MEGA_ERR_NOT_STREAMABLE,
           "listening needs a streaming (unidirectional) model; this one is bidirectional and classifies whole "
           "clips only");
      return nullptr;
    }
    mega_session_reset(session);  // the detections' times count from the microphone's start
    mega_detector_reset(detector);
    std::unique_ptr<mega_mic> m(new mega_mic(detector->model));
    std::string err;
    bool not_found = false;
    std::unique_lock<std::timed_mutex> lock;
    if (!lock_portaudio(&lock, status)) return nullptr;
    m->source = kws::MicSource::open(o.device ? o.device : "", model.hparams().sample_rate, kNoInputDevices, &err,
                                     &not_found);
    if (!m->source) return fail(status, not_found ? MEGA_ERR_NO_DEVICE : MEGA_ERR_DEVICE, err), nullptr;
    m->pipeline = kws::StreamPipeline::create(*m->source, *session->session, *detector->detector, &err);
    if (!m->pipeline) return fail(status, MEGA_ERR_DEVICE, err), nullptr;
    if (!m->source->start(&err)) return fail(status, MEGA_ERR_DEVICE, err), nullptr;
    if (status) *status = MEGA_OK;
    return m.release();  // on the early returns its destructor closes the device under the lock, released first
  } catch (...) {
    if (status) *status = MEGA_ERR_OUT_OF_MEMORY;
    return nullptr;
  }
}

mega_status mega_mic_read(mega_mic* m, mega_detection* out, int32_t capacity, int32_t timeout_ms, int32_t* n_out) {
  if (n_out) *n_out = 0;
  if (!m || !out || capacity < 1 || !n_out || timeout_ms < 0 || timeout_ms > kMaxTimeoutMs) {
    return fail(nullptr, MEGA_ERR_INVALID_ARGUMENT, "mega_mic_read: null mic, out or n_out, capacity < 1, or "
                                                    "timeout_ms not in 0..600000");
  }
  try {
    if (m->collector.pending() == 0 && !m->failed) {
      m->collector.arm(kws::Clock::now() + std::chrono::milliseconds(timeout_ms));
      kws::StreamOptions opts;
      opts.stop = m->collector.stop_flag();
      note_end(m, m->pipeline->run(opts, m->collector));
    }
    *n_out = m->collector.take(out, capacity);
    if (*n_out == 0 && m->failed) return fail(nullptr, m->failure, m->why);
    return MEGA_OK;
  } catch (...) {  // a message string that could not be allocated
    return MEGA_ERR_OUT_OF_MEMORY;
  }
}

mega_status mega_mic_stats(const mega_mic* m, double* seconds, int64_t* n_dropped_frames) {
  if (!m) return MEGA_ERR_INVALID_ARGUMENT;
  if (seconds) *seconds = double(m->pipeline->stats().n_samples) / double(m->model->hparams().sample_rate);
  if (n_dropped_frames) *n_dropped_frames = int64_t(m->source->overflow_frames());
  return MEGA_OK;
}

mega_status mega_mic_device(const mega_mic* m, int32_t* index, const char** name, double* sample_rate) {
  if (!m) return MEGA_ERR_INVALID_ARGUMENT;
  if (index) *index = m->source->device();
  if (name) *name = m->source->device_name().c_str();
  if (sample_rate) *sample_rate = m->source->format().rate;
  return MEGA_OK;
}

void mega_mic_close(mega_mic* m) { delete m; }

}  // extern "C"
