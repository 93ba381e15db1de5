// SPDX-License-Identifier: Apache-2.0
#include "mic_source.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "audio_devices.h"

namespace kws {

namespace {

constexpr double kRingSeconds = 4.0;        // inference may fall this far behind before frames drop
constexpr double kFirstAudioTimeout = 5.0;  // PulseAudio's first callback can take ~2 s
constexpr double kStallTimeout = 3.0;       // no frames for this long after the first: the device is gone
constexpr double kCheckInterval = 0.2;      // how often poll() asks PortAudio about the stream

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
// then the device's default rate (resampled downstream). PortAudio never resamples.
bool choose_format(PaDeviceIndex dev, double model_rate, AudioFormat* out, PaError* last_error) {
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

}  // namespace

// Shared between the capture callback (producer) and the consumer.
struct MicSource::Capture {
  Capture(size_t frames, int channels) : ring(frames, size_t(channels)) {}
  SpscRing<float> ring;                     // interleaved frames at the device rate
  std::atomic<bool> stop{false};            // set by the consumer
  std::atomic<uint64_t> frames_in{0};       // frames the device delivered (kept or dropped)
  std::atomic<uint64_t> host_overflows{0};  // callbacks PortAudio flagged paInputOverflow
  std::atomic<bool> finished{false};        // PortAudio's stream-finished callback ran

  // Real-time: copy, count, return. No allocation, locking or I/O.
  static int on_frames(const void* input, void* /*output*/, unsigned long n_frames,
                       const PaStreamCallbackTimeInfo* /*time*/, PaStreamCallbackFlags flags, void* user) {
    Capture* c = static_cast<Capture*>(user);
    if (input) c->ring.write(static_cast<const float*>(input), size_t(n_frames));
    c->frames_in.store(c->frames_in.load(std::memory_order_relaxed) + n_frames, std::memory_order_release);
    if (flags & paInputOverflow) {
      c->host_overflows.store(c->host_overflows.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    }
    return c->stop.load(std::memory_order_relaxed) ? paComplete : paContinue;
  }
  static void on_finished(void* user) { static_cast<Capture*>(user)->finished.store(true, std::memory_order_release); }
};

MicSource::MicSource() = default;

MicSource::~MicSource() { close(false); }

namespace {

std::string pa_failure(const char* what, PaError e) { return std::string(what) + ": " + Pa_GetErrorText(e); }

// "device 3 'name' (ALSA)"
std::string describe_device(int dev, const std::string& name, const std::string& host_api) {
  return "device " + std::to_string(dev) + " '" + name + "' (" + host_api + ")";
}

}  // namespace

std::unique_ptr<MicSource> MicSource::open(const std::string& want, int32_t model_rate, const char* no_devices,
                                           std::string* error, bool* not_found) {
  // A keyword spotter must not start a JACK server as a side effect.
  setenv("JACK_NO_START_SERVER", "1", 0);
  std::unique_ptr<MicSource> mic(new MicSource());  // its destructor terminates PortAudio on every early return
  PaError e = Pa_Initialize();
  if (e != paNoError) {
    *error = pa_failure("cannot initialize PortAudio", e);
    return nullptr;
  }
  mic->pa_initialized_ = true;
  if (Pa_GetDeviceCount() < 0) {
    *error = pa_failure("cannot list audio devices", Pa_GetDeviceCount());
    return nullptr;
  }
  const PaDeviceIndex dev = find_input_device(want, no_devices, error, &mic->note_);
  if (not_found) *not_found = dev == paNoDevice;
  if (dev == paNoDevice) return nullptr;
  const PaDeviceInfo* info = Pa_GetDeviceInfo(dev);  // owned by PortAudio: gone after Pa_Terminate
  mic->device_ = int(dev);
  mic->device_name_ = info->name ? info->name : "";
  mic->host_api_ = host_api_name(info);
  const std::string device = describe_device(mic->device_, mic->device_name_, mic->host_api_);
  if (!choose_format(dev, double(model_rate), &mic->format_, &e)) {
    char rates[96];
    std::snprintf(rates, sizeof rates, " cannot capture float32 audio at %d or %.0f Hz", int(model_rate),
                  info->defaultSampleRate);
    *error = pa_failure((device + rates).c_str(), e);
    return nullptr;
  }
  mic->cap_.reset(new Capture(size_t(kRingSeconds * mic->format_.rate), mic->format_.channels));
  const PaStreamParameters in = input_params(dev, mic->format_.channels);
  e = Pa_OpenStream(&mic->stream_, &in, nullptr, mic->format_.rate, paFramesPerBufferUnspecified, paNoFlag,
                    &Capture::on_frames, mic->cap_.get());
  if (e != paNoError) {
    mic->stream_ = nullptr;
    *error = pa_failure(("cannot open " + device).c_str(), e);
    return nullptr;
  }
  Pa_SetStreamFinishedCallback(mic->stream_, &Capture::on_finished);
  return mic;
}

bool MicSource::start(std::string* error) {
  started_ = last_progress_ = last_check_ = Clock::now();
  const PaError e = Pa_StartStream(stream_);
  if (e != paNoError) {
    *error = pa_failure(("cannot start " + describe_device(device_, device_name_, host_api_)).c_str(), e);
    return false;
  }
  return true;
}

void MicSource::close(bool abort) {
  if (cap_) cap_->stop.store(true, std::memory_order_relaxed);
  if (stream_) {
    if (Pa_IsStreamStopped(stream_) == 0) {
      if (abort) {
        Pa_AbortStream(stream_);
      } else {
        Pa_StopStream(stream_);
      }
    }
    Pa_CloseStream(stream_);
    stream_ = nullptr;
  }
  if (pa_initialized_) Pa_Terminate();
  pa_initialized_ = false;
}

SpscRing<float>& MicSource::ring() { return cap_->ring; }

double MicSource::input_latency_s() const {
  const PaStreamInfo* si = stream_ ? Pa_GetStreamInfo(stream_) : nullptr;
  return si ? si->inputLatency : 0.0;
}

uint64_t MicSource::frames_in() const { return cap_->frames_in.load(std::memory_order_acquire); }
uint64_t MicSource::overflow_frames() const { return cap_->ring.overflow_frames(); }
uint64_t MicSource::host_overflows() const { return cap_->host_overflows.load(std::memory_order_relaxed); }

// The device must keep delivering until we stop it.
SourceState MicSource::poll() {
  if (state_ != SourceState::running) return state_;
  const Clock::time_point now = Clock::now();
  const uint64_t frames = frames_in();
  if (frames != seen_frames_) {
    if (!got_audio_) first_audio_s_ = std::chrono::duration<double>(now - started_).count();
    seen_frames_ = frames;
    got_audio_ = true;
    last_progress_ = now;
  }
  if (std::chrono::duration<double>(now - last_check_).count() < kCheckInterval) return state_;
  last_check_ = now;
  const double since_start = std::chrono::duration<double>(now - started_).count();
  const double since_progress = std::chrono::duration<double>(now - last_progress_).count();
  const PaError active = Pa_IsStreamActive(stream_);
  char why[160] = "";
  if (cap_->finished.load(std::memory_order_acquire) || active == 0) {
    std::snprintf(why, sizeof why, "the input stream stopped by itself (device lost?)");
  } else if (active < 0) {
    std::snprintf(why, sizeof why, "the input stream failed: %s", Pa_GetErrorText(active));
  } else if (!got_audio_ && since_start > kFirstAudioTimeout) {
    std::snprintf(why, sizeof why, "no audio from the device within %.0f s of starting", kFirstAudioTimeout);
  } else if (got_audio_ && since_progress > kStallTimeout) {
    std::snprintf(why, sizeof why, "the device stopped delivering audio (nothing for %.0f s)", kStallTimeout);
  }
  if (why[0]) {
    error_ = why;
    state_ = SourceState::failed;
  }
  return state_;
}

}  // namespace kws
