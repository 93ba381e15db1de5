# SPDX-License-Identifier: Apache-2.0
"""The package's WAV reader (python/mega_kws/_wav.py), the project's one WAV
parser in Python, on what the training tools take from it: the samples as
stored (read_frames) for every encoding, the header's description, files of
0 frames when asked, and PCM whose samples are narrower than their container
(12-bit in 16), read as keyword_spotter's libsndfile reads them. What it
gives the runtime (float32 as the CLI reads it) is tests/python/test_api.py's."""

import io
import struct

import numpy as np
import pytest

import mega_kws
from mega_kws import _wav
from tests.python.wav_files import FLOAT, riff, stored


@pytest.mark.parametrize("bits,channels", [(8, 1), (16, 2), (24, 3), (32, 1)])
def test_read_frames_gives_the_samples_as_stored(bits, channels):
    s = stored(np.random.default_rng(bits), bits, 1000, channels)
    with _wav.WavReader(io.BytesIO(riff(s, bits))) as w:
        assert (w.encoding, w.bits, w.channels, w.n_frames, w.extensible) == ("pcm", bits, channels, 1000, False)
        got = w.read_frames(600)
        np.testing.assert_array_equal(got, s[:600])
        assert got.shape == (600, channels)
        np.testing.assert_array_equal(w.read_frames(600), s[600:])
        assert w.read_frames(600).shape == (0, channels)


def test_float_and_extensible_headers_are_described():
    x = np.array([[0.5, -0.25], [np.nan, 1.5]], np.float64)
    with _wav.WavReader(io.BytesIO(riff(x, 64, FLOAT, extensible=True))) as w:
        assert (w.encoding, w.bits, w.extensible) == ("float", 64, True)
        np.testing.assert_array_equal(w.read_frames(2), x)


def test_12_bit_pcm_reads_as_its_16_bit_container():
    s = stored(np.random.default_rng(5), 16, 2000, 1) & ~15
    data = bytearray(riff(s, 16))
    data[34:36] = struct.pack("<H", 12)  # bits per sample: 12, in 2 bytes
    x, rate, n = mega_kws.read_wav(io.BytesIO(bytes(data)))
    want, _, _ = mega_kws.read_wav(io.BytesIO(riff(s, 16)))
    np.testing.assert_array_equal(x, want)
    assert (rate, n) == (16000, 2000)


def test_a_file_of_no_frames_is_refused_unless_allowed():
    data = riff(np.zeros((0, 1), np.int16), 16)
    with pytest.raises(ValueError, match="no audio in the file"):
        mega_kws.read_wav(io.BytesIO(data))
    with _wav.WavReader(io.BytesIO(data), allow_empty=True) as w:
        assert w.n_frames == 0 and w.read(10).shape == (0,) and w.read_frames(10).shape == (0, 1)
