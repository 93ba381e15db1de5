// SPDX-License-Identifier: Apache-2.0
// A stream with its detector (mega/keyword_stream.hpp): the one place where
// audio becomes detections, and where a stream's end is handled.
#include "mega/keyword_stream.hpp"

#include <algorithm>

namespace mega {

namespace {

// The flush's silence, pushed a block at a time: no buffer per stream.
constexpr int64_t kZeroBlock = 1024;
const float kZeros[kZeroBlock] = {};

}  // namespace

Status KeywordStream::push(const float* samples, int64_t n, int64_t* n_consumed, bool* chunk_done) {
  const Status s = engine_.push(samples, n, n_consumed, chunk_done);
  if (s != Status::ok) return s;
  samples_ += *n_consumed;
  if (audio_end_ < 0) counts_.n_samples += *n_consumed;  // not the flush's silence
  pending_ = *chunk_done ? 0 : pending_ + *n_consumed;
  if (*chunk_done) ++counts_.n_chunks;
  return Status::ok;
}

StreamStats KeywordStream::stats() const {
  StreamStats s = engine_.stats();
  s.n_samples = counts_.n_samples;
  s.n_chunks = counts_.n_chunks;
  s.n_detections = counts_.n_detections;
  return s;
}

Status KeywordStream::feed(Detector& detector, const float* samples, int64_t n, DetectionSink& sink) {
  reported_ = 0;
  return feed_until_end(detector, samples, n, sink);
}

Status KeywordStream::feed_until_end(Detector& detector, const float* samples, int64_t n, DetectionSink& sink) {
  Detection d;
  while (n > 0) {
    int64_t used = 0;
    bool done = false;
    const Status s = push(samples, n, &used, &done);
    if (s != Status::ok) return s;
    samples += used;
    n -= used;
    if (!done) continue;
    const ChunkResult& r = engine_.last_result();
    sink.on_chunk(r);
    if (detector.update(r.logits, &d)) report(r.end_sample, d, sink);
  }
  return Status::ok;
}

// During the flush, a detection's event may end in the silence that completed
// the last chunk: it is reported at the end of the audio instead.
void KeywordStream::report(int64_t end_sample, const Detection& d, DetectionSink& sink) {
  ++reported_;
  ++counts_.n_detections;
  if (audio_end_ >= 0) {
    const int64_t hop = engine_.model().hparams().chunk_samples();
    const int64_t event_end = end_sample - (d.hop_index - d.event_hop) * hop;
    if (event_end > audio_end_) end_sample -= event_end - audio_end_;
  }
  sink.on_detection(end_sample, d);
}

Status KeywordStream::flush(Detector& detector, DetectionSink& sink) {
  const int64_t hop = engine_.model().hparams().chunk_samples();
  reported_ = 0;
  audio_end_ = samples_;
  Status s = Status::ok;
  for (int64_t tail = pending_ > 0 ? hop - pending_ : 0; tail > 0 && s == Status::ok;) {
    const int64_t len = std::min(tail, kZeroBlock);
    s = feed_until_end(detector, kZeros, len, sink);
    tail -= len;
  }
  if (s == Status::ok && reported_ == 0) {
    Detection d;
    if (detector.finish(&d)) {
      // the detector's last hop ended where the engine's last chunk did (or,
      // for hops given to the detector alone, where that many chunks would)
      const int64_t last_end = engine_.last_result().end_sample;
      report(last_end > 0 ? last_end : detector.hops_seen() * hop, d, sink);
    }
  }
  audio_end_ = -1;
  return s;
}

void KeywordStream::reset() {
  engine_.reset();
  restarted();
}

}  // namespace mega
