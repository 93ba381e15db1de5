// SPDX-License-Identifier: Apache-2.0
// The microphone as a source (listen): a PortAudio input stream whose
// capture callback, on PortAudio's thread, only copies the frames into the
// preallocated lock-free ring and counts them; no allocation, lock or I/O
// there. poll(), on the consumer's thread, watches the device: a stream that
// stops on its own, or audio that stops arriving, is a failure, never a hang.
#pragma once

#include <portaudio.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "audio_source.h"

namespace kws {

class MicSource : public AudioSource {
 public:
  // Opens, without starting it, the input device `want` names (see
  // find_input_device) for audio at model_rate: mono at that rate if the
  // device can, else two channels (averaged downstream), else the device's
  // default rate (resampled downstream; PortAudio never resamples). On
  // failure returns null (a device error) with *error saying why (no_devices:
  // what to say when there is no input device at all, see
  // find_input_device) and *not_found (if given) true when no device is
  // there or matches `want`. Everything the capture needs is allocated here.
  // Nothing is printed. Guard it with a Watchdog: a hung sound server blocks
  // PortAudio.
  static std::unique_ptr<MicSource> open(const std::string& want, int32_t model_rate, const char* no_devices,
                                         std::string* error, bool* not_found = nullptr);
  ~MicSource() override;

  // Starts the capture; false with *error saying why not.
  bool start(std::string* error);
  // Stops the capture (abort: at once, for a broken device), closes the
  // stream and terminates PortAudio. Guard it with a Watchdog too.
  void close(bool abort);

  AudioFormat format() const override { return format_; }
  SpscRing<float>& ring() override;
  SourceState poll() override;
  const std::string& error() const override { return error_; }

  // For the report.
  int device() const { return device_; }
  const std::string& device_name() const { return device_name_; }
  const std::string& host_api() const { return host_api_; }
  // Which device was taken when several names matched (find_input_device); else empty.
  const std::string& note() const { return note_; }
  double input_latency_s() const;
  uint64_t frames_in() const;       // frames the device delivered (kept or dropped)
  uint64_t overflow_frames() const;  // frames dropped because the ring was full
  uint64_t host_overflows() const;   // callbacks PortAudio flagged paInputOverflow
  bool got_audio() const { return got_audio_; }
  double first_audio_s() const { return first_audio_s_; }  // after start()

 private:
  using Clock = std::chrono::steady_clock;
  struct Capture;
  MicSource();

  std::unique_ptr<Capture> cap_;  // outlives the stream, which calls into it until closed
  PaStream* stream_ = nullptr;
  bool pa_initialized_ = false;
  AudioFormat format_;
  int device_ = -1;
  std::string device_name_, host_api_, note_;
  SourceState state_ = SourceState::running;
  std::string error_;
  // the device's progress, as poll() sees it
  Clock::time_point started_, last_progress_, last_check_;
  uint64_t seen_frames_ = 0;
  bool got_audio_ = false;
  double first_audio_s_ = 0.0;
};

}  // namespace kws
