# SPDX-License-Identifier: Apache-2.0
"""The .mega file's framing, defined once for Python: the newest schema version
the tools write and read, and the trailer after the FlatBuffer. The FlatBuffer
itself is formats/mega_model.fbs; C++'s twin is formats/mega_format.h, and
tests/tools/test_mega_format.py checks that the two, and the schema's version
history, agree.

File layout:  FlatBuffer (identifier "MEGA")  |  trailer, 12 bytes:
  b"MGCK"  |  u32 LE total file length  |  u32 LE CRC-32 of the FlatBuffer
"""

import struct
import zlib

SCHEMA_VERSION = 6  # bump with a new entry in mega_model.fbs's version history; 6: TeacherEmbedding

FILE_IDENTIFIER = b"MEGA"  # the FlatBuffer's, at bytes 4..7

TRAILER_MAGIC = b"MGCK"
TRAILER_LENGTH_OFFSET = 4  # u32 LE: the whole file's length, trailer included
TRAILER_CRC_OFFSET = 8     # u32 LE: CRC-32 of every byte before the trailer
TRAILER_BYTES = 12

CRC32_POLYNOMIAL = 0xEDB88320  # zlib's CRC-32 (reflected; initial value and final XOR all ones): zlib.crc32


class FormatError(ValueError):
    pass


def add_trailer(flatbuffer: bytes) -> bytes:
    """A whole .mega file: the FlatBuffer and its trailer."""
    trailer = bytearray(TRAILER_BYTES)
    trailer[:len(TRAILER_MAGIC)] = TRAILER_MAGIC
    struct.pack_into("<I", trailer, TRAILER_LENGTH_OFFSET, len(flatbuffer) + TRAILER_BYTES)
    struct.pack_into("<I", trailer, TRAILER_CRC_OFFSET, zlib.crc32(flatbuffer))
    return flatbuffer + bytes(trailer)


def strip_trailer(data: bytes) -> bytes:
    """The FlatBuffer inside a .mega file, once its trailer and identifier check out."""
    if len(data) < TRAILER_BYTES + 8 or data[-TRAILER_BYTES:][:len(TRAILER_MAGIC)] != TRAILER_MAGIC:
        raise FormatError("not a .mega file (no trailer; truncated or another format)")
    trailer = data[-TRAILER_BYTES:]
    (total,) = struct.unpack_from("<I", trailer, TRAILER_LENGTH_OFFSET)
    (crc,) = struct.unpack_from("<I", trailer, TRAILER_CRC_OFFSET)
    if total != len(data):
        raise FormatError(f"the file is {len(data)} bytes but its trailer says {total} (truncated or padded)")
    body = data[:-TRAILER_BYTES]
    if zlib.crc32(body) != crc:
        raise FormatError("CRC-32 mismatch: the file is corrupt")
    if body[4:8] != FILE_IDENTIFIER:
        raise FormatError("not a .mega file (wrong FlatBuffer identifier)")
    return body
