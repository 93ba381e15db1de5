// SPDX-License-Identifier: Apache-2.0
// Resealing a .mega file's trailer (mega_format.h: "MGCK", size, CRC-32 of
// the body), for the tests and fuzzers that alter a file on purpose and want
// the damage to reach the checks behind the checksum. Not used by the runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mega_format.h"

namespace mega {

inline uint32_t file_crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? kCrc32Polynomial ^ (c >> 1) : c >> 1;
  }
  return ~c;
}

// Rewrites the trailer's size and checksum for the bytes as they are now.
inline void reseal_trailer(std::vector<uint8_t>* b) {
  if (b->size() < kTrailerBytes) return;
  const size_t body = b->size() - kTrailerBytes;
  const uint32_t size = uint32_t(b->size()), c = file_crc32(b->data(), body);
  for (int i = 0; i < 4; ++i) {
    (*b)[body + kTrailerLengthOffset + size_t(i)] = uint8_t(size >> (8 * i));
    (*b)[body + kTrailerCrcOffset + size_t(i)] = uint8_t(c >> (8 * i));
  }
}

}  // namespace mega
