// What the commands print, shared: JSON strings, detection lines, durations.
#pragma once

#include <cstdint>
#include <string>

#include "cli_options.h"
#include "mega/detector.hpp"
#include "mega/mega.hpp"

namespace kws {

std::string json_escape(const std::string& s);
// One detection line: "12.250\tyes\t0.973" or {"time_s": 12.25, "label": "yes", "score": 0.973}; flushed.
// Prints one detection (time in the stream, label, score) and returns its time
// in seconds. end_sample: samples consumed when the firing chunk completed.
// file (scan of several files): the line starts with it ("a.wav\t12.250\t...",
// {"file": "a.wav", "time_s": ...}).
double print_detection(const mega::Model& m, const Params& p, int64_t end_sample, const mega::Detection& d,
                       const std::string* file = nullptr);
// "1.25 s"
std::string format_seconds(double s);

}  // namespace kws
