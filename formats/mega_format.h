// SPDX-License-Identifier: Apache-2.0
// The .mega file's framing, defined once for C++: the newest schema version
// this runtime reads, and the trailer after the FlatBuffer. The FlatBuffer
// itself is formats/mega_model.fbs. Python's twin is
// tools/mega_kws_tools/convert/mega_format.py; tests/tools/test_mega_format.py checks that the two,
// and the schema's version history, agree.
//
// File layout:  FlatBuffer (identifier "MEGA")  |  trailer, 12 bytes:
//   "MGCK"  |  u32 LE total file length  |  u32 LE CRC-32 of the FlatBuffer
// The trailer lets a loader refuse a truncated or bit-flipped file whatever
// byte is hit, before the FlatBuffers verifier runs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mega {

// Bump with a new entry in mega_model.fbs's version history. 6: TeacherEmbedding
constexpr uint32_t kSchemaVersion = 6;

constexpr char kFileIdentifier[4] = {'M', 'E', 'G', 'A'};  // the FlatBuffer's, at bytes 4..7

constexpr char kTrailerMagic[4] = {'M', 'G', 'C', 'K'};
constexpr size_t kTrailerLengthOffset = 4;  // u32 LE: the whole file's length, trailer included
constexpr size_t kTrailerCrcOffset = 8;     // u32 LE: CRC-32 of every byte before the trailer
constexpr size_t kTrailerBytes = 12;

// CRC-32 as zlib computes it: reflected polynomial, initial value and final
// XOR all ones.
constexpr uint32_t kCrc32Polynomial = 0xEDB88320u;

}  // namespace mega
