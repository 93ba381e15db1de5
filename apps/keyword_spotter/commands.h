// keyword_spotter's commands: one function per command, sharing the parsed
// options and a few helpers (detector setup, detection output).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mega/detector.hpp"
#include "mega/engine.hpp"
#include "mega/mega.hpp"

namespace kws {

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitModel = 3, kExitDevice = 4;

struct Params {
  std::string command;
  std::string model_path;
  bool json = false;
  int64_t block_size = 0;       // classify: 0 = whole clip (offline)
  std::string kernels = "optimized";
  std::string backend;          // cpu | cuda; empty = mega::default_backend()
  bool fp16 = false;            // cuda: float16 storage
  int threads = 1;
  std::vector<std::string> files;
  // detection (scan, listen); negative = from the model file
  float threshold = -1.0f;
  int32_t smoothing = -1;
  int32_t refractory_ms = -1;
  float sensitivity = -1.0f;
  // listen
  std::string device;           // name substring or index; empty = default input
  double seconds = 0.0;         // listen: stop after this long (0 = until Ctrl-C)
};

// Loads the model (printing the error) or returns null.
std::shared_ptr<const mega::Model> load_model(const Params& p);
std::unique_ptr<mega::Engine> make_session(const std::shared_ptr<const mega::Model>& m, const Params& p,
                                           int64_t max_clip_samples);
mega::EngineOptions engine_options(const Params& p, int64_t max_clip_samples);
// Detector from the model's defaults and the command-line overrides; prints the error.
std::unique_ptr<mega::Detector> make_detector(const mega::Model& m, const Params& p);
// One detection line: "12.250\tyes\t0.973" or {"time_s": 12.25, "label": "yes", "score": 0.973}; flushed.
// Prints one detection (time in the stream, label, score) and returns its time
// in seconds. end_sample: samples consumed when the firing chunk completed.
double print_detection(const mega::Model& m, const Params& p, int64_t end_sample, const mega::Detection& d);
std::string json_escape(const std::string& s);

int cmd_info(const Params& p);
int cmd_selftest(const Params& p);
int cmd_classify(const Params& p);
int cmd_scan(const Params& p);
int cmd_listen(const Params& p);   // listen.cpp
int cmd_devices(const Params& p);  // listen.cpp

}  // namespace kws
