# SPDX-License-Identifier: Apache-2.0
"""The tools' WAV reader (mega_kws_tools.audio) over the project's one WAV
parser (python/mega_kws/_wav.py): int16 at 16 kHz, bit for bit what the
tools always read for plain PCM; 24-bit, float and WAVE_FORMAT_EXTENSIBLE
read too; truncated files and other rates refused in one line naming the
file; the data fetchers' choice between read_wav and sox (plain_pcm_16k);
and neither package needing the other to be imported."""

import os
import shutil
import struct
import subprocess
import sys
import wave

import numpy as np
import pytest

import mega_kws
from mega_kws_tools import audio
from mega_kws_tools.data.fetch_real_sc import decode_wav
from tests.python.wav_files import FLOAT, riff, stored

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def as_before(path):
    """What the tools' reader gave before it used the shared parser (Python's
    wave module; 8-, 16- and 32-bit PCM at 16 kHz): the reference."""
    with wave.open(path, "rb") as w:
        width, channels = w.getsampwidth(), w.getnchannels()
        raw = w.readframes(w.getnframes())
    if width == 2:
        x = np.frombuffer(raw, dtype="<i2").copy()
    elif width == 1:
        x = ((np.frombuffer(raw, dtype=np.uint8).astype(np.int32) - 128) << 8).astype(np.int16)
    else:
        x = (np.frombuffer(raw, dtype="<i4") >> 16).astype(np.int16)
    if channels > 1:
        mixed = x[: len(x) // channels * channels].reshape(-1, channels).mean(axis=1)
        x = np.clip(np.round(mixed), -32768, 32767).astype(np.int16)
    return x


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("channels", [1, 2, 3])
def test_plain_pcm_reads_bit_for_bit_as_before(tmp_path, bits, channels):
    rng = np.random.default_rng(bits * 10 + channels)
    path = write(tmp_path / "a.wav", riff(stored(rng, bits, 4001, channels), bits))
    got = audio.read_wav(path)
    want = as_before(path)
    assert got.dtype == np.int16 and got.flags.writeable and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    with open(path, "rb") as f:  # the file's bytes read the same
        np.testing.assert_array_equal(audio.read_wav(f.read(), "bytes.wav"), want)
    assert audio.plain_pcm_16k(path)


def test_24_bit_float_and_extensible_are_read(tmp_path):
    rng = np.random.default_rng(7)
    s24 = stored(rng, 24, 3000, 1)
    p = write(tmp_path / "24.wav", riff(s24, 24))
    np.testing.assert_array_equal(audio.read_wav(p), (s24[:, 0] >> 8).astype(np.int16))
    # float: x * 32768 rounded, clipped to int16; NaN and Inf as 0, as the runtime takes them
    x = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -2.0, 1 / 65536, np.nan, np.inf, -np.inf, 0.25])
    want = np.array([0, 16384, -16384, 32767, -32768, 32767, -32768, 0, 0, 0, 0, 8192], np.int16)
    for dtype, bits in ((np.float32, 32), (np.float64, 64)):
        p = write(tmp_path / f"f{bits}.wav", riff(x.astype(dtype)[:, None], bits, FLOAT))
        np.testing.assert_array_equal(audio.read_wav(p), want)
        assert not audio.plain_pcm_16k(p)  # the fetchers hand it to sox, as before
    s16 = stored(rng, 16, 3000, 2)
    plain = audio.read_wav(write(tmp_path / "plain.wav", riff(s16, 16)))
    p = write(tmp_path / "ext.wav", riff(s16, 16, extensible=True))
    np.testing.assert_array_equal(audio.read_wav(p), plain)
    assert not audio.plain_pcm_16k(p) and not audio.plain_pcm_16k(tmp_path / "24.wav")


def test_bad_files_are_refused_in_one_line_naming_the_file(tmp_path):
    x = np.zeros((1600, 1), np.int16)
    cases = {
        "8k.wav": (riff(x, 16, rate=8000), "need 16 kHz audio, got 8000 Hz"),
        "cut.wav": (riff(x, 16, data_size=6400), "file is truncated: the header announces 6400 bytes of audio, "
                                                 "3200 are there"),
        "text.wav": (b"hello, this is not audio at all" * 4, "not a WAV file"),
        "alaw.wav": (riff(x.astype(np.uint8), 8, tag=6), "unsupported WAV encoding (format 6, 8 bits)"),
    }
    for name, (data, message) in cases.items():
        path = write(tmp_path / name, data)
        for src in (path, data):
            with pytest.raises(ValueError) as e:
                audio.read_wav(src, name)
            assert message in str(e.value) and str(e.value).startswith(name if src is data else path)
            assert "\n" not in str(e.value)
        assert not audio.plain_pcm_16k(path)
    with pytest.raises(FileNotFoundError):
        audio.read_wav(str(tmp_path / "absent.wav"))


def test_12_bit_pcm_reads_as_its_16_bit_container(tmp_path):
    # as the wave module read it before, and as keyword_spotter's libsndfile reads it
    s = stored(np.random.default_rng(12), 16, 3000, 2) & ~15  # 12 significant bits, left-justified
    data = bytearray(riff(s, 16))
    data[34:36] = struct.pack("<H", 12)
    path = write(tmp_path / "12.wav", bytes(data))
    np.testing.assert_array_equal(audio.read_wav(path), as_before(path))
    assert audio.plain_pcm_16k(path)


def test_an_empty_wav_reads_as_no_samples(tmp_path):
    path = write(tmp_path / "empty.wav", riff(np.zeros((0, 1), np.int16), 16))
    got = audio.read_wav(path)
    assert got.dtype == np.int16 and got.shape == (0,)
    np.testing.assert_array_equal(got, as_before(path))


def test_the_fetcher_decodes_a_truncated_clip_as_before(tmp_path):
    # The shared parser refuses a truncated file where the wave module read what was there; the fetcher
    # hands it to sox, which gives those same samples.
    if not shutil.which("sox"):
        pytest.fail("sox is not installed (scripts/setup.sh installs it)")
    rng = np.random.default_rng(3)
    s = stored(rng, 16, 8000, 1)
    data = riff(s, 16, data_size=32000)
    np.testing.assert_array_equal(decode_wav(data), as_before(write(tmp_path / "cut.wav", data)))
    np.testing.assert_array_equal(decode_wav(data), s[:, 0])


def test_the_fetcher_decodes_a_resampled_file_the_same_every_time(tmp_path):
    # 48 kHz stereo 16-bit (cathy's format): sox resamples and dithers; the dither must be repeatable, or the
    # data made from such a source differs from run to run
    if not shutil.which("sox"):
        pytest.fail("sox is not installed (scripts/setup.sh installs it)")
    data = riff(stored(np.random.default_rng(48), 16, 48000, 2) // 4, 16, rate=48000)
    first = decode_wav(data)
    assert len(first) == 16000
    for _ in range(3):
        np.testing.assert_array_equal(decode_wav(data), first)


def test_the_package_and_the_tools_read_one_file_alike():
    path = os.path.join(ROOT, "samples", "commands.wav")
    x, rate, n = mega_kws.read_wav(path)
    tools = audio.read_wav(path)
    assert rate == audio.SR and n == len(tools)
    np.testing.assert_array_equal(tools.astype(np.float32) / np.float32(32768), x)


def test_neither_package_needs_the_other_to_be_imported():
    probe = ("import sys, {m}; {use}; "
             "print(sorted(n for n in sys.modules if n.split('.')[0] in ('mega_kws', 'mega_kws_tools')))")
    runs = {
        "python": ("mega_kws", "mega_kws.read_wav('samples/yes.wav')"),
        "tools": ("mega_kws_tools.audio", "mega_kws_tools.audio.read_wav('samples/yes.wav')"),
    }
    for where, (module, use) in runs.items():
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, where))
        r = subprocess.run([sys.executable, "-c", probe.format(m=module, use=use)], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        other = "mega_kws_tools" if where == "python" else "mega_kws"
        assert not [n for n in eval(r.stdout) if n.split(".")[0] == other], r.stdout
