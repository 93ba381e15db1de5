// SPDX-License-Identifier: Apache-2.0
// What the commands print, shared: JSON objects, detection lines, durations.
#include "cli_output.h"

#include <cmath>
#include <cstdio>

namespace kws {

double print_detection(const mega::Model& m, const Params& p, int64_t end_sample, const mega::Detection& d,
                       const std::string* file) {
  const mega::HParams& hp = m.hparams();
  const double time_s = mega::Detector::event_time_s(d, end_sample, hp.chunk_samples(), hp.sample_rate);
  const std::string& label = m.labels()[size_t(d.label)];
  if (p.json) {
    JsonLine j;
    j.str("type", "detection");
    if (file) j.file(*file);
    j.fixed("time_s", time_s, 4).str("label", label).fixed("score", d.score, 4).end();
  } else {
    if (file && p.files.size() > 1) std::printf("%s\t", file->c_str());
    std::printf("%.3f\t%s\t%.3f\n", time_s, label.c_str(), d.score);
  }
  stdout_ok();  // flushed at once (a failed write is reported at exit)
  return time_s;
}

void print_file_error(const std::string& file, const std::string& why) {
  JsonLine().str("type", "error").file(file).str("error", why).end();
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

JsonLine& JsonLine::add(const char* key, const std::string& json) {
  body_ += (body_.empty() ? "\"" : ", \"") + json_escape(key) + "\": " + json;
  return *this;
}

JsonLine& JsonLine::str(const char* key, const std::string& v) { return add(key, "\"" + json_escape(v) + "\""); }

JsonLine& JsonLine::file(const std::string& path) {
  str("file", path);
  return is_utf8(path) ? *this : str("file_hex", hex_bytes(path));
}

JsonLine& JsonLine::fixed(const char* key, double v, int decimals) {
  if (!std::isfinite(v)) return add(key, "null");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return add(key, buf);
}

JsonLine& JsonLine::num(const char* key, double v) {
  if (!std::isfinite(v)) return add(key, "null");
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", v);
  return add(key, buf);
}

JsonLine& JsonLine::integer(const char* key, int64_t v) { return add(key, std::to_string(v)); }

JsonLine& JsonLine::boolean(const char* key, bool v) { return add(key, v ? "true" : "false"); }

JsonLine& JsonLine::strings(const char* key, const std::vector<std::string>& v) {
  std::string a;
  for (const std::string& s : v) a += (a.empty() ? "\"" : ", \"") + json_escape(s) + "\"";
  return add(key, "[" + a + "]");
}

JsonLine& JsonLine::nums(const char* key, const std::vector<float>& v) {
  std::string a;
  char buf[32];
  for (float x : v) {
    std::snprintf(buf, sizeof buf, "%.7g", double(x));
    a += (a.empty() ? "" : ", ") + std::string(std::isfinite(x) ? buf : "null");
  }
  return add(key, "[" + a + "]");
}

JsonLine& JsonLine::raw(const char* key, const std::string& json) { return add(key, json); }

void JsonLine::end() const { std::printf("%s\n", text().c_str()); }

}  // namespace kws
