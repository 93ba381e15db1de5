// SPDX-License-Identifier: Apache-2.0
// scan: recordings of any length streamed through the session and the
// detector (the path listen takes, stream_pipeline.h), one line per detection.
// Several files: each gets a fresh session and detector, and its name on
// every line (every JSON object names its file, even when there is one); a
// bad file is reported and the others are still scanned. "-": standard input
// (any container libsndfile decodes from a stream, or raw s16le mono at
// 16 kHz, stdin_audio.h). SIGINT or SIGTERM stops the scan after the summary
// of what was scanned, and exits as the signal's 128 + N.
#include <cstdio>
#include <string>

#include "audio_file.h"
#include "cli_output.h"
#include "commands.h"
#include "model_setup.h"
#include "stop_signals.h"
#include "stream_pipeline.h"

namespace kws {

namespace {

class PrintDetections : public StreamObserver {
 public:
  PrintDetections(const mega::Model& m, const Params& p, const std::string& file) : m_(m), p_(p), file_(file) {}
  void on_detection(int64_t end_sample, const mega::Detection& d) override {
    print_detection(m_, p_, end_sample, d, &file_);
  }

 private:
  const mega::Model& m_;
  const Params& p_;
  const std::string& file_;
};

// A file that failed: one line on stderr, and with --json its error object on stdout.
int file_failed(const Params& p, const std::string& path, const std::string& why) {
  std::fprintf(stderr, "keyword_spotter: %s: %s\n", path.c_str(), why.c_str());
  if (p.json) print_file_error(path, why);
  return kExitFailed;
}

// One file through a fresh session and detector: the exit code, its errors
// and summary on stderr (prefixed with the file's name when there are several),
// and with --json each detection, then a summary or an error object, on stdout.
int scan_file(const std::shared_ptr<const mega::Model>& m, const Params& p, const std::string& path) {
  const bool several = p.files.size() > 1;
  const std::string prefix = several ? path + ": " : std::string();
  const mega::HParams& hp = m->hparams();
  auto s = make_session(m, p, 0);
  auto det = make_detector(*m, p);
  if (!s || !det) return s ? kExitUsage : kExitModel;
  std::string err;
  auto in = FileSource::open(path, &err, StopSignals::flag());
  if (!in) return file_failed(p, path, err);
  auto pipeline = StreamPipeline::create(*in, *s, *det, &err);
  if (!pipeline) return file_failed(p, path, err);
  PrintDetections out(*m, p, path);
  StreamOptions opts;
  opts.stop = StopSignals::flag();
  switch (pipeline->run(opts, out)) {
    case StreamEnd::ended:
    case StreamEnd::stopped:
      break;
    case StreamEnd::source_failed:
      return file_failed(p, path, in->error());  // it says where
    case StreamEnd::inference_failed:
      return file_failed(p, path, std::string("inference failed: ") + mega::status_name(pipeline->status()));
    case StreamEnd::resampler_failed:
      return file_failed(p, path, pipeline->error());
  }
  const mega::StreamStats st = pipeline->stats();
  const double seconds = double(st.n_samples) / hp.sample_rate;
  const long long n_detections = static_cast<long long>(st.n_detections);
  std::fprintf(stderr, "%sscanned %.3f s: %lld detection(s)", prefix.c_str(), seconds, n_detections);
  // the reader refuses NaN/Inf; samples beyond full scale are clipped by the session
  if (st.n_clamped_samples > 0) {
    std::fprintf(stderr, "; %lld samples beyond full scale clipped", static_cast<long long>(st.n_clamped_samples));
  }
  std::fprintf(stderr, "\n");
  if (p.json) {
    JsonLine().str("type", "summary").file(path).fixed("duration_s", seconds, 3).integer("detections", n_detections)
        .integer("clipped_samples", st.n_clamped_samples).end();
  }
  return kExitOk;
}

}  // namespace

int cmd_scan(const Params& p) {
  StopSignals signals;
  auto m = load_model(p);
  if (!m) return kExitModel;
  if (!m->streamable()) {
    std::fprintf(stderr, "keyword_spotter: scan needs a streaming (unidirectional) model; this one is "
                         "bidirectional (use classify)\n");
    return kExitUsage;
  }
  int rc = kExitOk;
  for (const std::string& path : p.files) {
    if (*StopSignals::flag()) break;
    const int file_rc = scan_file(m, p, path);
    if (file_rc == kExitUsage || file_rc == kExitModel) return file_rc;  // the options, not the file
    if (file_rc != kExitOk) rc = file_rc;
  }
  if (*StopSignals::flag()) return 128 + *StopSignals::flag();  // as if the signal had ended it, after the summary
  return rc;
}

}  // namespace kws
