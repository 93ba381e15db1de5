# SPDX-License-Identifier: Apache-2.0
"""WAV input and output for every tool: 16 kHz PCM, mono int16 in memory.

read_wav takes a path or the file's bytes; it reads 8-, 16- and 32-bit PCM at
16 kHz and mixes several channels to one (their mean). Anything else (another
rate, float or extensible formats, a broken file) raises ValueError naming
the file; a tool that wants those too converts with sox and reads the result
(see data.fetch_real_sc.decode). write_wav writes mono 16-bit 16 kHz.

The runtime's Python package has its own reader (python/mega_kws/_wav.py:
float32 at any rate, for inference). This one stays the tools' own: the
tools run with only tools/ on their path (PYTHONPATH=tools, the installed
converter), and the training data must read back bit for bit as before
(int16; 32-bit PCM shifted, not rounded through float32).
"""

import io
import wave

import numpy as np

SR = 16000


def read_wav(src, name: str = None) -> np.ndarray:
    """The samples of a 16 kHz PCM WAV (a path, or its bytes) as mono int16."""
    name = name or (src if isinstance(src, str) else "WAV data")
    try:
        with wave.open(io.BytesIO(src) if isinstance(src, (bytes, bytearray)) else src, "rb") as w:
            rate, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
            raw = w.readframes(w.getnframes())
    except (wave.Error, EOFError) as e:
        raise ValueError(f"{name}: not a PCM WAV file ({e})") from None
    if rate != SR or width not in (1, 2, 4):
        raise ValueError(f"{name}: need 16 kHz 8-, 16- or 32-bit PCM, got {rate} Hz, {8 * width}-bit")
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


def write_wav(path: str, x: np.ndarray) -> None:
    """Writes int16 samples as a mono 16-bit 16 kHz WAV."""
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(np.asarray(x, dtype="<i2").tobytes())
