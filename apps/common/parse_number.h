// SPDX-License-Identifier: Apache-2.0
// Command-line numbers, strictly: the whole argument must be a number in
// [lo, hi] (no trailing text, no overflow, no NaN). For keyword_spotter and
// bench/mega_rtf.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>

namespace kws {

inline bool parse_int(const char* s, int64_t lo, int64_t hi, int64_t* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

inline bool parse_float(const char* s, double lo, double hi, double* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (errno != 0 || *end != '\0' || !(v >= lo && v <= hi)) return false;
  *out = v;
  return true;
}

}  // namespace kws
