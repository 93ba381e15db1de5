# SPDX-License-Identifier: Apache-2.0
"""make_sc10's signal helpers: levels, sox resampling and tempo, energy trimming, noise
(white, pink, brown, hum), reverberation, band-limiting, resampling warp and dithered 16-bit
quantization. Stateless: babble, which draws from the run's word bank, is in sc10_render."""

import subprocess

import numpy as np

from mega_kws_tools.audio import plain_pcm_16k, read_wav
from mega_kws_tools.data.sc10_recipe import SR, TRIM_DB, TRIM_MARGIN_S


# ----------------------------------------------------------------------------- small audio helpers

def db(x: float) -> float:
    return 20.0 * np.log10(max(float(x), 1e-12))


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if len(x) else 0.0


def peak(x: np.ndarray) -> float:
    return float(np.max(np.abs(x))) if len(x) else 0.0


def raw_f32(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f4").astype(np.float32)


SOX_F32 = ["-t", "raw", "-e", "floating-point", "-b", "32", "-c", "1"]


def load_16k(path: str) -> np.ndarray:
    """Read a TTS wav as float32 at 16 kHz: directly if it is 16 kHz PCM16, else resampled by sox (rate -h)."""
    if plain_pcm_16k(path):
        return read_wav(path).astype(np.float32) / 32768.0
    r = subprocess.run(["sox", "-V1", path] + SOX_F32 + ["-r", str(SR), "-"], capture_output=True, timeout=60)
    if r.returncode != 0:
        return np.zeros(0, np.float32)
    return raw_f32(r.stdout)


def sox_tempo(x: np.ndarray, factor: float) -> np.ndarray:
    """Speed up by `factor` keeping the pitch (sox WSOLA `tempo -s`)."""
    cmd = ["sox", "-V1", "-r", str(SR)] + SOX_F32 + ["-"] + SOX_F32 + ["-", "tempo", "-s", f"{factor:.4f}"]
    r = subprocess.run(cmd, input=x.astype("<f4").tobytes(), capture_output=True, timeout=60)
    return raw_f32(r.stdout) if r.returncode == 0 else np.zeros(0, np.float32)


def trim(x: np.ndarray, thr_db: float = TRIM_DB, margin_s: float = TRIM_MARGIN_S) -> np.ndarray:
    """Cut leading/trailing silence: keep from the first to the last 5 ms frame within thr_db of the loudest."""
    hop = SR // 200
    n = len(x) // hop
    if n == 0:
        return np.zeros(0, np.float32)
    e = np.sqrt(np.mean(np.square(x[: n * hop].reshape(n, hop), dtype=np.float64), axis=1))
    e = np.convolve(e, np.ones(3) / 3, mode="same")
    top = e.max()
    if top < 1e-5:
        return np.zeros(0, np.float32)
    on = np.nonzero(e >= top * 10 ** (thr_db / 20))[0]
    m = int(margin_s * SR)
    a, b = max(0, on[0] * hop - m), min(len(x), (on[-1] + 1) * hop + m)
    y = x[a:b].astype(np.float32).copy()
    f = min(len(y) // 4, SR // 200)  # 5 ms fades against clicks at the cut
    if f > 0:
        ramp = np.linspace(0.0, 1.0, f, dtype=np.float32)
        y[:f] *= ramp
        y[-f:] *= ramp[::-1]
    return y


# ----------------------------------------------------------------------------- noise

def colored_noise(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    """White, pink (1/f power) or brown (1/f^2 power) Gaussian noise, unit RMS."""
    w = rng.standard_normal(n)
    if kind != "white":
        spec = np.fft.rfft(w)
        f = np.maximum(np.fft.rfftfreq(n, 1.0 / SR), 20.0)
        spec *= f ** (-0.5 if kind == "pink" else -1.0)
        spec[0] = 0.0
        w = np.fft.irfft(spec, n)
    return (w / max(rms(w), 1e-12)).astype(np.float32)


def hum(rng: np.random.Generator, n: int) -> np.ndarray:
    """Mains hum: 50 or 60 Hz (slightly detuned) with random harmonics, a little hiss; unit RMS."""
    f0 = float(rng.choice([50.0, 60.0])) * (1 + rng.uniform(-0.004, 0.004))
    t = np.arange(n) / SR
    decay, odd_boost = rng.uniform(0.15, 0.8), rng.random() < 0.5
    y = np.zeros(n)
    for k in range(1, 13):
        if k * f0 > 2000:
            break
        a = np.exp(-decay * (k - 1)) * rng.uniform(0.3, 1.0) * (2.0 if odd_boost and k % 2 else 1.0)
        y += a * np.sin(2 * np.pi * k * f0 * t + rng.uniform(0, 2 * np.pi))
    y /= max(rms(y), 1e-12)
    y += colored_noise(rng, n, "white") * 10 ** (rng.uniform(-45, -25) / 20)
    return (y / max(rms(y), 1e-12)).astype(np.float32)



def reverb(rng: np.random.Generator, x: np.ndarray):
    """Add a synthetic room: exponentially decaying (and low-passed) noise IR, RT60 0.1..0.6 s."""
    rt60, wet = rng.uniform(0.1, 0.6), rng.uniform(0.3, 1.0)
    n_ir = int(min(1.2 * rt60, 0.8) * SR)
    t = np.arange(n_ir) / SR
    ir = rng.standard_normal(n_ir) * np.exp(-6.9078 * t / rt60)
    pre = int(rng.uniform(0.002, 0.02) * SR)
    ir[:pre] = 0.0
    nfft = 1 << int(np.ceil(np.log2(len(x) + n_ir)))
    f = np.fft.rfftfreq(nfft, 1.0 / SR)
    damp = 1.0 / np.sqrt(1.0 + (f / rng.uniform(2500, 8000)) ** 2)  # high frequencies die sooner
    h = np.fft.rfft(ir, nfft) * damp
    h /= np.sqrt(np.sum(np.abs(h) ** 2) / (nfft / 2))  # about unit energy
    y_wet = np.fft.irfft(np.fft.rfft(x, nfft) * h, nfft)[: len(x)]
    y = x + wet * y_wet / max(rms(y_wet), 1e-12) * rms(x)
    return y.astype(np.float32), f"rt60={rt60:.2f},wet={wet:.2f}"


def draw_band(rng: np.random.Generator) -> str:
    return "tel" if rng.random() < 0.5 else f"lp{int(rng.uniform(2500, 6000)) // 100 * 100}"


def band_limit(x: np.ndarray, band: str) -> np.ndarray:
    """FFT-domain band mask with raised-cosine edges: 'tel' = 300-3400 Hz, 'lpNNNN' = low-pass at NNNN Hz."""
    if not band:
        return x
    n = len(x)
    f = np.fft.rfftfreq(n, 1.0 / SR)

    def edge(lo, hi):  # 0 below lo, 1 above hi
        return np.clip(0.5 - 0.5 * np.cos(np.pi * np.clip((f - lo) / (hi - lo), 0, 1)), 0, 1)

    if band == "tel":
        mask = edge(200, 300) * (1 - edge(3400, 3800))
    else:
        fc = float(band[2:])
        mask = 1 - edge(fc, fc * 1.15)
    return np.fft.irfft(np.fft.rfft(x) * mask, n).astype(np.float32)


def to_pcm16(rng: np.random.Generator, x: np.ndarray) -> np.ndarray:
    """float in [-1, 1) -> int16 with +-1 LSB TPDF dither."""
    y = np.asarray(x, np.float64) * 32768.0 + (rng.random(len(x)) - rng.random(len(x)))
    return np.clip(np.round(y), -32768, 32767).astype("<i2")


def warp(x: np.ndarray, factor: float) -> np.ndarray:
    """Play `x` `factor` times faster by linear interpolation: pitch, formants (the
    vocal tract length) and tempo all scale by `factor`."""
    n = len(x)
    m = max(2, int(round(n / factor)))
    return np.interp(np.arange(m) * (n - 1) / (m - 1), np.arange(n), x).astype(np.float32)

