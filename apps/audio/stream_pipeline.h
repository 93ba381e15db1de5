// SPDX-License-Identifier: Apache-2.0
// The one streaming path from any audio source to the detections:
//
//   source's ring -> channels averaged -> resampled to the model's rate (when
//   the source's rate differs; at its end, the resampler's tail) -> keyword stream (the session's chunks, the
//   detector, the end of the stream: mega/keyword_stream.hpp) -> observer
//
// scan (a file) and listen (the microphone) both run it; what differs is the
// source and what the command prints (its StreamObserver). Everything is
// allocated by create(); run() allocates, locks and prints nothing itself.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "audio_source.h"
#include "resampler.h"
#include "mega/detector.hpp"
#include "mega/engine.hpp"
#include "mega/keyword_stream.hpp"

namespace kws {

using Clock = std::chrono::steady_clock;

// What the command sees of the stream, on the consumer's thread: the keyword
// stream's chunks and detections (mega::DetectionSink), and the audio.
class StreamObserver : public mega::DetectionSink {
 public:
  // Mono frames at the source's rate, as they leave the ring.
  virtual void on_audio(const float* /*mono*/, size_t /*n*/) {}
  // Once per pass of the loop (each block, or every few ms while a live source is quiet).
  virtual void on_tick(Clock::time_point /*now*/) {}
};

struct StreamOptions {
  int64_t max_samples = -1;                          // stop after this many model-rate samples; -1: no limit
  const volatile std::sig_atomic_t* stop = nullptr;  // stop once *stop is non-zero
  std::chrono::milliseconds block_delay{0};          // test only: sleep after each block, as a slow machine would
};

enum class StreamEnd {
  ended,             // the source ended, and the keyword stream was flushed
  stopped,           // *stop, or max_samples reached
  source_failed,     // the source's error()
  inference_failed,  // status()
  resampler_failed,  // error()
};

// How long the keyword stream took over its chunks.
struct InferenceTime {
  double total_s = 0.0;  // summed over chunks
  double max_s = 0.0;    // the largest per-chunk mean of one push
};

class StreamPipeline {
 public:
  // Null, with *error set, when the source's format cannot be streamed.
  static std::unique_ptr<StreamPipeline> create(AudioSource& source, mega::Engine& session,
                                                mega::Detector& detector, std::string* error);
  ~StreamPipeline();
  StreamPipeline(const StreamPipeline&) = delete;
  StreamPipeline& operator=(const StreamPipeline&) = delete;

  // Streams until the source ends or fails, or until stopped.
  StreamEnd run(const StreamOptions& opts, StreamObserver& observer);

  bool resampling() const { return resampler_ != nullptr; }
  // The keyword stream's counts (model-rate samples, chunks, detections) and the session's input hygiene.
  mega::StreamStats stats() const { return stream_.stats(); }
  const InferenceTime& inference_time() const { return time_; }
  mega::Status status() const { return status_; }
  const std::string& error() const { return error_; }

 private:
  enum class Fed { more, limit, failed };
  StreamPipeline(AudioSource& source, mega::Engine& session, mega::Detector& detector);
  Fed consume(size_t n_frames, const StreamOptions& opts, StreamObserver& observer);
  Fed resample(const float* x, int64_t n, bool end, const StreamOptions& opts, StreamObserver& observer);
  Fed feed(const float* x, int64_t n, const StreamOptions& opts, StreamObserver& observer);
  StreamEnd finish(const StreamOptions& opts, StreamObserver& observer);
  StreamEnd failure() const { return error_.empty() ? StreamEnd::inference_failed : StreamEnd::resampler_failed; }

  AudioSource& source_;
  mega::KeywordStream stream_;
  mega::Detector& detector_;
  AudioFormat format_;
  std::unique_ptr<Resampler> resampler_;  // null: the source is at the model's rate
  std::vector<float> raw_, mono_, resampled_;  // mono_: for sources of two channels
  InferenceTime time_;
  mega::Status status_ = mega::Status::ok;
  std::string error_;
};

}  // namespace kws
