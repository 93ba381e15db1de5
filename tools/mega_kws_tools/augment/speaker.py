# SPDX-License-Identifier: Apache-2.0
"""Speaker augmentation on the waveform: playback speed (--speed-prob), formant
moves and spectral tilt (--color-prob, --vowel-prob), pitch (--pitch-prob)."""

import numpy as np

from mega_kws_tools.audio import SR


SPEED_RANGE = (0.88, 1.12)  # --speed-prob: playback-rate factors (tempo and pitch together)


def change_speed(clip: np.ndarray, factor: float) -> np.ndarray:
    """The clip played `factor` times faster (linear interpolation), cut or
    zero-padded back to its length around its middle, so that a word anywhere
    in the second stays in it."""
    n = len(clip)
    m = max(1, int(round(n / factor)))
    y = np.interp(np.arange(m) * (n - 1) / max(1, m - 1), np.arange(n), clip).astype(np.float32)
    if m >= n:
        start = (m - n) // 2
        return y[start:start + n]
    out = np.zeros(n, np.float32)
    start = (n - m) // 2
    out[start:start + m] = y
    return out


FORMANT_RANGE = (0.86, 1.18)  # --color-prob: spectral-envelope warp factors (formants move, pitch stays)
TILT_RANGE = (-3.0, 3.0)      # --color-prob: spectral tilt, dB per octave about 1 kHz
COLOR_HOP = 128               # 8 ms hop of 32 ms frames (sqrt-Hann analysis and synthesis) ...
COLOR_FRAME = 4 * COLOR_HOP   # ... a quarter-frame hop, which overlap_add assumes
COLOR_LIFTER = 40             # cepstral coefficients kept for the envelope (2.5 ms: below the pitch period of voices up to 400 Hz)
COLOR_MAX_GAIN_DB = 20.0      # the envelope change is kept within this, so near-silent bands are not blown up


def color_frames(n: int) -> int:
    """How many frames recolor cuts a clip of n samples into (its formant track's length)."""
    return (n + COLOR_FRAME) // COLOR_HOP + 1


def framed(padded: np.ndarray, count: int, frame: int, hop: int) -> np.ndarray:
    """The first `count` frames of `frame` samples, `hop` apart, of `padded` (one per row)."""
    return padded[np.arange(count)[:, None] * hop + np.arange(frame)[None, :]]


def overlap_add(frames: np.ndarray) -> np.ndarray:
    """Rows of frames laid a quarter-frame apart and summed (count + 3 quarters
    long): each quarter of every frame added in one vectorized pass per quarter."""
    count, frame = frames.shape
    hop = frame // 4
    quarters = frames.reshape(count, 4, hop)
    out = np.zeros((count + 3, hop))
    for k in range(4):
        out[k:k + count] += quarters[:, k]
    return out.ravel()


def at_rms(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """y scaled to ref's RMS, as float32 (all zeros where y is silent)."""
    before, after = float(np.sqrt(np.mean(ref * ref))), float(np.sqrt(np.mean(y * y)))
    return (y * (before / after if after > 1e-12 else 0.0)).astype(np.float32)


def recolor(clip: np.ndarray, formant, tilt_db: float) -> np.ndarray:
    """The clip with its spectral envelope warped in frequency by `formant` (its
    formants move from f to formant * f; its harmonics, so its pitch, and its
    timing stay) and tilted by `tilt_db` dB per octave about 1 kHz, at the
    clip's RMS. `formant` is one factor, or one per frame (color_frames(len(clip))
    of them, 8 ms apart: formant_track). Frame by frame (short-time Fourier transform), the envelope is
    the liftered cepstrum of the log magnitude; each frame's spectrum is scaled
    by warped envelope / envelope (within +-COLOR_MAX_GAIN_DB) and the frames are
    overlap-added. A speaker change that speed and filter warping cannot make:
    a different vocal tract at the same pitch (--color-prob)."""
    n, frame, hop = len(clip), COLOR_FRAME, COLOR_HOP
    padded = np.concatenate([np.zeros(frame, np.float32), clip, np.zeros(frame, np.float32)])
    count = color_frames(n)
    factor = np.broadcast_to(np.asarray(formant, np.float64).reshape(-1, 1), (count, 1))
    win = np.sqrt(0.5 - 0.5 * np.cos(2 * np.pi * np.arange(frame) / frame))  # sqrt of a periodic Hann
    spec = np.fft.rfft(framed(padded, count, frame, hop) * win, axis=1)
    log_mag = np.log(np.abs(spec) + 1e-7)
    cep = np.fft.irfft(log_mag, frame, axis=1)
    cep[:, COLOR_LIFTER:frame - COLOR_LIFTER + 1] = 0.0
    env = np.fft.rfft(cep, axis=1).real
    bins = np.arange(env.shape[1], dtype=np.float64)
    # Each frame's envelope is read at the positions bins / its factor: linear
    # interpolation between neighbouring bins, held at the last bin past the end
    # (what np.interp does, to the bit).
    pos, last = bins[None, :] / factor, env.shape[1] - 1
    lo = np.minimum(np.floor(pos).astype(np.int64), last)
    hi = np.minimum(lo + 1, last)
    frac = np.where(pos >= last, 0.0, pos - lo)
    at_lo = np.take_along_axis(env, lo, axis=1)
    warped = (np.take_along_axis(env, hi, axis=1) - at_lo) * frac + at_lo
    hz = np.maximum(bins * SR / frame, 62.5)
    gain = warped - env + tilt_db / 20 * np.log(10) * np.log2(hz / 1000.0)
    limit = COLOR_MAX_GAIN_DB / 20 * np.log(10)
    out_frames = np.fft.irfft(spec * np.exp(np.clip(gain, -limit, limit)), frame, axis=1) * win
    out = overlap_add(out_frames)[frame:frame + n] / 2.0  # a periodic Hann at a quarter-frame hop sums to 2
    return at_rms(out, clip)


VOWEL_KNOT = 12  # --vowel-prob: a new formant factor every 12 frames (96 ms, about one speech sound)


def formant_track(n: int, rng: np.random.Generator) -> np.ndarray:
    """A formant factor per recolor frame of an n-sample clip for --vowel-prob:
    factors drawn log-uniformly in FORMANT_RANGE every VOWEL_KNOT frames (from a
    random phase) and joined linearly in log, so each sound of a word gets a
    vowel quality of its own, as a new voice's vowels and r differ one by one."""
    count = color_frames(n)
    knots = np.arange(-int(rng.integers(VOWEL_KNOT)), count + VOWEL_KNOT, VOWEL_KNOT)
    logs = rng.uniform(np.log(FORMANT_RANGE[0]), np.log(FORMANT_RANGE[1]), len(knots))
    return np.exp(np.interp(np.arange(count), knots, logs))


PITCH_RANGE = (0.75, 1.8)  # --pitch-prob: pitch factors (drawn log-uniformly); formants and timing stay
PV_FRAME, PV_HOP = 512, 128  # shift_pitch's phase vocoder: 32 ms frames, 8 ms hop (periodic Hann; the quarter-frame hop overlap_add assumes)


def stretch(clip: np.ndarray, factor: float) -> np.ndarray:
    """The clip made `factor` times as long at the same pitch (a phase vocoder:
    each output frame's magnitude interpolated between the two nearest input
    frames; each spectral peak's phase advanced by its measured frequency, and
    the bins around a peak keep their input phase relative to it, so that a
    harmonic spread over several bins stays one sinusoid). All but the
    phase recursion is done for every output frame at once; to the bit what a loop over
    the frames gives."""
    frame, hop = PV_FRAME, PV_HOP
    padded = np.concatenate([np.zeros(frame), clip.astype(np.float64), np.zeros(frame + hop)])
    count = (len(padded) - frame) // hop + 1
    win = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(frame) / frame)
    spec = np.fft.rfft(framed(padded, count, frame, hop) * win, axis=1)
    advance = 2 * np.pi * hop * np.arange(frame // 2 + 1) / frame  # a bin's phase advance per hop
    steps = np.arange(int(np.ceil((count - 1) * factor)) + 1) / factor
    steps = steps[steps < count - 1]  # each output frame between two input frames
    # Everything but the phase recursion, for all output frames at once: output frame k lies
    # a_k of the way from input frame i_k to i_k + 1.
    i = steps.astype(np.int64)
    a = (steps - i)[:, None]
    size = np.abs(spec)
    angle = np.angle(spec)
    mag = (1 - a) * size[i] + a * size[i + 1]
    inner = mag[:, 1:-1]
    peak = np.zeros(mag.shape, bool)
    peak[:, 1:-1] = (inner > mag[:, :-2]) & (inner >= mag[:, 2:])
    # each bin follows the nearest peak (the lower one at a tie): the last peak at or below it
    # and the first at or above it
    bins = np.arange(frame // 2 + 1)
    below = np.maximum.accumulate(np.where(peak, bins, -1), axis=1)
    above = np.minimum.accumulate(np.where(peak, bins, len(bins))[:, ::-1], axis=1)[:, ::-1]
    owner = np.where((below < 0) | ((above < len(bins)) & (above - bins < bins - below)), above, below)
    has_peak = peak.any(axis=1)
    owner[~has_peak] = 0
    own_angle = np.take_along_axis(angle[i], owner, axis=1)
    d = angle[i + 1] - angle[i] - advance
    wrap = 2 * np.pi * np.round(d / (2 * np.pi))
    locked = np.empty(mag.shape)
    phase = angle[0]
    for k in range(len(steps)):
        if has_peak[k]:
            phase = phase[owner[k]] + angle[i[k]] - own_angle[k]
        locked[k] = phase
        phase = phase + advance + d[k] - wrap[k]
    out_frames = np.fft.irfft(mag * np.exp(1j * locked), frame, axis=1) * win
    out = overlap_add(out_frames) / 1.5  # a periodic Hann squared at a quarter-frame hop sums to 1.5
    start, m = int(round(frame * factor)), int(round(len(clip) * factor))  # input sample p is output p * factor
    return out[start:start + m]


def shift_pitch(clip: np.ndarray, factor: float) -> np.ndarray:
    """The clip at `factor` times its pitch with its formants, timing and RMS kept
    (--pitch-prob): stretched `factor` times (stretch), played `factor` times as
    fast (pitch, formants and timing all move by it), and its formants moved back
    by 1 / factor (recolor). A man's voice at a woman's or a child's pitch."""
    n = len(clip)
    long = stretch(clip, factor)
    y = recolor(np.interp(np.arange(n) * factor, np.arange(len(long)), long, right=0.0).astype(np.float32),
                1.0 / factor, 0.0)
    return at_rms(y, clip)
