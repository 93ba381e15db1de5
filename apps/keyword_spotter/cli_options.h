// SPDX-License-Identifier: Apache-2.0
// keyword_spotter's command line: the options every command shares, their
// defaults (shown by --help) and the exit codes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine_flags.h"

namespace kws {

constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitModel = 3, kExitDevice = 4;

// The engine's options (engine_flags.h) and those of the commands.
struct Params : EngineFlags {
  std::string command;
  std::string model_path;
  bool json = false;
  int64_t block_size = 0;       // classify: 0 = whole clip (offline)
  std::vector<std::string> files;
  // detection (scan, listen); negative = from the model file
  float threshold = -1.0f;
  std::vector<std::pair<std::string, float>> label_thresholds;  // --threshold go=0.8,on=0.85
  int32_t smoothing = -1;
  int32_t refractory_ms = -1;
  float sensitivity = -1.0f;
  // listen
  std::string device;           // name substring or index; empty = default input
  double seconds = 0.0;         // listen: stop after this long (0 = until Ctrl-C)
  bool verbose = false;         // listen, devices: the audio libraries' own messages (ALSA, JACK) on stderr
};

// Fills *p from argv. Returns -1 to go on and run p->command, else the exit
// code (after --help or --version, or a usage error printed on stderr).
// Options take their value as the next argument or after '=' (--model=PATH);
// an option that does not apply to the command is a usage error. Without -m,
// the model is the default one (apps/common/default_model.h).
int parse_args(int argc, char** argv, Params* p);

}  // namespace kws
