// SPDX-License-Identifier: Apache-2.0
// A stream with its detector: audio in, detections out, and the one answer
// to what happens at either end of a stream. The CLI's pipeline
// (apps/audio/stream_pipeline.cpp) and the C API (mega_session_detect,
// mega_session_detect_flush; Python through it) both run this.
//
//  - start: the detector's warm-up (DetectorConfig::warmup_hops, the model's
//    window): the first hops neither fire nor smooth.
//  - end (flush()): the last partial chunk is completed with silence; a
//    detection there is timed no later than the audio (its event may not end
//    in the padding); unless that fired, the smoothing window shrinks over the
//    last hops (Detector::finish) so that a word at the very end is heard.
//
// Everything is the engine's and the detector's memory: nothing here
// allocates, locks or logs. The engine and the detector are borrowed; the
// detector is passed per call because the C API pairs them per call.
#pragma once

#include <cstdint>

#include "mega/detector.hpp"
#include "mega/engine.hpp"

namespace mega {

// What a keyword stream reports, on the caller's thread, as it happens.
class DetectionSink {
 public:
  virtual ~DetectionSink() = default;
  // Every chunk the engine completes, before the detector sees it.
  virtual void on_chunk(const ChunkResult& /*r*/) {}
  // end_sample: the stream position to time the detection from
  // (Detector::event_time_s): where the firing chunk ended, moved back at the
  // end of a stream so that the event ends no later than the audio.
  virtual void on_detection(int64_t end_sample, const Detection& d) = 0;
};

class KeywordStream {
 public:
  explicit KeywordStream(Engine& engine) : engine_(engine) {}

  // Samples into the engine alone (no detector), as Engine::push.
  Status push(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done);
  // All n samples through the engine and the detector.
  Status feed(Detector& detector, const float* samples, int64_t n, DetectionSink& sink);
  // The end of the stream (above). At most one detection. The stream may go
  // on afterwards (its position counts the silence).
  Status flush(Detector& detector, DetectionSink& sink);
  // A fresh stream on the engine (the detector is the caller's to reset).
  void reset();
  // After the engine was reset behind this object's back (classify_clip).
  void restarted() {
    samples_ = pending_ = 0;
    counts_ = StreamStats();
  }

  // The engine's input hygiene counts and this stream's own.
  StreamStats stats() const;
  // Samples since the last completed chunk.
  int64_t pending() const { return pending_; }
  // Chunks that n more samples would complete.
  int64_t chunks_completed_by(int64_t n) const { return (pending_ + n) / engine_.model().hparams().chunk_samples(); }

 private:
  Status feed_until_end(Detector& detector, const float* samples, int64_t n, DetectionSink& sink);
  void report(int64_t end_sample, const Detection& d, DetectionSink& sink);

  Engine& engine_;
  int64_t samples_ = 0;    // stream position: samples pushed since reset (a flush's silence included)
  int64_t pending_ = 0;    // of them, since the last completed chunk
  int64_t audio_end_ = -1; // during flush(): where the audio ended; -1 otherwise
  int64_t reported_ = 0;   // detections reported by the current feed or flush
  StreamStats counts_;     // n_samples, n_chunks, n_detections
};

}  // namespace mega
