// SPDX-License-Identifier: Apache-2.0
#include "listen_report.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli_output.h"

namespace kws {

namespace {

constexpr double kStatusInterval = 0.2;          // TTY status line refresh, and the overflow check
constexpr double kLevelWindow = 0.1;             // seconds of audio behind the level meter
constexpr double kOverflowReportInterval = 5.0;  // at most one "falling behind" warning per this many seconds

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

ListenReport::ListenReport(const mega::Model& m, const Params& p, const MicSource& mic,
                           const StreamPipeline& pipeline)
    : m_(m),
      p_(p),
      mic_(mic),
      pipeline_(pipeline),
      model_rate_(m.hparams().sample_rate),
      status_line_(!p.json && isatty(fileno(stdout))),
      level_window_(std::max<int64_t>(1, int64_t(kLevelWindow * mic.format().rate))) {
  last_check_ = last_status_ = last_overflow_report_ = Clock::now();
}

void ListenReport::print_start() const {
  const AudioFormat fmt = mic_.format();
  const double chunk_ms = 1000.0 * double(m_.hparams().chunk_samples()) / model_rate_;
  std::fprintf(stderr, "keyword_spotter: listening on device %d '%s' (%s): %d channel%s at %.0f Hz", mic_.device(),
               mic_.device_name().c_str(), mic_.host_api().c_str(), fmt.channels,
               fmt.channels > 1 ? "s (averaged)" : "", fmt.rate);
  if (pipeline_.resampling()) std::fprintf(stderr, ", resampled to %d Hz", model_rate_);
  std::fprintf(stderr, ", input latency %.1f ms; chunk %.1f ms; %s\n", 1000.0 * mic_.input_latency_s(), chunk_ms,
               p_.seconds > 0 ? ("stopping after " + format_seconds(p_.seconds)).c_str() : "Ctrl-C to stop");
  std::fflush(stderr);
}

void ListenReport::on_audio(const float* mono, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    level_acc_ += double(mono[i]) * double(mono[i]);
    if (++level_n_ >= level_window_) {
      level_db_ = 10.0 * std::log10(level_acc_ / double(level_n_) + 1e-12);
      level_acc_ = 0.0;
      level_n_ = 0;
    }
  }
}

void ListenReport::on_chunk(const mega::ChunkResult& r) {
  // How far this chunk's end lags the newest captured audio: ring backlog
  // plus resampler delay plus this chunk's inference.
  const uint64_t kept = mic_.frames_in() - mic_.overflow_frames();
  const double lag = std::max(0.0, double(kept) / mic_.format().rate - double(r.end_sample) / model_rate_);
  lag_total_s_ += lag;
  lag_max_s_ = std::max(lag_max_s_, lag);
}

void ListenReport::on_detection(int64_t end_sample, const mega::Detection& d) {
  last_label_ = m_.labels()[size_t(d.label)];
  if (status_line_) std::fputs("\r\033[K", stdout);
  last_time_ = print_detection(m_, p_, end_sample, d);
}

void ListenReport::on_tick(Clock::time_point now) {
  if (seconds_between(last_check_, now) >= kStatusInterval) {
    last_check_ = now;
    // Dropped frames: the model cannot keep up (or the machine stalled).
    const uint64_t dropped = mic_.overflow_frames();
    if (dropped > reported_overflow_ && seconds_between(last_overflow_report_, now) >= kOverflowReportInterval) {
      if (status_line_) std::fputs("\r\033[K", stdout);
      std::fprintf(stderr, "keyword_spotter: inference is falling behind the device: %llu frames (%.2f s) dropped "
                   "so far\n", (unsigned long long)dropped, double(dropped) / mic_.format().rate);
      std::fflush(stderr);
      reported_overflow_ = dropped;
      last_overflow_report_ = now;
    }
  }
  if (status_line_ && seconds_between(last_status_, now) >= kStatusInterval) {
    last_status_ = now;
    if (!mic_.got_audio()) {
      std::printf("\r\033[K[waiting for audio from '%s'...]", mic_.device_name().c_str());
    } else {
      std::printf("\r\033[K[listening %s] level %6.1f dBFS | last: %s | overflow %llu frames",
                  format_seconds(double(pipeline_.stats().n_samples) / model_rate_).c_str(), level_db_,
                  last_label_.empty() ? "-" : (last_label_ + " at " + format_seconds(last_time_)).c_str(),
                  (unsigned long long)mic_.overflow_frames());
    }
    std::fflush(stdout);
  }
}

void ListenReport::end_status_line() {
  if (!status_line_) return;
  std::fputs("\r\033[K", stdout);
  std::fflush(stdout);
}

void ListenReport::print_summary() const {
  const mega::StreamStats s = pipeline_.stats();
  const InferenceTime& t = pipeline_.inference_time();
  const double chunk_ms = 1000.0 * double(m_.hparams().chunk_samples()) / model_rate_;
  std::fprintf(stderr, "listened %.2f s, %lld chunks, %lld detections, %llu overflow frames; "
               "input: %lld non-finite samples replaced, %lld clipped\n",
               double(s.n_samples) / model_rate_, (long long)s.n_chunks, (long long)s.n_detections,
               (unsigned long long)mic_.overflow_frames(), (long long)s.n_nonfinite_samples,
               (long long)s.n_clamped_samples);
  // "first audio 0.00 s" would claim audio that never came
  if (mic_.got_audio()) {
    std::fprintf(stderr, "first audio %.2f s after start; ", mic_.first_audio_s());
  } else {
    std::fprintf(stderr, "no audio came from the device; ");
  }
  std::fprintf(stderr,
               "inference %.1f ms mean, %.1f ms max per %.1f ms chunk; "
               "lag behind capture %.1f ms mean, %.1f ms max; %llu host overflows\n",
               s.n_chunks ? 1000.0 * t.total_s / double(s.n_chunks) : 0.0,
               1000.0 * t.max_s, chunk_ms, s.n_chunks ? 1000.0 * lag_total_s_ / double(s.n_chunks) : 0.0,
               1000.0 * lag_max_s_, (unsigned long long)mic_.host_overflows());
  std::fflush(stderr);
}

}  // namespace kws
