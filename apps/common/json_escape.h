// SPDX-License-Identifier: Apache-2.0
// A string's characters escaped for a JSON string literal (quotes, backslashes,
// control characters; as Python's json.dumps writes them), always valid UTF-8: a byte that is not part of a valid
// UTF-8 sequence (a file name in Latin-1, say) becomes U+FFFD. keyword_spotter's
// JSON output and the audio-device listing (apps/audio/audio_devices.cpp) write
// through it; file names keep their exact bytes in "file_hex" (cli_output.h).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace kws {

// The length of the valid UTF-8 sequence at s[i] (1-4), or 0 if there is none
// (a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF,
// cut short); then *bad is the length of the invalid part that one U+FFFD
// replaces: its lead byte and the continuation bytes that fit it (the
// "maximal subpart", as Python's and browsers' decoders count).
inline size_t utf8_sequence_length(const std::string& s, size_t i, size_t* bad = nullptr) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // overlong
    if (c == 0xED) hi = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // overlong
    if (c == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  }
  size_t k = 1;
  for (; k < n && i + k < s.size(); ++k) {
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) break;
  }
  if (n > 0 && k == n) return n;
  if (bad) *bad = k;
  return 0;
}

inline bool is_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

inline std::string json_escape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t bad = 1;
    const size_t n = utf8_sequence_length(s, i, &bad);
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD, the replacement character
      i += bad;
      continue;
    }
    if (n > 1) {
      out.append(s, i, n);
      i += n;
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || c == 0x7F) {  // DEL too: no raw control byte reaches a terminal
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

// "yes\xff.wav" -> "796573ff2e776176": bytes a JSON string cannot hold, exactly.
inline std::string hex_bytes(const std::string& s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

}  // namespace kws
