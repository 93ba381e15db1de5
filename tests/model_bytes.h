// A .mega file's trailer (formats/mega_format.h: "MGCK", size, CRC-32 of the
// body), for tests and fuzzers that alter a file on purpose and want the
// damage to reach the checks behind the checksum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mega_format.h"

namespace mega_test {

using mega::kTrailerBytes;

inline uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? mega::kCrc32Polynomial ^ (c >> 1) : c >> 1;
  }
  return ~c;
}

// Rewrites the trailer's size and checksum for the bytes as they are now.
inline void reseal(std::vector<uint8_t>* b) {
  if (b->size() < kTrailerBytes) return;
  const size_t body = b->size() - kTrailerBytes;
  const uint32_t size = uint32_t(b->size()), c = crc32(b->data(), body);
  for (int i = 0; i < 4; ++i) {
    (*b)[body + mega::kTrailerLengthOffset + size_t(i)] = uint8_t(size >> (8 * i));
    (*b)[body + mega::kTrailerCrcOffset + size_t(i)] = uint8_t(c >> (8 * i));
  }
}

}  // namespace mega_test
