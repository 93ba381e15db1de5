// listen and devices: live keyword spotting on a PortAudio input.
//
// The capture callback (PortAudio's thread) only copies frames into a
// preallocated lock-free ring; this thread pops them, averages channels,
// resamples to the model's rate when the device cannot open it, streams them
// through the session and the detector, and watches the device: a stream
// that stops on its own, or audio that stops arriving, is an error (exit 4),
// never a hang.
#include <portaudio.h>
#include <samplerate.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "spsc_ring.h"

namespace kws {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kRingSeconds = 4.0;          // inference may fall this far behind before frames drop
constexpr double kFirstAudioTimeout = 5.0;    // PulseAudio's first callback can take ~2 s
constexpr double kStallTimeout = 3.0;         // no frames for this long after the first: the device is gone
constexpr double kStartTimeout = 10.0;        // opening the audio system (a hung sound server blocks it)
constexpr double kCleanupTimeout = 3.0;       // stopping a broken device must not hang the process
constexpr double kStatusInterval = 0.2;       // TTY status line refresh
constexpr double kLevelWindow = 0.1;          // seconds of audio behind the level meter
constexpr auto kIdleSleep = std::chrono::milliseconds(5);
constexpr size_t kBlockFrames = 2048;         // frames popped from the ring at a time
constexpr double kOverflowReportInterval = 5.0;  // at most one "falling behind" warning per this many seconds

// Test only (tests/test_listen.sh): KWS_TEST_CONSUMER_DELAY_MS=N makes the
// inference thread sleep N ms after each block it pops, as a machine too slow
// for the model would, so that the ring overflows.
std::chrono::milliseconds test_consumer_delay() {
  const char* v = std::getenv("KWS_TEST_CONSUMER_DELAY_MS");
  const long ms = v ? std::strtol(v, nullptr, 10) : 0;
  return std::chrono::milliseconds(std::max(0L, std::min(ms, 10000L)));
}

volatile std::sig_atomic_t g_stop_signal = 0;
void on_stop_signal(int sig) { g_stop_signal = sig; }

// SIGINT and SIGTERM only set a flag while listening; the previous handlers come back afterwards.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_, old_term_;
};

// Shared between the capture callback (producer) and the inference thread.
struct Capture {
  Capture(size_t frames, int channels) : ring(frames, size_t(channels)) {}
  SpscRing<float> ring;                        // interleaved frames at the device rate
  std::atomic<bool> stop{false};               // set by the inference thread
  std::atomic<uint64_t> frames_in{0};          // frames the device delivered (kept or dropped)
  std::atomic<uint64_t> host_overflows{0};     // callbacks PortAudio flagged paInputOverflow
  std::atomic<bool> finished{false};           // PortAudio's stream-finished callback ran
};

// Real-time: copy, count, return. No allocation, locking or I/O.
int capture_callback(const void* input, void* /*output*/, unsigned long n_frames,
                     const PaStreamCallbackTimeInfo* /*time*/, PaStreamCallbackFlags flags, void* user) {
  Capture* c = static_cast<Capture*>(user);
  if (input) c->ring.write(static_cast<const float*>(input), size_t(n_frames));
  c->frames_in.store(c->frames_in.load(std::memory_order_relaxed) + n_frames, std::memory_order_release);
  if (flags & paInputOverflow) {
    c->host_overflows.store(c->host_overflows.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  return c->stop.load(std::memory_order_relaxed) ? paComplete : paContinue;
}

void stream_finished(void* user) { static_cast<Capture*>(user)->finished.store(true, std::memory_order_release); }

// Pa_Initialize .. Pa_Terminate and the one stream, released on every path.
class PortAudio {
 public:
  ~PortAudio() { close(false); }
  PaError init() {
    const PaError e = Pa_Initialize();
    initialized_ = e == paNoError;
    return e;
  }
  PaStream* stream = nullptr;
  // Stops (or, for a broken device, aborts) and closes the stream, then terminates.
  void close(bool abort) {
    if (stream) {
      if (Pa_IsStreamStopped(stream) == 0) {
        if (abort) {
          Pa_AbortStream(stream);
        } else {
          Pa_StopStream(stream);
        }
      }
      Pa_CloseStream(stream);
      stream = nullptr;
    }
    if (initialized_) Pa_Terminate();
    initialized_ = false;
  }

 private:
  bool initialized_ = false;
};

// Exits the process if a PortAudio call has not returned in time: a wedged
// sound server or driver (PortAudio and ALSA have no timeouts of their own)
// must not turn into a hung keyword_spotter.
class Watchdog {
 public:
  Watchdog(double seconds, int exit_code, const char* what) {
    thread_ = std::thread([this, seconds, exit_code, what] {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "\nkeyword_spotter: %s did not finish within %.0f s (is the sound server hung?); "
                     "exiting\n", what, seconds);
        std::fflush(stderr);
        std::_Exit(exit_code);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

const char* host_api_name(const PaDeviceInfo* d) {
  const PaHostApiInfo* h = Pa_GetHostApiInfo(d->hostApi);
  return h && h->name ? h->name : "?";
}

bool is_input(const PaDeviceInfo* d) { return d && d->maxInputChannels > 0; }

int count_input_devices() {
  int n = 0;
  for (PaDeviceIndex i = 0, end = Pa_GetDeviceCount(); i < end; ++i) n += is_input(Pa_GetDeviceInfo(i)) ? 1 : 0;
  return n;
}

// One line per input device; '*' marks the default input.
void print_input_devices(FILE* out, bool json) {
  const PaDeviceIndex def = Pa_GetDefaultInputDevice();
  const PaDeviceIndex n = Pa_GetDeviceCount();
  int api_width = 8;
  for (PaDeviceIndex i = 0; i < n; ++i) {
    const PaDeviceInfo* d = Pa_GetDeviceInfo(i);
    if (is_input(d)) api_width = std::max(api_width, int(std::strlen(host_api_name(d))));
  }
  if (!json) std::fprintf(out, "    idx  inputs  default rate  %-*s  name\n", api_width, "host API");
  for (PaDeviceIndex i = 0; i < n; ++i) {
    const PaDeviceInfo* d = Pa_GetDeviceInfo(i);
    if (!is_input(d)) continue;
    const char* name = d->name ? d->name : "";
    if (json) {
      std::fprintf(out,
                   "{\"index\": %d, \"name\": \"%s\", \"host_api\": \"%s\", \"max_input_channels\": %d, "
                   "\"default_sample_rate\": %.0f, \"default\": %s}\n",
                   int(i), json_escape(name).c_str(), json_escape(host_api_name(d)).c_str(), d->maxInputChannels,
                   d->defaultSampleRate, i == def ? "true" : "false");
    } else {
      std::fprintf(out, "  %c %3d  %6d  %9.0f Hz  %-*s  %s\n", i == def ? '*' : ' ', int(i), d->maxInputChannels,
                   d->defaultSampleRate, api_width, host_api_name(d), name);
    }
  }
  if (!json) std::fprintf(out, "  (* = default input)\n");
}

void print_device_error_list(const char* why) {
  std::fprintf(stderr, "keyword_spotter: %s\n", why);
  if (count_input_devices() == 0) {
    std::fprintf(stderr, "keyword_spotter: no input devices (is a sound server running? see `keyword_spotter devices`)\n");
  } else {
    std::fprintf(stderr, "input devices:\n");
    print_input_devices(stderr, false);
  }
}

// The device p.device names (empty: the default input; digits: an index;
// otherwise a case-insensitive substring of the name), or paNoDevice after
// printing why.
PaDeviceIndex find_input_device(const std::string& want) {
  const PaDeviceIndex n = Pa_GetDeviceCount();
  if (want.empty()) {
    const PaDeviceIndex def = Pa_GetDefaultInputDevice();
    if (def == paNoDevice || !is_input(Pa_GetDeviceInfo(def))) {
      print_device_error_list("there is no default input device");
      return paNoDevice;
    }
    return def;
  }
  if (std::all_of(want.begin(), want.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    const long idx = want.size() <= 9 ? std::strtol(want.c_str(), nullptr, 10) : -1;
    if (idx < 0 || idx >= long(n) || !is_input(Pa_GetDeviceInfo(PaDeviceIndex(idx)))) {
      const std::string why = "device " + want + " is not an input device";
      print_device_error_list(why.c_str());
      return paNoDevice;
    }
    return PaDeviceIndex(idx);
  }
  const std::string needle = lower(want);
  PaDeviceIndex found = paNoDevice;
  int n_matches = 0;
  for (PaDeviceIndex i = 0; i < n; ++i) {
    const PaDeviceInfo* d = Pa_GetDeviceInfo(i);
    if (!is_input(d) || !d->name) continue;
    const std::string name = lower(d->name);
    if (name.find(needle) == std::string::npos) continue;
    // An exact name wins over substrings; otherwise the first match.
    if (name == needle) {
      found = i;
      n_matches = 1;
      break;
    }
    if (n_matches++ == 0) found = i;
  }
  if (found == paNoDevice) {
    const std::string why = "no input device matches '" + want + "'";
    print_device_error_list(why.c_str());
    return paNoDevice;
  }
  if (n_matches > 1) {
    std::fprintf(stderr, "keyword_spotter: %d input devices match '%s'; using the first, %d '%s'\n", n_matches,
                 want.c_str(), int(found), Pa_GetDeviceInfo(found)->name);
  }
  return found;
}

struct StreamFormat {
  int channels = 1;
  double rate = 0.0;
};

PaStreamParameters input_params(PaDeviceIndex dev, int channels) {
  PaStreamParameters in;
  std::memset(&in, 0, sizeof in);
  in.device = dev;
  in.channelCount = channels;
  in.sampleFormat = paFloat32;
  // The high default latency: keyword spotting works in chunks of tens of
  // milliseconds anyway, and larger buffers survive a busy machine.
  in.suggestedLatency = Pa_GetDeviceInfo(dev)->defaultHighInputLatency;
  in.hostApiSpecificStreamInfo = nullptr;
  return in;
}

// Mono at the model's rate if the device can; then two channels (averaged);
// then the device's default rate (resampled here). PortAudio never resamples.
bool choose_format(PaDeviceIndex dev, double model_rate, StreamFormat* out, PaError* last_error) {
  const PaDeviceInfo* d = Pa_GetDeviceInfo(dev);
  const double rates[2] = {model_rate, d->defaultSampleRate};
  *last_error = paNoError;
  for (double rate : rates) {
    if (!(rate > 0.0)) continue;
    for (int ch = 1; ch <= std::min(2, d->maxInputChannels); ++ch) {
      const PaStreamParameters in = input_params(dev, ch);
      const PaError e = Pa_IsFormatSupported(&in, nullptr, rate);
      if (e == paFormatIsSupported) {
        out->channels = ch;
        out->rate = rate;
        return true;
      }
      *last_error = e;
    }
  }
  return false;
}

// libsamplerate, streaming: state carried across blocks.
struct SrcDeleter {
  void operator()(SRC_STATE* s) const { src_delete(s); }
};
using SrcPtr = std::unique_ptr<SRC_STATE, SrcDeleter>;

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

}  // namespace

int cmd_devices(const Params& p) {
  // A keyword spotter must not start a JACK server as a side effect.
  setenv("JACK_NO_START_SERVER", "1", 0);
  Watchdog watchdog(kStartTimeout, kExitDevice, "listing the audio devices");
  const PaError e = Pa_Initialize();
  if (e != paNoError) {
    std::fprintf(stderr, "keyword_spotter: cannot initialize PortAudio: %s\n", Pa_GetErrorText(e));
    return kExitDevice;
  }
  int rc = kExitOk;
  if (Pa_GetDeviceCount() < 0) {
    std::fprintf(stderr, "keyword_spotter: cannot list audio devices: %s\n", Pa_GetErrorText(Pa_GetDeviceCount()));
    rc = kExitDevice;
  } else if (count_input_devices() == 0) {
    std::fprintf(stderr, "keyword_spotter: no input devices (is a sound server running?)\n");
    rc = kExitDevice;
  } else {
    print_input_devices(stdout, p.json);
    std::fflush(stdout);
  }
  Pa_Terminate();
  return rc;
}

int cmd_listen(const Params& p) {
  StopSignals signals;
  auto model = load_model(p);
  if (!model) return kExitModel;
  const mega::Model& m = *model;
  if (!m.streamable()) {
    std::fprintf(stderr,
                 "keyword_spotter: listen needs a streaming (unidirectional) model; %s is bidirectional and "
                 "classifies whole clips only\n",
                 p.model_path.c_str());
    return kExitUsage;
  }
  auto session = make_session(model, p, 0);
  if (!session) return kExitModel;
  auto detector = make_detector(m, p);
  if (!detector) return kExitUsage;
  const int32_t model_rate = m.hparams().sample_rate;
  const double chunk_ms = 1000.0 * double(m.hparams().chunk_samples()) / model_rate;

  setenv("JACK_NO_START_SERVER", "1", 0);
  // Declared before pa so they outlive it: the stream calls into cap until
  // it is closed, and the watchdog also guards pa's cleanup on early returns.
  std::unique_ptr<Capture> cap;
  std::optional<Watchdog> watchdog;
  watchdog.emplace(kStartTimeout, kExitDevice, "opening the audio device");
  PortAudio pa;
  PaError e = pa.init();
  if (e != paNoError) {
    std::fprintf(stderr, "keyword_spotter: cannot initialize PortAudio: %s\n", Pa_GetErrorText(e));
    return kExitDevice;
  }
  if (Pa_GetDeviceCount() < 0) {
    std::fprintf(stderr, "keyword_spotter: cannot list audio devices: %s\n", Pa_GetErrorText(Pa_GetDeviceCount()));
    return kExitDevice;
  }
  const PaDeviceIndex dev = find_input_device(p.device);
  if (dev == paNoDevice) return kExitDevice;
  const PaDeviceInfo* info = Pa_GetDeviceInfo(dev);  // owned by PortAudio: gone after Pa_Terminate
  const std::string device_name = info->name ? info->name : "", device_api = host_api_name(info);
  StreamFormat fmt;
  if (!choose_format(dev, double(model_rate), &fmt, &e)) {
    std::fprintf(stderr, "keyword_spotter: device %d '%s' cannot capture float32 audio at %d or %.0f Hz: %s\n",
                 int(dev), info->name, model_rate, info->defaultSampleRate, Pa_GetErrorText(e));
    return kExitDevice;
  }
  const bool resample = fmt.rate != double(model_rate);
  const double ratio = double(model_rate) / fmt.rate;

  // Everything the loop needs is allocated before the stream starts.
  cap.reset(new Capture(size_t(kRingSeconds * fmt.rate), fmt.channels));
  std::vector<float> raw(kBlockFrames * size_t(fmt.channels));
  std::vector<float> mono(kBlockFrames);
  std::vector<float> resampled(resample ? size_t(std::ceil(kBlockFrames * ratio)) + 64 : 0);
  SrcPtr src;
  if (resample) {
    int src_err = 0;
    src.reset(src_new(SRC_SINC_MEDIUM_QUALITY, 1, &src_err));
    if (!src) {
      std::fprintf(stderr, "keyword_spotter: cannot create the resampler: %s\n", src_strerror(src_err));
      return kExitFailed;
    }
  }

  const PaStreamParameters in = input_params(dev, fmt.channels);
  e = Pa_OpenStream(&pa.stream, &in, nullptr, fmt.rate, paFramesPerBufferUnspecified, paNoFlag, capture_callback,
                    cap.get());
  if (e != paNoError) {
    pa.stream = nullptr;
    std::fprintf(stderr, "keyword_spotter: cannot open device %d '%s' (%s): %s\n", int(dev), info->name,
                 host_api_name(info), Pa_GetErrorText(e));
    return kExitDevice;
  }
  Pa_SetStreamFinishedCallback(pa.stream, stream_finished);
  if (g_stop_signal) return kExitOk;  // interrupted while loading
  const Clock::time_point started = Clock::now();
  e = Pa_StartStream(pa.stream);
  if (e != paNoError) {
    std::fprintf(stderr, "keyword_spotter: cannot start device %d '%s' (%s): %s\n", int(dev), info->name,
                 host_api_name(info), Pa_GetErrorText(e));
    return kExitDevice;
  }
  watchdog.reset();
  const PaStreamInfo* si = Pa_GetStreamInfo(pa.stream);
  std::fprintf(stderr, "keyword_spotter: listening on device %d '%s' (%s): %d channel%s at %.0f Hz", int(dev),
               info->name, host_api_name(info), fmt.channels, fmt.channels > 1 ? "s (averaged)" : "", fmt.rate);
  if (resample) std::fprintf(stderr, ", resampled to %d Hz", model_rate);
  std::fprintf(stderr, ", input latency %.1f ms; chunk %.1f ms; %s\n", si ? 1000.0 * si->inputLatency : 0.0, chunk_ms,
               p.seconds > 0 ? ("stopping after " + format_seconds(p.seconds)).c_str() : "Ctrl-C to stop");
  std::fflush(stderr);

  const bool status_line = !p.json && isatty(fileno(stdout));
  const int64_t limit = p.seconds > 0 ? int64_t(std::llround(p.seconds * model_rate)) : -1;
  int64_t consumed = 0, n_chunks = 0, n_detections = 0;
  double infer_total_s = 0.0, infer_max_s = 0.0;
  std::string last_label;
  double last_time = 0.0;
  // Level meter: mean square over ~kLevelWindow of device-rate audio.
  const int64_t level_window = std::max<int64_t>(1, int64_t(kLevelWindow * fmt.rate));
  double level_acc = 0.0, level_db = -120.0;
  int64_t level_n = 0;
  uint64_t seen_frames = 0;
  bool got_audio = false;
  double first_audio_s = 0.0;
  Clock::time_point last_progress = started, last_check = started, last_status = started;
  Clock::time_point last_overflow_report = started;
  uint64_t reported_overflow = 0;
  const std::chrono::milliseconds consumer_delay = test_consumer_delay();
  int rc = kExitOk;
  std::string device_error;
  mega::Status push_status = mega::Status::ok;
  mega::Detection det;

  double lag_total_s = 0.0, lag_max_s = 0.0;
  auto on_chunk = [&](const mega::ChunkResult& r) {
    ++n_chunks;
    // How far this chunk's end lags the newest captured audio: ring backlog
    // plus resampler delay plus this chunk's inference.
    const uint64_t kept = cap->frames_in.load(std::memory_order_acquire) - cap->ring.overflow_frames();
    const double lag = std::max(0.0, double(kept) / fmt.rate - double(r.end_sample) / model_rate);
    lag_total_s += lag;
    lag_max_s = std::max(lag_max_s, lag);
    if (!detector->update(r.logits, &det)) return;
    ++n_detections;
    last_label = m.labels()[size_t(det.label)];
    if (status_line) std::fputs("\r\033[K", stdout);
    last_time = print_detection(m, p, r.end_sample, det);
  };
  // Feeds model-rate samples; false once the --seconds limit is reached.
  auto feed = [&](const float* x, int64_t n) -> bool {
    if (limit >= 0) n = std::min(n, limit - consumed);
    const Clock::time_point t0 = Clock::now();
    const int64_t chunks_before = n_chunks;
    push_status = session->push_all(x, n, on_chunk);
    if (n_chunks > chunks_before) {
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count() / double(n_chunks - chunks_before);
      infer_total_s += dt * double(n_chunks - chunks_before);
      infer_max_s = std::max(infer_max_s, dt);
    }
    consumed += n;
    return push_status == mega::Status::ok && (limit < 0 || consumed < limit);
  };

  bool running = true;
  while (running) {
    if (g_stop_signal) break;
    const size_t got = cap->ring.read(raw.data(), kBlockFrames);
    const Clock::time_point now = Clock::now();
    const uint64_t frames_in = cap->frames_in.load(std::memory_order_acquire);
    if (frames_in != seen_frames) {
      if (!got_audio) first_audio_s = std::chrono::duration<double>(now - started).count();
      seen_frames = frames_in;
      got_audio = true;
      last_progress = now;
    }
    if (got > 0) {
      for (size_t i = 0; i < got; ++i) {
        float v = raw[i * size_t(fmt.channels)];
        if (fmt.channels == 2) v = 0.5f * (v + raw[i * 2 + 1]);
        mono[i] = v;
        level_acc += double(v) * double(v);
        if (++level_n >= level_window) {
          level_db = 10.0 * std::log10(level_acc / double(level_n) + 1e-12);
          level_acc = 0.0;
          level_n = 0;
        }
      }
      if (!resample) {
        running = feed(mono.data(), int64_t(got));
      } else {
        SRC_DATA d;
        std::memset(&d, 0, sizeof d);
        d.data_in = mono.data();
        d.input_frames = long(got);
        d.src_ratio = ratio;
        d.end_of_input = 0;
        while (running && d.input_frames > 0) {
          d.data_out = resampled.data();
          d.output_frames = long(resampled.size());
          const int se = src_process(src.get(), &d);
          if (se != 0) {
            std::fprintf(stderr, "keyword_spotter: resampling failed: %s\n", src_strerror(se));
            rc = kExitFailed;
            running = false;
            break;
          }
          if (d.output_frames_gen > 0) running = feed(resampled.data(), int64_t(d.output_frames_gen));
          if (d.input_frames_used == 0 && d.output_frames_gen == 0) break;  // cannot happen; never spin
          d.data_in += d.input_frames_used;
          d.input_frames -= d.input_frames_used;
        }
      }
      if (push_status != mega::Status::ok) {
        std::fprintf(stderr, "keyword_spotter: inference failed: %s\n", mega::status_name(push_status));
        rc = kExitFailed;
        running = false;
      }
    }
    if (!running) break;

    if (std::chrono::duration<double>(now - last_check).count() >= kStatusInterval) {
      last_check = now;
      // The device: it must keep delivering until we stop it.
      const double since_start = std::chrono::duration<double>(now - started).count();
      const double since_progress = std::chrono::duration<double>(now - last_progress).count();
      const PaError active = Pa_IsStreamActive(pa.stream);
      char why[160] = "";
      if (cap->finished.load(std::memory_order_acquire) || active == 0) {
        std::snprintf(why, sizeof why, "the input stream stopped by itself (device lost?)");
      } else if (active < 0) {
        std::snprintf(why, sizeof why, "the input stream failed: %s", Pa_GetErrorText(active));
      } else if (!got_audio && since_start > kFirstAudioTimeout) {
        std::snprintf(why, sizeof why, "no audio from the device within %.0f s of starting", kFirstAudioTimeout);
      } else if (got_audio && since_progress > kStallTimeout) {
        std::snprintf(why, sizeof why, "the device stopped delivering audio (nothing for %.0f s)", kStallTimeout);
      }
      if (why[0]) {
        device_error = why;
        rc = kExitDevice;
        break;
      }
      // Dropped frames: the model cannot keep up (or the machine stalled).
      const uint64_t dropped = cap->ring.overflow_frames();
      if (dropped > reported_overflow &&
          std::chrono::duration<double>(now - last_overflow_report).count() >= kOverflowReportInterval) {
        if (status_line) std::fputs("\r\033[K", stdout);
        std::fprintf(stderr, "keyword_spotter: inference is falling behind the device: %llu frames (%.2f s) dropped "
                     "so far\n", (unsigned long long)dropped, double(dropped) / fmt.rate);
        std::fflush(stderr);
        reported_overflow = dropped;
        last_overflow_report = now;
      }
    }
    if (status_line && std::chrono::duration<double>(now - last_status).count() >= kStatusInterval) {
      last_status = now;
      if (!got_audio) {
        std::printf("\r\033[K[waiting for audio from '%s'...]", device_name.c_str());
      } else {
        std::printf("\r\033[K[listening %s] level %6.1f dBFS | last: %s | overflow %llu frames",
                    format_seconds(double(consumed) / model_rate).c_str(), level_db,
                    last_label.empty() ? "-" : (last_label + " at " + format_seconds(last_time)).c_str(),
                    (unsigned long long)cap->ring.overflow_frames());
      }
      std::fflush(stdout);
    }
    if (got == 0) std::this_thread::sleep_for(kIdleSleep);
    if (got > 0 && consumer_delay.count() > 0) std::this_thread::sleep_for(consumer_delay);
  }
  if (status_line) {
    std::fputs("\r\033[K", stdout);
    std::fflush(stdout);
  }

  if (!device_error.empty()) {
    std::fprintf(stderr, "keyword_spotter: device %d '%s' (%s): %s\n", int(dev), device_name.c_str(),
                 device_api.c_str(), device_error.c_str());
  }
  const mega::SessionStats& hygiene = session->stats();
  std::fprintf(stderr, "listened %.2f s, %lld chunks, %lld detections, %llu overflow frames; "
               "input: %lld non-finite samples replaced, %lld clipped\n",
               double(consumed) / model_rate, (long long)n_chunks, (long long)n_detections,
               (unsigned long long)cap->ring.overflow_frames(), (long long)hygiene.n_nonfinite_samples,
               (long long)hygiene.n_clamped_samples);
  std::fprintf(stderr,
               "first audio %.2f s after start; inference %.1f ms mean, %.1f ms max per %.1f ms chunk; "
               "lag behind capture %.1f ms mean, %.1f ms max; %llu host overflows\n",
               first_audio_s, n_chunks ? 1000.0 * infer_total_s / double(n_chunks) : 0.0, 1000.0 * infer_max_s,
               chunk_ms, n_chunks ? 1000.0 * lag_total_s / double(n_chunks) : 0.0, 1000.0 * lag_max_s,
               (unsigned long long)cap->host_overflows.load(std::memory_order_relaxed));
  std::fflush(stderr);

  cap->stop.store(true, std::memory_order_relaxed);
  watchdog.emplace(kCleanupTimeout, rc == kExitOk ? kExitDevice : rc, "closing the audio device");
  pa.close(rc == kExitDevice);
  watchdog.reset();
  return rc;
}

}  // namespace kws
