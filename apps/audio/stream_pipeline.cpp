// SPDX-License-Identifier: Apache-2.0
#include "stream_pipeline.h"

#include <algorithm>
#include <cmath>
#include <thread>

namespace kws {

namespace {

constexpr size_t kBlockFrames = 2048;  // frames taken from the ring at a time
constexpr auto kIdleSleep = std::chrono::milliseconds(5);

}  // namespace

std::unique_ptr<StreamPipeline> StreamPipeline::create(AudioSource& source, mega::Engine& session,
                                                       mega::Detector& detector, std::string* error) {
  const AudioFormat f = source.format();
  if (f.channels < 1 || f.channels > 2 || !(f.rate > 0.0)) {
    *error = "cannot stream " + std::to_string(f.channels) + " channels at " + std::to_string(f.rate) + " Hz";
    return nullptr;
  }
  std::unique_ptr<StreamPipeline> p(new StreamPipeline(source, session, detector));
  const double model_rate = double(session.model().hparams().sample_rate);
  if (model_rate != f.rate) {
    p->resampler_ = Resampler::create(f.rate, model_rate, error);
    if (!p->resampler_) return nullptr;
    p->resampled_.resize(size_t(std::ceil(kBlockFrames * p->resampler_->ratio())) + 64);
  }
  return p;
}

StreamPipeline::StreamPipeline(AudioSource& source, mega::Engine& session, mega::Detector& detector)
    : source_(source), stream_(session), detector_(detector), format_(source.format()) {
  raw_.resize(kBlockFrames * size_t(format_.channels));
  if (format_.channels > 1) mono_.resize(kBlockFrames);
}

StreamPipeline::~StreamPipeline() = default;

StreamEnd StreamPipeline::run(const StreamOptions& opts, StreamObserver& observer) {
  SpscRing<float>& ring = source_.ring();
  for (;;) {
    if (opts.stop && *opts.stop) return StreamEnd::stopped;
    const SourceState state = source_.poll();
    if (state == SourceState::failed) return StreamEnd::source_failed;
    const size_t got = ring.read(raw_.data(), kBlockFrames);
    if (got > 0) {
      switch (consume(got, opts, observer)) {
        case Fed::more: break;
        case Fed::limit: return StreamEnd::stopped;
        case Fed::failed: return failure();
      }
    }
    observer.on_tick(Clock::now());
    if (got == 0) {
      if (state == SourceState::ended) return finish(opts, observer);
      std::this_thread::sleep_for(kIdleSleep);
    } else if (opts.block_delay.count() > 0) {
      std::this_thread::sleep_for(opts.block_delay);
    }
  }
}

// One block from the ring: to mono (a mono source's block as it is), to the
// model's rate, into the session.
StreamPipeline::Fed StreamPipeline::consume(size_t n_frames, const StreamOptions& opts, StreamObserver& observer) {
  const float* mono = raw_.data();
  if (format_.channels > 1) {
    mix_to_mono(raw_.data(), format_.channels, n_frames, mono_.data());
    mono = mono_.data();
  }
  observer.on_audio(mono, n_frames);
  if (!resampler_) return feed(mono, int64_t(n_frames), opts, observer);
  return resample(mono, int64_t(n_frames), false, opts, observer);
}

// Source-rate frames through the resampler into the session; end: the
// source has ended, so the filter's tail follows them.
StreamPipeline::Fed StreamPipeline::resample(const float* x, int64_t n, bool end, const StreamOptions& opts,
                                             StreamObserver& observer) {
  Fed fed = Fed::more;
  auto into_session = [&](const float* y, int64_t m) { return (fed = feed(y, m, opts, observer)) == Fed::more; };
  if (!resampler_->convert(x, n, end, resampled_.data(), int64_t(resampled_.size()), into_session, &error_)) {
    return Fed::failed;
  }
  return fed;
}

// Model-rate samples into the session, up to the limit.
StreamPipeline::Fed StreamPipeline::feed(const float* x, int64_t n, const StreamOptions& opts,
                                         StreamObserver& observer) {
  const int64_t streamed = stream_.stats().n_samples;
  if (opts.max_samples >= 0) n = std::min(n, opts.max_samples - streamed);
  const Clock::time_point t0 = Clock::now();
  const int64_t chunks_before = stream_.stats().n_chunks;
  status_ = stream_.feed(detector_, x, n, observer);
  const int64_t n_new = stream_.stats().n_chunks - chunks_before;
  if (n_new > 0) {
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count() / double(n_new);
    time_.total_s += dt * double(n_new);
    time_.max_s = std::max(time_.max_s, dt);
  }
  if (status_ != mega::Status::ok) return Fed::failed;
  return opts.max_samples >= 0 && streamed + n >= opts.max_samples ? Fed::limit : Fed::more;
}

// The end of the source: the resampler's tail, then the keyword stream's
// flush (its last partial chunk completed with silence, the smoothing's end;
// mega/keyword_stream.hpp).
StreamEnd StreamPipeline::finish(const StreamOptions& opts, StreamObserver& observer) {
  if (resampler_) {
    const Fed f = resample(nullptr, 0, true, opts, observer);
    if (f != Fed::more) return f == Fed::limit ? StreamEnd::stopped : failure();
  }
  status_ = stream_.flush(detector_, observer);
  return status_ == mega::Status::ok ? StreamEnd::ended : StreamEnd::inference_failed;
}

}  // namespace kws
