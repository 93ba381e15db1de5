# SPDX-License-Identifier: Apache-2.0
"""Non-speech sounds: tones, chirps, beeps, square and sawtooth waves, coloured
noise and note sequences (a crude stand-in for music), made from numpy alone.

Training mixes them in as _silence_ examples (--nonspeech-negatives), with
slices of recorded non-speech (music: --nonspeech-audio) for half of them where
such recordings are given, and tests/apps/test_nonspeech.py scans fixed ones
with the runtime: beeps and a chirp fired the demo model (issue 83 item 5), and
nothing in its data was a tone."""

import glob
import os

import numpy as np

from mega_kws_tools.audio import read_wav, SR

KINDS = ("tone", "square", "saw", "chirp", "beeps", "noise", "notes")
FREQ_RANGE = (100.0, 4000.0)    # Hz: the tones' and chirps' fundamentals, drawn log-uniformly
RMS_DB_RANGE = (-45.0, -6.0)    # the RMS, in dB re 1.0 (a full-scale sine is -3 dB)
NOISE_EXPONENT_RANGE = (0.0, 2.0)  # power ~ 1 / f^e: 0 white, 1 pink, 2 brown
BEEP_ON_S = (0.03, 0.6)
BEEP_OFF_S = (0.05, 1.2)
RAMP_S = (0.0, 0.01)            # a beep's or note's onset and offset ramp: abrupt clicks included
RECORDED_SHARE = 0.5            # of the non-speech windows, where recordings are given: a slice of one
SILENT_RMS = 1e-4               # a recorded slice quieter than this (a pause in the music) is kept as it is


def _times(n: int) -> np.ndarray:
    return np.arange(n) / SR


def tone(freq: float, n: int, phase: float = 0.0) -> np.ndarray:
    """n samples of a unit-amplitude sine at freq Hz."""
    return np.sin(2 * np.pi * freq * _times(n) + phase)


def square(freq: float, n: int, phase: float = 0.0) -> np.ndarray:
    """n samples of a unit square wave at freq Hz (naive: its harmonics above
    8 kHz alias, as a cheap buzzer's do)."""
    return np.where(tone(freq, n, phase) >= 0, 1.0, -1.0)


def sawtooth(freq: float, n: int, phase: float = 0.0) -> np.ndarray:
    """n samples of a unit sawtooth at freq Hz, rising from -1 to 1 each period."""
    return 2.0 * ((freq * _times(n) + phase / (2 * np.pi)) % 1.0) - 1.0


def chirp(f0: float, f1: float, n: int) -> np.ndarray:
    """A unit sine sweeping linearly from f0 to f1 Hz over n samples."""
    t = _times(n)
    return np.sin(2 * np.pi * (f0 * t + (f1 - f0) / (2 * max(n / SR, 1e-9)) * t * t))


def gate(n: int, on_s: float, off_s: float, start_s: float = 0.0, ramp_s: float = 0.0) -> np.ndarray:
    """An on/off envelope of n samples: on for on_s, off for off_s, repeated from
    start_s (silent before), each edge a linear ramp of ramp_s. Beeps are a tone
    times this. Counted in whole samples, so every period is the same."""
    on, period = max(1, int(round(on_s * SR))), max(1, int(round((on_s + off_s) * SR)))
    k = np.arange(n) - int(round(start_s * SR))
    phase = np.mod(k, period)
    env = ((phase < on) & (k >= 0)).astype(np.float64)
    ramp = int(round(ramp_s * SR))
    if ramp > 0:
        env *= np.clip(np.minimum(phase, on - phase) / ramp, 0.0, 1.0)
    return env


def coloured_noise(n: int, exponent: float, rng: np.random.Generator) -> np.ndarray:
    """n samples of Gaussian noise whose power falls as 1 / f^exponent (0 white,
    1 pink, 2 brown), at unit RMS, without a DC part."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    f = np.fft.rfftfreq(n, 1.0 / SR)
    spectrum[0] = 0.0
    spectrum[1:] /= f[1:] ** (exponent / 2.0)
    x = np.fft.irfft(spectrum, n)
    return x / (np.sqrt(np.mean(x * x)) + 1e-12)


def notes(n: int, rng: np.random.Generator) -> np.ndarray:
    """A sequence of random notes (a pitch of the equal-tempered scale between
    110 and 880 Hz, 1-5 harmonics, a decaying envelope, 0.1-0.5 s each), some
    overlapping: a crude stand-in for music, at no fixed level."""
    x = np.zeros(n)
    start = 0
    while start < n:
        length = int(rng.uniform(0.1, 0.5) * SR)
        freq = 110.0 * 2 ** (int(rng.integers(0, 37)) / 12)
        partial = np.arange(1, int(rng.integers(1, 6)) + 1)
        m = min(length * 2, n - start)
        t = _times(m)
        note = (np.sin(2 * np.pi * freq * np.outer(partial, t)) / partial[:, None]).sum(axis=0)
        x[start:start + m] += note * np.exp(-t * rng.uniform(2.0, 12.0))
        start += length
    return x


def _at_level(x: np.ndarray, rms_db: float) -> np.ndarray:
    return x * (10 ** (rms_db / 20) / (np.sqrt(np.mean(x * x)) + 1e-12))


def _periodic(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """A tone, square, saw or chirp (a beep's carrier: a tone or a square) at random frequencies."""
    freq = float(np.exp(rng.uniform(*np.log(FREQ_RANGE))))
    if kind == "chirp":
        return chirp(freq, float(np.exp(rng.uniform(*np.log(FREQ_RANGE)))), n)
    if kind == "beeps":
        kind = "tone" if rng.random() < 0.7 else "square"
    return {"tone": tone, "square": square, "saw": sawtooth}[kind](freq, n, float(rng.uniform(0, 2 * np.pi)))


def random_nonspeech(n: int, rng: np.random.Generator, kind: str = None, weights=None) -> np.ndarray:
    """n float32 samples of one non-speech sound of `kind` (one of KINDS; if
    None drawn uniformly, or with the probabilities `weights`, one per kind of
    KINDS, where given) with random settings, at an RMS drawn from RMS_DB_RANGE
    (dB re 1.0), clipped to [-1, 1]."""
    if kind is None:
        kind = KINDS[int(rng.integers(len(KINDS)) if weights is None else rng.choice(len(KINDS), p=weights))]
    if kind == "noise":
        x = coloured_noise(n, float(rng.uniform(*NOISE_EXPONENT_RANGE)), rng)
    elif kind == "notes":
        x = notes(n, rng)
    elif kind in KINDS:
        x = _periodic(kind, n, rng)
        if kind == "beeps":
            x = x * gate(n, rng.uniform(*BEEP_ON_S), rng.uniform(*BEEP_OFF_S), 0.0, rng.uniform(*RAMP_S))
    else:
        raise ValueError(f"{kind}: not a kind of non-speech sound ({', '.join(KINDS)})")
    return np.clip(_at_level(x, float(rng.uniform(*RMS_DB_RANGE))), -1.0, 1.0).astype(np.float32)


def recording_files(paths) -> list:
    """The files paths name (a file, or a folder: its *.wav files in name
    order), in the order load_recordings reads them. Raises ValueError for a
    path that gives none."""
    out = []
    for path in paths:
        if not os.path.exists(path):
            raise ValueError(f"{path}: no such file or folder")
        files = sorted(glob.glob(os.path.join(path, "*.wav"))) if os.path.isdir(path) else [path]
        if not files:
            raise ValueError(f"{path}: a folder with no .wav file")
        out += files
    return out


def load_recordings(paths) -> list:
    """The int16 samples of every 16 kHz WAV named in paths (recording_files),
    each at least a sample long. Raises ValueError for a path that gives none,
    or a file that is not 16 kHz audio."""
    recordings = []
    for f in recording_files(paths):
        x = read_wav(f)
        if len(x) == 0:
            raise ValueError(f"{f}: no samples")
        recordings.append(x)
    return recordings


def recorded_slice(recordings: list, n: int, rng: np.random.Generator) -> np.ndarray:
    """n float32 samples from a random point of one of recordings (load_recordings;
    a shorter one repeated), at an RMS drawn from RMS_DB_RANGE, clipped to
    [-1, 1]; a slice quieter than SILENT_RMS is kept at its own level."""
    rec = recordings[int(rng.integers(len(recordings)))]
    if len(rec) < n:
        rec = np.tile(rec, n // len(rec) + 1)
    start = int(rng.integers(0, len(rec) - n + 1))
    x = rec[start:start + n].astype(np.float64) / 32768.0
    level = float(rng.uniform(*RMS_DB_RANGE))
    if np.sqrt(np.mean(x * x)) >= SILENT_RMS:
        x = _at_level(x, level)
    return np.clip(x, -1.0, 1.0).astype(np.float32)


def nonspeech_window(rng: np.random.Generator, recordings: list = (), weights=None) -> np.ndarray:
    """A training input of make_batch's shape (the context second, then the
    target second) holding one random non-speech sound that starts at a random
    point of the first 1.5 s: a sound already under way and one that begins
    inside the window both teach _silence_ (the beeps that fired did so at an
    onset and later). Where recordings are given (load_recordings), the sound
    is a slice of one of them RECORDED_SHARE of the time; weights: as
    random_nonspeech's."""
    x = np.zeros(2 * SR, np.float32)
    start = int(rng.integers(0, 3 * SR // 2))
    if len(recordings) and rng.random() < RECORDED_SHARE:
        x[start:] = recorded_slice(recordings, 2 * SR - start, rng)
    else:
        x[start:] = random_nonspeech(2 * SR - start, rng, weights=weights)
    return x
