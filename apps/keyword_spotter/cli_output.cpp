// What the commands print, shared: JSON strings, detection lines, durations.
#include "cli_output.h"

#include <cstdio>

namespace kws {

std::string json_escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out;
}

double print_detection(const mega::Model& m, const Params& p, int64_t end_sample, const mega::Detection& d,
                       const std::string* file) {
  const mega::HParams& hp = m.hparams();
  const double time_s = mega::Detector::event_time_s(d, end_sample, hp.chunk_samples(), hp.sample_rate);
  const std::string& label = m.labels()[size_t(d.label)];
  if (file && p.json) std::printf("{\"file\": \"%s\", ", json_escape(*file).c_str());
  if (file && !p.json) std::printf("%s\t", file->c_str());
  if (p.json) {
    std::printf("%s\"time_s\": %.4f, \"label\": \"%s\", \"score\": %.4f}\n", file ? "" : "{", time_s,
                json_escape(label).c_str(), d.score);
  } else {
    std::printf("%.3f\t%s\t%.3f\n", time_s, label.c_str(), d.score);
  }
  std::fflush(stdout);
  return time_s;
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

}  // namespace kws
