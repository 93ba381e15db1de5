"""A WAV reader with no dependency beyond NumPy: PCM (8, 16, 24, 32 bit) and
IEEE float (32, 64 bit), any channel count, scaled and mixed down to mono
float32 as keyword_spotter's libsndfile reader does (x / 2^(bits-1); 8-bit is
unsigned: (x - 128) / 128; channels averaged). It does not resample."""

import os
import struct

import numpy as np

_PCM, _FLOAT, _EXTENSIBLE = 1, 3, 0xFFFE


def read_wav(path):
    """(samples, sample_rate, n_frames): samples is mono float32.

    Raises FileNotFoundError / IsADirectoryError / OSError for a file that
    cannot be read, ValueError for one that is not a WAV this reader takes."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError(f"{path}: not a WAV file (RIFF/WAVE); convert it, e.g. with sox, or use keyword_spotter")
    fmt = None
    pos = 12
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        body = pos + 8
        if cid == b"fmt ":
            if size < 16:
                raise ValueError(f"{path}: malformed fmt chunk")
            tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", data, body)
            if tag == _EXTENSIBLE and size >= 26:
                tag = struct.unpack_from("<H", data, body + 24)[0]
            fmt = (tag, channels, rate, bits)
        elif cid == b"data":
            if fmt is None:
                raise ValueError(f"{path}: data before the fmt chunk")
            available = len(data) - body
            if size > available and size != 0xFFFFFFFF:
                raise ValueError(f"{path}: file is truncated: the header announces {size} bytes of audio, "
                                 f"{available} are there")
            return _decode(path, data[body:body + min(size, available)], *fmt)
        pos = body + size + (size & 1)
    raise ValueError(f"{path}: no audio data chunk")


def _decode(path, raw, tag, channels, rate, bits):
    if channels < 1 or channels > 64:
        raise ValueError(f"{path}: unsupported channel count {channels}")
    if rate < 1000 or rate > 768000:
        raise ValueError(f"{path}: unsupported sample rate {rate} Hz")
    width = bits // 8
    frame = width * channels
    n_frames = len(raw) // frame if frame else 0
    if n_frames == 0:
        raise ValueError(f"{path}: no audio in the file (0 frames)")
    raw = raw[:n_frames * frame]
    if tag == _PCM and bits == 8:
        x = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif tag == _PCM and bits == 16:
        x = np.frombuffer(raw, "<i2").astype(np.float32) / np.float32(32768.0)
    elif tag == _PCM and bits == 24:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        v = (b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) << 8 >> 8  # sign-extend
        x = v.astype(np.float32) / np.float32(8388608.0)
    elif tag == _PCM and bits == 32:
        x = (np.frombuffer(raw, "<i4").astype(np.float64) / 2147483648.0).astype(np.float32)
    elif tag == _FLOAT and bits == 32:
        x = np.frombuffer(raw, "<f4").astype(np.float32)
    elif tag == _FLOAT and bits == 64:
        x = np.frombuffer(raw, "<f8").astype(np.float32)
    else:
        raise ValueError(f"{path}: unsupported WAV encoding (format {tag}, {bits} bits): use PCM 8/16/24/32-bit "
                         "or float 32/64-bit")
    if channels > 1:  # the mean, summed in double as the CLI's reader does
        x = (x.reshape(-1, channels).astype(np.float64).sum(axis=1) / channels).astype(np.float32)
    return np.ascontiguousarray(x, dtype=np.float32), rate, n_frames
