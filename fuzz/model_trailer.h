// A .mega file's 12-byte trailer ("MGCK", total size, CRC-32 of the body; see
// formats/), rewritten so that a mutated model still passes the trailer
// checks and the mutation reaches the FlatBuffers verifier and the semantic
// checks behind them. The fuzzer's own copy: fuzz/ does not build on tests/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mega_fuzz {

constexpr size_t kTrailerBytes = 12;

// CRC-32 (IEEE, reflected), the trailer's checksum.
inline uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return ~c;
}

// Rewrites the trailer's size and checksum (little-endian) for the bytes as they are now.
inline void reseal(std::vector<uint8_t>* b) {
  if (b->size() < kTrailerBytes) return;
  const size_t body = b->size() - kTrailerBytes;
  const uint32_t size = uint32_t(b->size()), c = crc32(b->data(), body);
  for (int i = 0; i < 4; ++i) {
    (*b)[body + 4 + size_t(i)] = uint8_t(size >> (8 * i));
    (*b)[body + 8 + size_t(i)] = uint8_t(c >> (8 * i));
  }
}

}  // namespace mega_fuzz
