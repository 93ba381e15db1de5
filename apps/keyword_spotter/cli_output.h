// SPDX-License-Identifier: Apache-2.0
// What the commands print, shared: JSON objects (strings: apps/common/json_escape.h),
// durations, and whether what went to stdout arrived (apps/common/stdout_check.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli_options.h"
#include "json_escape.h"
#include "stdout_check.h"  // stdout_ok, check_stdout
#include "mega/detector.hpp"
#include "mega/mega.hpp"

namespace kws {

// One detection line: "12.250\tyes\t0.973" or
// {"type": "detection", "file": "a.wav", "time_s": 12.2500, "label": "yes", "score": 0.9730}; flushed.
// Prints one detection (time in the stream, label, score) and returns its time
// in seconds. end_sample: samples consumed when the firing chunk completed.
// file: the scanned file ("-": standard input; null for listen), always in the
// JSON object; a text line starts with it only when scan has several files.
double print_detection(const mega::Model& m, const Params& p, int64_t end_sample, const mega::Detection& d,
                       const std::string* file = nullptr);
// A file that failed, for --json: {"type": "error", "file": ..., "error": why} on stdout.
void print_file_error(const std::string& file, const std::string& why);
// "1.25 s"
std::string format_seconds(double s);

// One JSON object on one line of stdout, field by field:
//   JsonLine j; j.str("file", path); j.num("score", 0.97); j.end();
// Strings are valid UTF-8 whatever their bytes (json_escape.h).
class JsonLine {
 public:
  JsonLine& str(const char* key, const std::string& v);
  // "file": path, and where path is not valid UTF-8 (its bad bytes shown as
  // U+FFFD) also "file_hex": its exact bytes in hex, so a tool can open it.
  JsonLine& file(const std::string& path);
  JsonLine& num(const char* key, double v);  // %.7g; NaN and Inf as null
  JsonLine& fixed(const char* key, double v, int decimals);  // %.*f; NaN and Inf as null
  JsonLine& integer(const char* key, int64_t v);
  JsonLine& boolean(const char* key, bool v);
  JsonLine& strings(const char* key, const std::vector<std::string>& v);
  JsonLine& nums(const char* key, const std::vector<float>& v);
  JsonLine& raw(const char* key, const std::string& json);  // v already JSON (a nested object)
  std::string text() const { return "{" + body_ + "}"; }
  void end() const;  // prints text() and a newline

 private:
  JsonLine& add(const char* key, const std::string& json);
  std::string body_;
};

}  // namespace kws
