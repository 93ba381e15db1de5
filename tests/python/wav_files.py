# SPDX-License-Identifier: Apache-2.0
"""WAV files written by hand, byte for byte, for the tests of the WAV readers
(tests/python/test_wav.py, tests/tools/test_audio.py): every encoding, plain
or WAVE_FORMAT_EXTENSIBLE, and headers that lie about the data's size."""

import struct

import numpy as np

PCM, FLOAT, EXTENSIBLE = 1, 3, 0xFFFE


def riff(samples, bits, tag=PCM, rate=16000, extensible=False, data_size=None):
    """A WAV file's bytes, written by hand: samples [frames, channels] as stored
    (uint8, int16, int32 holding 24 bits, int32, float32 or float64)."""
    channels = samples.shape[1]
    if bits == 24:
        v = samples.astype("<i4").reshape(-1, 1).view(np.uint8).reshape(-1, 4)
        data = v[:, :3].tobytes()
    else:
        data = samples.astype(samples.dtype.newbyteorder("<")).tobytes()
    block = channels * bits // 8
    fmt = struct.pack("<HHIIHH", EXTENSIBLE if extensible else tag, channels, rate, rate * block, block, bits)
    if extensible:  # cbSize, valid bits, channel mask, the subformat GUID (its first two bytes: the format)
        fmt += struct.pack("<HHI", 22, bits, 0) + struct.pack("<H", tag) + bytes.fromhex(
            "000000001000800000aa00389b71")
    size = len(data) if data_size is None else data_size
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", size) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def stored(rng, bits, n, channels):
    """Random samples as a WAV stores them, over each encoding's full range."""
    if bits == 8:
        return rng.integers(0, 256, (n, channels)).astype(np.uint8)
    if bits == 16:
        return rng.integers(-32768, 32768, (n, channels)).astype(np.int16)
    if bits == 24:
        return rng.integers(-(1 << 23), 1 << 23, (n, channels)).astype(np.int32)
    return rng.integers(-(1 << 31), 1 << 31, (n, channels), dtype=np.int64).astype(np.int32)
