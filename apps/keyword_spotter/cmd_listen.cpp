// SPDX-License-Identifier: Apache-2.0
// listen: live keyword spotting on a PortAudio input.
//
// The microphone (mic_source.h) fills a lock-free ring from PortAudio's
// callback; this thread runs the stream path every source shares
// (stream_pipeline.h: channels averaged, resampled when the device cannot
// open the model's rate, session, detector) and prints what it hears
// (listen_report.h). A device that stops delivering is an error (exit 4),
// never a hang; SIGINT and SIGTERM stop it cleanly (exit 0).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "audio_devices.h"
#include "commands.h"
#include "listen_report.h"
#include "mic_source.h"
#include "model_setup.h"
#include "stop_signals.h"
#include "stream_pipeline.h"
#include "watchdog.h"

namespace kws {

namespace {

constexpr double kStartTimeout = 10.0;    // opening the audio system (a hung sound server blocks it)
constexpr double kCleanupTimeout = 3.0;   // stopping a broken device must not hang the process

// Test only (tests/apps/test_listen.sh): KWS_TEST_CONSUMER_DELAY_MS=N makes the
// inference thread sleep N ms after each block it pops, as a machine too slow
// for the model would, so that the ring overflows.
std::chrono::milliseconds test_consumer_delay() {
  const char* v = std::getenv("KWS_TEST_CONSUMER_DELAY_MS");
  const long ms = v ? std::strtol(v, nullptr, 10) : 0;
  return std::chrono::milliseconds(std::max(0L, std::min(ms, 10000L)));
}

}  // namespace

int cmd_listen(const Params& p) {
  StopSignals signals;
  auto model = load_model(p);
  if (!model) return kExitModel;
  const mega::Model& m = *model;
  if (!m.streamable()) {
    std::fprintf(stderr,
                 "keyword_spotter: listen needs a streaming (unidirectional) model; %s is bidirectional and "
                 "classifies whole clips only\n",
                 p.model_path.c_str());
    return kExitUsage;
  }
  auto session = make_session(model, p, 0);
  if (!session) return kExitModel;
  auto detector = make_detector(m, p);
  if (!detector) return kExitUsage;
  const int32_t model_rate = m.hparams().sample_rate;

  // Declared before the microphone so that it outlives it: the watchdog also
  // guards the microphone's cleanup on early returns.
  std::optional<Watchdog> watchdog;
  watchdog.emplace(kStartTimeout, kExitDevice, "opening the audio device");
  set_audio_library_messages(p.verbose);
  std::string err;
  std::unique_ptr<MicSource> mic = MicSource::open(p.device, model_rate, kNoInputDevices, &err);
  if (!mic) {
    std::fprintf(stderr, "keyword_spotter: %s\n", err.c_str());
    return kExitDevice;
  }
  if (!mic->note().empty()) std::fprintf(stderr, "keyword_spotter: %s\n", mic->note().c_str());
  // Everything the loop needs is allocated before the capture starts.
  auto pipeline = StreamPipeline::create(*mic, *session, *detector, &err);
  if (!pipeline) {
    std::fprintf(stderr, "keyword_spotter: %s\n", err.c_str());
    return kExitFailed;
  }
  ListenReport report(m, p, *mic, *pipeline);
  if (*StopSignals::flag()) return kExitOk;  // interrupted while loading
  if (!mic->start(&err)) {
    std::fprintf(stderr, "keyword_spotter: %s\n", err.c_str());
    return kExitDevice;
  }
  watchdog.reset();
  report.print_start();

  StreamOptions opts;
  opts.max_samples = p.seconds > 0 ? int64_t(std::llround(p.seconds * model_rate)) : -1;
  opts.stop = StopSignals::flag();
  opts.block_delay = test_consumer_delay();
  int rc = kExitOk;
  const StreamEnd end = pipeline->run(opts, report);
  report.end_status_line();
  switch (end) {
    case StreamEnd::ended:
    case StreamEnd::stopped:
      break;
    case StreamEnd::source_failed:
      std::fprintf(stderr, "keyword_spotter: device %d '%s' (%s): %s\n", mic->device(), mic->device_name().c_str(),
                   mic->host_api().c_str(), mic->error().c_str());
      rc = kExitDevice;
      break;
    case StreamEnd::inference_failed:
      std::fprintf(stderr, "keyword_spotter: inference failed: %s\n", mega::status_name(pipeline->status()));
      rc = kExitFailed;
      break;
    case StreamEnd::resampler_failed:
      std::fprintf(stderr, "keyword_spotter: %s\n", pipeline->error().c_str());
      rc = kExitFailed;
      break;
  }
  report.print_summary();

  watchdog.emplace(kCleanupTimeout, rc == kExitOk ? kExitDevice : rc, "closing the audio device");
  mic->close(rc == kExitDevice);
  watchdog.reset();
  return rc;
}

}  // namespace kws
