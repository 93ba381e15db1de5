# SPDX-License-Identifier: Apache-2.0
"""A WAV reader with no dependency beyond NumPy: PCM (8, 16, 24, 32 bit) and
IEEE float (32, 64 bit), plain or WAVE_FORMAT_EXTENSIBLE, any channel count,
scaled and mixed down to mono float32 as keyword_spotter's libsndfile reader
does (x / 2^(bits-1); 8-bit is unsigned: (x - 128) / 128; channels averaged).
It does not resample.

open_wav reads a file in blocks (memory bounded by the block, whatever the
file's length); read_wav reads it whole. WavReader.read_frames gives the
samples as stored, for the training tools' int16 reader
(tools/mega_kws_tools/audio.py): the project's one WAV parser in Python,
standing alone (NumPy and the standard library) so that the tools can load
this file without the package's library."""

import io
import os
import struct

import numpy as np

_PCM, _FLOAT, _EXTENSIBLE = 1, 3, 0xFFFE
_ENCODINGS = {(_PCM, 8), (_PCM, 16), (_PCM, 24), (_PCM, 32), (_FLOAT, 32), (_FLOAT, 64)}


class WavReader:
    """An open WAV file: .path, .sample_rate, .channels, .n_frames (the whole
    file's, known from the header), .encoding ("pcm" or "float"), .bits (of
    a stored sample: 16 for 12-bit PCM, which is stored in 16),
    .extensible (a WAVE_FORMAT_EXTENSIBLE header); read(n) returns the next n
    frames (fewer at the end, none after it) as mono float32, read_frames(n)
    as stored. Close it (or use it in a with block) to close the file.

    source: a path, or a binary file object (its .name, if any, is the .path
    messages give); one that cannot seek (standard input, a pipe) is read
    whole first. A file object passed in is left open. allow_empty: a file
    of 0 frames is read (as nothing) instead of refused.

    Raises FileNotFoundError / IsADirectoryError / OSError for a file that
    cannot be read, ValueError for one that is not a WAV this reader takes
    (both checked when it is opened)."""

    def __init__(self, source, allow_empty=False):
        self._allow_empty = allow_empty
        if hasattr(source, "read"):
            self.path = str(getattr(source, "name", "<stream>"))
            seekable = getattr(source, "seekable", lambda: False)()
            self._f = source if seekable else io.BytesIO(source.read())
            self._owned = not seekable
        else:
            self.path = os.fspath(source)
            self._f, self._owned = open(self.path, "rb"), True
        try:
            self._parse_header()
        except BaseException:
            self.close()
            raise
        self._left = self.n_frames

    def _parse_header(self):
        f, path = self._f, self.path
        size_of_file = f.seek(0, os.SEEK_END)
        f.seek(0)
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            raise ValueError(f"{path}: not a WAV file (RIFF/WAVE); convert it, e.g. with sox, or use keyword_spotter")
        fmt = None
        pos = 12
        while pos + 8 <= size_of_file:
            f.seek(pos)
            cid, size = struct.unpack("<4sI", f.read(8))
            body = pos + 8
            if cid == b"fmt ":
                if size < 16:
                    raise ValueError(f"{path}: malformed fmt chunk")
                raw = f.read(min(size, 26))
                if len(raw) < 16:
                    raise ValueError(f"{path}: malformed fmt chunk")
                tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", raw)
                self.extensible = tag == _EXTENSIBLE
                if self.extensible and len(raw) >= 26:
                    tag = struct.unpack_from("<H", raw, 24)[0]  # the subformat GUID's first two bytes
                fmt = (tag, channels, rate, bits)
            elif cid == b"data":
                if fmt is None:
                    raise ValueError(f"{path}: data before the fmt chunk")
                available = size_of_file - body
                if size > available and size != 0xFFFFFFFF:
                    raise ValueError(f"{path}: file is truncated: the header announces {size} bytes of audio, "
                                     f"{available} are there")
                self._format(*fmt, n_bytes=min(size, available))
                return
            pos = body + size + (size & 1)
        raise ValueError(f"{path}: no audio data chunk")

    def _format(self, tag, channels, rate, bits, n_bytes):
        path = self.path
        if channels < 1 or channels > 64:
            raise ValueError(f"{path}: unsupported channel count {channels}")
        if rate < 1000 or rate > 768000:
            raise ValueError(f"{path}: unsupported sample rate {rate} Hz")
        if tag == _PCM and 0 < bits < 32:
            bits = (bits + 7) // 8 * 8  # e.g. 12-bit samples, left-justified in 16 bits: read as libsndfile reads them
        if (tag, bits) not in _ENCODINGS:
            raise ValueError(f"{path}: unsupported WAV encoding (format {tag}, {bits} bits): use PCM "
                             "8/16/24/32-bit or float 32/64-bit")
        self.sample_rate, self.channels, self.bits = rate, channels, bits
        self.encoding = "pcm" if tag == _PCM else "float"
        self._frame_bytes = bits // 8 * channels
        self.n_frames = n_bytes // self._frame_bytes
        if self.n_frames == 0 and not self._allow_empty:
            raise ValueError(f"{path}: no audio in the file (0 frames)")

    def read(self, n):
        """The next min(n, what is left) frames, mono float32."""
        return _mono_float(self.read_frames(n), self.encoding, self.bits)

    def read_frames(self, n):
        """The next min(n, what is left) frames as stored, [frames, channels]:
        uint8 (8-bit PCM is unsigned), int16, int32 (24-bit PCM sign-extended,
        and 32-bit), float32 or float64."""
        n = max(0, min(int(n), self._left))
        raw = self._f.read(n * self._frame_bytes)
        if len(raw) != n * self._frame_bytes:  # the file shrank after it was opened
            raise ValueError(f"{self.path}: file is truncated: it ended {self._left - len(raw) // self._frame_bytes} "
                             "frames early")
        self._left -= n
        return _samples(raw, self.encoding, self.bits).reshape(n, self.channels)

    def close(self):
        if self._owned:
            self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_wav(path):
    """A WavReader on path, or on a binary file object (see WavReader): for
    reading a long file in blocks."""
    return WavReader(path)


def read_wav(path):
    """(samples, sample_rate, n_frames): samples is mono float32, the whole file
    (path: or a binary file object, as for open_wav).

    Raises FileNotFoundError / IsADirectoryError / OSError for a file that
    cannot be read, ValueError for one that is not a WAV this reader takes."""
    with WavReader(path) as w:
        return w.read(w.n_frames), w.sample_rate, w.n_frames


def _samples(raw, encoding, bits):
    """Little-endian bytes -> the samples as stored (see read_frames)."""
    if encoding == "float":
        return np.frombuffer(raw, "<f4" if bits == 32 else "<f8")
    if bits == 24:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        return (b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)) << 8 >> 8  # sign-extend
    return np.frombuffer(raw, {8: np.uint8, 16: "<i2", 32: "<i4"}[bits])


def _mono_float(frames, encoding, bits):
    """[frames, channels] as stored -> mono float32 in [-1, 1] (libsndfile's scale)."""
    if encoding == "float":
        x = frames.astype(np.float32)
    elif bits == 8:
        x = (frames.astype(np.float32) - 128.0) / 128.0
    elif bits == 32:
        x = (frames.astype(np.float64) / 2147483648.0).astype(np.float32)
    else:
        x = frames.astype(np.float32) / np.float32(2.0 ** (bits - 1))
    if x.shape[1] > 1:  # the mean, summed in double as the CLI's reader does
        return np.ascontiguousarray((x.astype(np.float64).sum(axis=1) / x.shape[1]).astype(np.float32))
    return np.ascontiguousarray(x[:, 0], dtype=np.float32)
