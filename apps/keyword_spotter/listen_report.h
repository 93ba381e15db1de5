// SPDX-License-Identifier: Apache-2.0
// What listen prints: the detections (stdout), a status line while stdout is
// a terminal (level, last detection, dropped frames), a warning when
// inference falls behind the device, and the summary at the end (stderr).
// Called on the consumer's thread; the capture callback prints nothing.
#pragma once

#include <cstdint>
#include <string>

#include "cli_options.h"
#include "mega/mega.hpp"
#include "mic_source.h"
#include "stream_pipeline.h"

namespace kws {

class ListenReport : public StreamObserver {
 public:
  ListenReport(const mega::Model& m, const Params& p, const MicSource& mic, const StreamPipeline& pipeline);

  // "listening on device ...", once the capture has started.
  void print_start() const;
  void on_audio(const float* mono, size_t n) override;  // the level meter
  void on_chunk(const mega::ChunkResult& r) override;   // the lag behind the capture
  void on_detection(int64_t end_sample, const mega::Detection& d) override;
  void on_tick(Clock::time_point now) override;         // the status line, the falling-behind warning
  // Erases the status line, if any.
  void end_status_line();
  // Two lines on stderr: what was heard and how fast.
  void print_summary() const;

 private:
  const mega::Model& m_;
  const Params& p_;
  const MicSource& mic_;
  const StreamPipeline& pipeline_;
  const int32_t model_rate_;
  const bool status_line_;
  // level meter: mean square over a window of device-rate audio
  const int64_t level_window_;
  double level_acc_ = 0.0, level_db_ = -120.0;
  int64_t level_n_ = 0;
  // detections
  std::string last_label_;
  double last_time_ = 0.0;
  // lag behind capture, per chunk
  double lag_total_s_ = 0.0, lag_max_s_ = 0.0;
  // timers
  Clock::time_point last_check_, last_status_, last_overflow_report_;
  uint64_t reported_overflow_ = 0;
};

}  // namespace kws
