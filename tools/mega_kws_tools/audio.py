# SPDX-License-Identifier: Apache-2.0
"""WAV input and output for every tool: 16 kHz, mono int16 in memory.

read_wav takes a path or the file's bytes; it reads what the runtime's Python
package reads (PCM of 8, 16, 24 or 32 bits, float of 32 or 64, plain or
WAVE_FORMAT_EXTENSIBLE, any number of channels) at 16 kHz, as int16: PCM's
top 16 bits (8-bit shifted up; 24- and 32-bit shifted down, not rounded, so
the training data reads back bit for bit as it always has), float scaled by
32768, rounded and clipped (NaN and Inf as 0, as the runtime takes them);
several channels mixed to one (their mean, rounded). Another rate or a file
that is not such a WAV (broken, truncated) raises ValueError naming the file;
a tool that wants those too converts with sox (plain_pcm_16k says which
files read_wav has always read itself; see data.fetch_real_sc.decode_wav).
write_wav writes mono 16-bit 16 kHz.

The file is parsed by the project's one WAV parser in Python, the runtime's
package's (python/mega_kws/_wav.py: NumPy and the standard library only),
loaded from the source tree beside the tools: they still run with only tools/
on their path (PYTHONPATH=tools) and without the runtime's library. A tools
package installed away from the tree uses the installed mega_kws package's.
"""

import importlib.util
import io
import os
import wave

import numpy as np

SR = 16000
_READER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "python", "mega_kws", "_wav.py")


def _wav_module():
    """The tree's python/mega_kws/_wav.py loaded by its path: no sys.path edit, and no other installed
    mega_kws version found first."""
    if not os.path.isfile(_READER):
        from mega_kws import _wav
        return _wav
    spec = importlib.util.spec_from_file_location("mega_kws_tools._wav", _READER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_wav = _wav_module()


def open_wav(src, name: str = None):
    """The runtime package's WavReader on a path or a WAV's bytes (named `name`
    in messages), a file of 0 frames included: its .sample_rate, .channels,
    .n_frames, .encoding ("pcm" or "float"), .bits, .extensible, and
    read_frames(n), the samples as stored."""
    if isinstance(src, (bytes, bytearray)):
        src = io.BytesIO(src)
        src.name = name or "WAV data"
    return _wav.WavReader(src, allow_empty=True)


def plain_pcm_16k(src, name: str = None) -> bool:
    """Whether src (a path or a WAV's bytes) is a whole 16 kHz WAV of plain PCM
    of 8, 16 or 32 bits (not WAVE_FORMAT_EXTENSIBLE): what read_wav has always
    read itself. The tools that hand anything else to sox (which resamples, and
    dithers 24-bit and float audio down to 16 bits) ask this first, so that
    every file decodes as it always has."""
    try:
        with open_wav(src, name) as w:
            return (w.sample_rate, w.encoding, w.extensible) == (SR, "pcm", False) and w.bits != 24
    except ValueError:
        return False


def read_wav(src, name: str = None) -> np.ndarray:
    """The samples of a 16 kHz WAV (a path, or its bytes) as mono int16."""
    with open_wav(src, name) as w:
        if w.sample_rate != SR:
            raise ValueError(f"{w.path}: need 16 kHz audio, got {w.sample_rate} Hz (convert it, e.g. with sox)")
        x = _int16(w.read_frames(w.n_frames), w.encoding, w.bits)
    if x.shape[1] == 1:
        return np.ascontiguousarray(x[:, 0])
    return np.clip(np.round(x.mean(axis=1)), -32768, 32767).astype(np.int16)


def _int16(frames, encoding, bits):
    """[frames, channels] as stored -> int16 at the 16-bit scale."""
    if encoding == "float":
        x = np.where(np.isfinite(frames), frames, 0.0).astype(np.float64) * 32768.0
        return np.clip(np.round(x), -32768, 32767).astype(np.int16)
    if bits == 8:
        return ((frames.astype(np.int32) - 128) << 8).astype(np.int16)
    return (frames >> (bits - 16)).astype(np.int16)


def window_before(x: np.ndarray, end: int, n: int) -> np.ndarray:
    """The n samples of x before sample `end`, silence (zeros of x's dtype) where x does not
    reach: before its start, or past its end."""
    out = np.zeros(n, dtype=x.dtype)
    a, b = end - n, min(end, len(x))
    if b > max(a, 0):
        out[max(a, 0) - a:b - a] = x[max(a, 0):b]
    return out


def write_wav(path: str, x: np.ndarray) -> None:
    """Writes int16 samples as a mono 16-bit 16 kHz WAV."""
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(np.asarray(x, dtype="<i2").tobytes())
