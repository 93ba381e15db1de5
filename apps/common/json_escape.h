// A string's characters escaped for a JSON string literal (quotes, backslashes,
// control characters). keyword_spotter's JSON output and the audio-device
// listing (apps/audio/audio_devices.cpp) write through it.
#pragma once

#include <cstdio>
#include <string>

namespace kws {

inline std::string json_escape(const std::string& s) {
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

}  // namespace kws
