// scan: a recording of any length streamed through the session and the
// detector (the path listen takes, stream_pipeline.h), one line per detection.
#include <cstdio>
#include <string>

#include "cli_output.h"
#include "commands.h"
#include "file_source.h"
#include "model_setup.h"
#include "stream_pipeline.h"

namespace kws {

namespace {

class PrintDetections : public StreamObserver {
 public:
  PrintDetections(const mega::Model& m, const Params& p) : m_(m), p_(p) {}
  void on_detection(int64_t end_sample, const mega::Detection& d) override { print_detection(m_, p_, end_sample, d); }

 private:
  const mega::Model& m_;
  const Params& p_;
};

}  // namespace

int cmd_scan(const Params& p) {
  auto m = load_model(p);
  if (!m) return kExitModel;
  if (!m->streamable()) {
    std::fprintf(stderr, "keyword_spotter: scan needs a streaming (unidirectional) model; this one is "
                         "bidirectional (use classify)\n");
    return kExitUsage;
  }
  const mega::HParams& hp = m->hparams();
  auto s = make_session(m, p, 0);
  auto det = make_detector(*m, p);
  if (!s || !det) return s ? kExitUsage : kExitModel;
  std::string err;
  auto in = FileSource::open(p.files[0], hp.sample_rate, &err);
  if (!in) {
    std::fprintf(stderr, "keyword_spotter: %s: %s\n", p.files[0].c_str(), err.c_str());
    return kExitFailed;
  }
  auto pipeline = StreamPipeline::create(*in, *s, *det, &err);
  if (!pipeline) {
    std::fprintf(stderr, "keyword_spotter: %s: %s\n", p.files[0].c_str(), err.c_str());
    return kExitFailed;
  }
  PrintDetections out(*m, p);
  switch (pipeline->run(StreamOptions(), out)) {
    case StreamEnd::ended:
    case StreamEnd::stopped:
      break;
    case StreamEnd::source_failed:
      std::fprintf(stderr, "keyword_spotter: %s: %s (after %.3f s)\n", p.files[0].c_str(), in->error().c_str(),
                   double(in->frames_read()) / hp.sample_rate);
      return kExitFailed;
    case StreamEnd::inference_failed:
      std::fprintf(stderr, "keyword_spotter: %s: inference failed: %s\n", p.files[0].c_str(),
                   mega::status_name(pipeline->status()));
      return kExitFailed;
    case StreamEnd::resampler_failed:
      std::fprintf(stderr, "keyword_spotter: %s: %s\n", p.files[0].c_str(), pipeline->error().c_str());
      return kExitFailed;
  }
  std::fprintf(stderr, "scanned %.3f s: %lld detection(s)", double(pipeline->stats().samples) / hp.sample_rate,
               static_cast<long long>(pipeline->stats().n_detections));
  // the reader refuses NaN/Inf; samples beyond full scale are clipped by the session
  const mega::StreamStats& hygiene = s->stats();
  if (hygiene.n_clamped_samples > 0) {
    std::fprintf(stderr, "; %lld samples beyond full scale clipped", static_cast<long long>(hygiene.n_clamped_samples));
  }
  std::fprintf(stderr, "\n");
  return kExitOk;
}

}  // namespace kws
