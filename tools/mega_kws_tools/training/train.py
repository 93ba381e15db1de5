#!/usr/bin/python3
"""Train a streaming (unidirectional) Mega-chunk keyword spotter.

  train.py --data DIR --classes kws12 --out RUN_DIR [--steps N] [--preset demo|paper-base]

DIR is any Speech Commands-layout folder (one folder per word,
validation_list.txt, testing_list.txt): the real Speech Commands v0.02, or
the synthetic set from tools/mega_kws_tools/data/make_sc10.py.

Classes:
  sc10   the ten keywords only (the paper's SC10 setting)
  kws12  the ten keywords + _silence_ + _unknown_ (what a live detector needs).
         _unknown_ = every other word folder; _silence_ = a _silence_ folder if
         present, else 1 s crops of _background_noise_.

Streaming-aware examples: each training input is a context second (silence,
noise or non-keyword speech) followed by the target second, shifted by up to
+-0.1 s so words do not line up with chunk boundaries. The loss uses the
logits over the last window only (MegaKWS.window_logits), which is exactly
what a streaming session reports, with the EMA state carrying the context.

Checkpoints (RUN_DIR/last.pt, best.pt) hold the config, weights, labels,
optimizer and RNG state: tools/mega_kws_tools/convert/mega_convert.py reads them, and
--resume continues an interrupted run. SIGINT (Ctrl-C) or SIGTERM ends the
step under way, saves last.pt and exits with 128 + the signal's number, so
--resume goes on from that step; a second signal stops at once. With
--weight-average, validation and best.pt use the running average of the
weights; last.pt keeps both.
"""

import argparse
import contextlib
import csv
import dataclasses
import json
import math
import os
import random
import signal
import sys
import time
from typing import Optional


# Debian's OpenBLAS (the pthread build numpy and torch link here) keeps a worker thread that spins
# between calls, stealing a core from --threads 1 and from a second run beside it: one thread
# unless the caller says otherwise (set before numpy or torch loads it).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def keep_freed_memory():
    """Have glibc's malloc keep freed memory for reuse instead of handing it back
    to the kernel: tensors up to 32 MB come from the heap (not a fresh mmap each),
    and the heap is not trimmed below 1 GB free. Each step allocates and frees
    tensors of several MB; fresh pages cost a page fault each, and on this
    project's virtual machines that made a demo-wide step 0.9-1.0 s instead of
    0.6 s. A no-op where the C library has no mallopt."""
    import ctypes
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    mallopt(m_mmap_threshold, 32 << 20)  # glibc's largest: HEAP_MAX_SIZE / 2
    mallopt(m_trim_threshold, 1 << 30)
    mallopt(m_top_pad, 64 << 20)


keep_freed_memory()  # before numpy and torch allocate, and for every tool that imports this module
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from mega_kws_tools import model as mt  # noqa: E402
from mega_kws_tools.audio import read_wav  # noqa: E402
from mega_kws_tools.data.layout import KEYWORDS, SILENCE, UNKNOWN, clip_splits, folder_label  # noqa: E402
from mega_kws_tools.evaluation import streamscore, tune_detection  # noqa: E402

SR = 16000

_DEMO = dict(embed_dim=64, hidden_dim=128, ffn_hidden_dim=128, z_dim=32, n_dim=16, n_layers=4,
             chunk_size=25, truncation=200, patch_kernel=400, patch_stride=160, window_chunks=4,
             classifier_dim=128)
_WIDE = dict(_DEMO, embed_dim=96, hidden_dim=192, ffn_hidden_dim=192, z_dim=48, classifier_dim=192,
             patch_features="logpower")
_SMOKE = dict(embed_dim=16, hidden_dim=32, ffn_hidden_dim=32, z_dim=8, n_dim=4, n_layers=1,
              chunk_size=25, truncation=200, patch_kernel=400, patch_stride=160, window_chunks=4,
              classifier_dim=32)

PRESETS = {
    # 100 tokens/s through a 25 ms / 10 ms patch embedding with log-power features
    # (a learnable short-time power spectrum).
    "demo": dict(_DEMO, patch_features="logpower"),
    # Wider (D 96, H 192): about twice the parameters and compute of "demo".
    "demo-wide": _WIDE,
    # "demo-wide" with six layers instead of four: about 1.4 times its parameters and compute.
    "demo-deep": dict(_WIDE, n_layers=6),
    # "demo" with linear patch features (the model shipped before; learns far slower).
    "demo-linear": dict(_DEMO),
    # "demo-wide" with fixed 40-band log-mel features mixed into D channels (see
    # mega_torch.PatchEmbedding): PyTorch only so far, the model file has no such front end.
    "demo-wide-mel": dict(_WIDE, patch_features="logmel", patch_bands=40),
    # For the smoke test: trains a few steps in seconds.
    "smoke": dict(_SMOKE, patch_features="logpower"),
    # "smoke" with the log-mel front end of "demo-wide-mel" (16 bands).
    "smoke-mel": dict(_SMOKE, patch_features="logmel", patch_bands=16),
    # The paper's mega_sc_raw_base, unidirectional so it streams (train on a GPU: see docs/lab-log.md).
    "paper-base": dict(embed_dim=60, hidden_dim=120, ffn_hidden_dim=120, z_dim=30, n_dim=16, n_layers=6,
                       chunk_size=1000, truncation=1000, patch_kernel=1, patch_stride=1, window_chunks=16,
                       classifier_dim=120),
}


def fit_second(x: np.ndarray) -> np.ndarray:
    out = np.zeros(SR, dtype=np.int16)
    out[: min(SR, len(x))] = x[:SR]
    return out


def clip_voices(root: str, paths):
    """Who says each clip, as two object arrays of strings: the voice and, finer,
    the voice with its variant. For a generated set, from its manifest.csv
    ("engine:voice" and "engine:voice:variant"); for real Speech Commands clips,
    the speaker (the file name's part before "_nohash_"), the same in both;
    "" where neither is known."""
    known = {}
    manifest = os.path.join(root, "manifest.csv")
    if os.path.exists(manifest):
        with open(manifest, newline="") as f:
            for r in csv.DictReader(f):
                v = f"{r['engine']}:{r['voice']}"
                known[r["path"]] = (v, f"{v}:{r.get('variant', '')}")
    voice, variant = [], []
    for p in paths:
        rel = os.path.relpath(p, root)
        name = os.path.basename(p)
        v = known.get(rel) or ((f"speaker:{name.split('_nohash_')[0]}",) * 2 if "_nohash_" in name else ("", ""))
        voice.append(v[0])
        variant.append(v[1])
    return np.array(voice, dtype=object), np.array(variant, dtype=object)


class Dataset:
    """All clips of one split in memory as int16, with integer labels."""

    def __init__(self, root: str, classes: str, split: str, max_per_class: int = 0, seed: int = 0):
        self.labels = list(KEYWORDS) + ([SILENCE, UNKNOWN] if classes == "kws12" else [])
        items = []
        for rel, s in clip_splits(root).items():
            label = folder_label(rel.split("/")[0], self.labels)
            if s == split and label is not None:
                items.append((os.path.join(root, rel), self.labels.index(label)))
        rng = random.Random(seed)
        if max_per_class:
            rng.shuffle(items)
            count, kept = {}, []
            for it in items:
                if count.get(it[1], 0) < max_per_class:
                    count[it[1]] = count.get(it[1], 0) + 1
                    kept.append(it)
            items = kept
        self.audio = np.stack([fit_second(read_wav(p)) for p, _ in items]) if items else np.zeros((0, SR), np.int16)
        self.y = np.array([l for _, l in items], dtype=np.int64)
        self.paths = [p for p, _ in items]
        self.source = np.zeros(len(self.y), dtype=np.int64)  # 0: --data; 1: --extra-data (set by extend)
        self.voice, self.voice_variant = clip_voices(root, self.paths)
        self.splice_cache = {}  # splice_pool's pools; emptied when clips are added
        if classes == "kws12" and "_silence_" not in os.listdir(root):
            self._add_background_silence(os.path.join(root, "_background_noise_"), split, rng)

    def _add_background_silence(self, folder: str, split: str, rng: random.Random):
        if not os.path.isdir(folder):
            return
        noise = [read_wav(os.path.join(folder, f)) for f in sorted(os.listdir(folder)) if f.endswith(".wav")]
        n = max(1, len(self.y) // 11)
        crops = []
        for i in range(n):
            src = noise[rng.randrange(len(noise))]
            # hold out different regions per split
            third = len(src) // 3
            lo = {"training": 0, "validation": third, "testing": 2 * third}[split]
            start = lo + rng.randrange(max(1, third - SR))
            crops.append(fit_second((src[start:start + SR] * rng.uniform(0.05, 1.0)).astype(np.int16)))
        self.audio = np.concatenate([self.audio, np.stack(crops)])
        self.y = np.concatenate([self.y, np.full(n, self.labels.index("_silence_"))])
        self.source = np.zeros(len(self.y), dtype=np.int64)
        self.voice = np.concatenate([self.voice, np.full(n, "", dtype=object)])
        self.voice_variant = np.concatenate([self.voice_variant, np.full(n, "", dtype=object)])

    def __len__(self):
        return len(self.y)

    def extend(self, other: "Dataset"):
        """Append another folder's clips, marked as extra data (source 1)."""
        self.audio = np.concatenate([self.audio, other.audio])
        self.y = np.concatenate([self.y, other.y])
        self.source = np.concatenate([self.source, np.ones(len(other.y), dtype=np.int64)])
        self.paths += other.paths
        self.voice = np.concatenate([self.voice, other.voice])
        self.voice_variant = np.concatenate([self.voice_variant, other.voice_variant])
        self.splice_cache = {}


def noise_pools(ds: Dataset):
    """The clips add_noise draws from, with their SNR ranges in dB: _silence_
    (noise, hum) at 0-20 dB, _unknown_ words (babble) at 5-20 dB."""
    pools = []
    for name, snr in (("_silence_", (0.0, 20.0)), ("_unknown_", (5.0, 20.0))):
        if name in ds.labels:
            ids = np.nonzero(ds.y == ds.labels.index(name))[0]
            if len(ids):
                pools.append((ids, snr))
    return pools


def add_noise(target: np.ndarray, ds: Dataset, pools, rng: np.random.Generator):
    """Mixes a random clip of one of the pools (noise_pools) into target, in
    place, at a random SNR of the pool's range, rolled by a random offset. A
    fresh draw each time a clip is used, so the model never sees the same noisy
    version twice (the generated sets have one per clip)."""
    if not pools:
        return
    ids, (lo, hi) = pools[int(rng.integers(len(pools)))]
    noise = np.roll(ds.audio[ids[rng.integers(len(ids))]].astype(np.float32) / 32768.0, int(rng.integers(SR)))
    mix_at_snr(target, noise, (lo, hi), rng)


def mix_at_snr(target: np.ndarray, noise: np.ndarray, snr_db, rng: np.random.Generator):
    """Adds noise to target, in place, at an SNR (RMS over the whole clip) drawn
    uniformly from the range snr_db; noise that is digital silence adds nothing."""
    t_rms = float(np.sqrt(np.mean(target * target)))
    n_rms = float(np.sqrt(np.mean(noise * noise))) + 1e-9
    target += noise * (t_rms / n_rms * float(10 ** (-rng.uniform(*snr_db) / 20)))


BABBLE_WORDS = (3, 7)          # --babble-prob: unrelated words summed into one babble ...
BABBLE_SNR_DB = (-3.0, 12.0)   # ... mixed in at this SNR over the whole second (about 0-15 dB over the word)


def add_babble(target: np.ndarray, ds: Dataset, ids: np.ndarray, rng: np.random.Generator):
    """Mixes babble into target, in place: the sum of 3-7 random clips of `ids`
    (_unknown_ words), each rolled by its own offset and scaled by 0 to -6 dB, at a
    random SNR of BABBLE_SNR_DB. The generated sets' babble is 4-8 words at 0-30 dB
    over the word; add_noise's babble is one word at 5-20 dB."""
    noise = np.zeros(len(target), np.float32)
    for _ in range(int(rng.integers(BABBLE_WORDS[0], BABBLE_WORDS[1] + 1))):
        clip = ds.audio[ids[rng.integers(len(ids))]].astype(np.float32) / 32768.0
        noise += np.roll(clip, int(rng.integers(len(clip)))) * np.float32(10 ** (-rng.uniform(0.0, 6.0) / 20))
    mix_at_snr(target, noise, BABBLE_SNR_DB, rng)


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


SPLICE_FRAME = 160       # 10 ms frames for finding a word's extent
SPLICE_FLOOR_DB = -20.0  # a frame is speech within this of the loudest frame
SPLICE_CUT = (0.35, 0.65)  # where the word is cut, as a share of its extent
SPLICE_FADE = 80         # 5 ms cross-fade at the joint
# Words whose half, joined to half of the keyword, could make the keyword again
# ("ye" + the coda of "guess" is "yes", the onset of "leaf" + "ft" is "left"):
# never spliced to it.
_NO_GO = "now nose note nope snow oh two zero follow show grow goal goat gold hello okay home close"
SPLICE_AVOID = {k: set(v.split()) for k, v in {
    "yes": "yeah yep yet guess chess", "no": _NO_GO, "go": _NO_GO, "up": "cup pup app hop",
    "down": "town brown dawn done round", "left": "leaf lift loft let laugh",
    "right": "light bright ride white night rate time five nine", "on": "onto own an in gone don one",
    "off": "of cough awful", "stop": "stock top shop step spot stuff"}.items()}


def speech_extent(clip: np.ndarray):
    """(start, end) samples of the clip's loud part: the first and last 10 ms
    frame within SPLICE_FLOOR_DB of the loudest one; None if it is silent."""
    n = len(clip) // SPLICE_FRAME
    rms = np.sqrt(np.mean(clip[:n * SPLICE_FRAME].reshape(n, SPLICE_FRAME) ** 2, axis=1))
    if n == 0 or rms.max() <= 1e-4:
        return None
    loud = np.nonzero(rms >= rms.max() * 10 ** (SPLICE_FLOOR_DB / 20))[0]
    return int(loud[0]) * SPLICE_FRAME, (int(loud[-1]) + 1) * SPLICE_FRAME


def splice_pair(keyword: np.ndarray, other: np.ndarray, keep_onset: bool, rng: np.random.Generator):
    """A one-second clip that is half a keyword and half another word: the
    keyword's onset followed by the other word's coda (keep_onset), or the other
    word's onset followed by the keyword's coda. Each word is cut at a random
    point of its loud part, the second part is brought to the first's level,
    and the joint is cross-faded. None if either clip is silent. A near miss
    by construction ("ye" + "ed", "ri" + "op"): it sounds like the start or the
    end of a keyword and must not be taken for one (--splice-prob)."""
    ek, eo = speech_extent(keyword), speech_extent(other)
    if ek is None or eo is None:
        return None
    cut_k = ek[0] + int(rng.uniform(*SPLICE_CUT) * (ek[1] - ek[0]))
    cut_o = eo[0] + int(rng.uniform(*SPLICE_CUT) * (eo[1] - eo[0]))
    a, b = (keyword[ek[0]:cut_k], other[cut_o:eo[1]]) if keep_onset else (other[eo[0]:cut_o], keyword[cut_k:ek[1]])
    if len(a) < SPLICE_FADE or len(b) < SPLICE_FADE:
        return None
    b = b * (float(np.sqrt(np.mean(a * a))) / (float(np.sqrt(np.mean(b * b))) + 1e-9))
    ramp = np.linspace(0.0, 1.0, SPLICE_FADE, dtype=np.float32)
    joined = np.concatenate([a[:-SPLICE_FADE], a[-SPLICE_FADE:] * (1 - ramp) + b[:SPLICE_FADE] * ramp,
                             b[SPLICE_FADE:]])[:SR]
    out = np.zeros(SR, np.float32)
    start = (SR - len(joined)) // 2
    out[start:start + len(joined)] = joined
    return out


def splice_pool(ds: Dataset, keyword: str, j: int) -> np.ndarray:
    """Indices of the _unknown_ clips that may be spliced to clip j, a `keyword`
    clip: every word but the keyword's SPLICE_AVOID ones (a clip's word is its
    folder), said by the same voice and variant as clip j if it has any, else by
    the same voice, else of the same source (0: --data, 1: --extra-data), so
    that the joint is a change of word, not of speaker. Cached in ds.splice_cache."""
    cache = ds.splice_cache
    if "ok" not in cache:
        # the background-noise crops (no path) are never _unknown_
        words = np.array([os.path.basename(os.path.dirname(p)) for p in ds.paths] +
                         [""] * (len(ds.y) - len(ds.paths)))
        cache["ok"] = {k: (ds.y == ds.labels.index(UNKNOWN)) & ~np.isin(words, sorted(SPLICE_AVOID.get(k, ())))
                       for k in KEYWORDS}
    for field in ("voice_variant", "voice", "source"):
        key = (keyword, field, getattr(ds, field)[j])
        if key not in cache:
            if field != "source" and not key[2]:
                cache[key] = np.zeros(0, np.int64)  # voice not known
            else:
                cache[key] = np.nonzero(cache["ok"][keyword] & (getattr(ds, field) == key[2]))[0]
        if len(cache[key]):
            return cache[key]
    return cache[key]


def make_batch(ds: Dataset, idx: np.ndarray, rng: np.random.Generator, train: bool, noise_prob: float = 0.0,
               speed_prob: float = 0.0, splice_prob: float = 0.0, color_prob: float = 0.0,
               vowel_prob: float = 0.0, pitch_prob: float = 0.0, babble_prob: float = 0.0,
               speed_range=SPEED_RANGE):
    """(B, 2 s) float inputs and labels: context second + target second
    (shifted); in training, with probability splice_prob a keyword's target
    second becomes half of it spliced to half of an _unknown_ word of the same
    voice where there is one (splice_pool), labelled _unknown_ (splice_pair); with
    probability color_prob its formants are moved and its spectrum tilted (recolor); with
    probability vowel_prob its formants are moved by a factor that changes every
    sound (formant_track); with probability pitch_prob its pitch alone is moved
    (shift_pitch); with probability speed_prob the target second is played speed_range (default
    0.88-1.12) times as fast, and
    with probability noise_prob noise is added to it: with probability babble_prob
    babble of several _unknown_ words (add_babble), else one noise clip (add_noise)."""
    b = len(idx)
    x = np.zeros((b, 2 * SR), dtype=np.float32)
    y = ds.y[idx].copy()
    keyword_ids = set(range(len(KEYWORDS)))
    non_kw = np.nonzero(~np.isin(ds.y, list(keyword_ids)))[0]
    pools = noise_pools(ds) if train and noise_prob > 0 else []
    babble_ids = np.nonzero(ds.y == ds.labels.index(UNKNOWN))[0] if train and babble_prob > 0 else []
    splice = train and splice_prob > 0 and UNKNOWN in ds.labels
    for i, j in enumerate(idx):
        target = ds.audio[j].astype(np.float32) / 32768.0
        if splice and ds.y[j] in keyword_ids and rng.random() < splice_prob:
            pool = splice_pool(ds, KEYWORDS[ds.y[j]], j)
            if len(pool):
                other = ds.audio[pool[rng.integers(len(pool))]].astype(np.float32) / 32768.0
                spliced = splice_pair(target, other, bool(rng.random() < 0.5), rng)
                if spliced is not None:
                    target, y[i] = spliced, ds.labels.index(UNKNOWN)
        if train and color_prob > 0 and rng.random() < color_prob:
            target = recolor(target, float(rng.uniform(*FORMANT_RANGE)), float(rng.uniform(*TILT_RANGE)))
        if train and vowel_prob > 0 and rng.random() < vowel_prob:
            target = recolor(target, formant_track(len(target), rng), 0.0)
        if train and pitch_prob > 0 and rng.random() < pitch_prob:
            target = shift_pitch(target, float(np.exp(rng.uniform(*np.log(PITCH_RANGE)))))
        if train and speed_prob > 0 and rng.random() < speed_prob:
            target = change_speed(target, float(rng.uniform(*speed_range)))
        shift = int(rng.integers(-1600, 1601)) if train else 0
        if shift > 0:
            target = np.concatenate([np.zeros(shift, np.float32), target[:-shift]])
        elif shift < 0:
            target = np.concatenate([target[-shift:], np.zeros(-shift, np.float32)])
        if train:
            target *= float(10 ** (rng.uniform(-6, 6) / 20))
            if noise_prob > 0 and rng.random() < noise_prob:
                if babble_prob > 0 and rng.random() < babble_prob and len(babble_ids):
                    add_babble(target, ds, babble_ids, rng)
                else:
                    add_noise(target, ds, pools, rng)
        ctx_kind = rng.random()
        if ctx_kind < 0.3 or len(non_kw) == 0:
            ctx = np.zeros(SR, np.float32)
        else:
            ctx = ds.audio[non_kw[rng.integers(len(non_kw))]].astype(np.float32) / 32768.0
            ctx *= float(10 ** (rng.uniform(-12, 0) / 20))
        x[i, :SR] = ctx
        x[i, SR:] = target
    np.clip(x, -1.0, 1.0, out=x)
    return torch.from_numpy(x), torch.from_numpy(y)


WARP_RANGE = (0.88, 1.14)  # --warp-prob: frequency-warp factors of the front end's filters
RANGE_LIMITS = (0.5, 2.0)  # what --speed-range and --warp-range accept


def warp_filters(weight: torch.Tensor, factor: float) -> torch.Tensor:
    """The (rows, K) patch filters stretched in frequency by `factor` about the
    window centre: w'[n] = factor * w(c + (n - c) * factor), linearly interpolated,
    zero outside the kernel. A filter at f Hz then responds at f * factor Hz with
    about the same gain: the spectrum the model sees is warped by 1 / factor, as a
    shorter or longer vocal tract (and a higher or lower voice) would warp it."""
    k = weight.shape[1]
    c = (k - 1) / 2.0
    pos = c + (torch.arange(k, dtype=weight.dtype) - c) * factor
    lo = pos.floor().long()
    frac = (pos - lo.to(weight.dtype)).unsqueeze(0)
    inside = ((lo >= 0) & (lo + 1 <= k - 1)).to(weight.dtype).unsqueeze(0)
    lo_c, hi_c = lo.clamp(0, k - 1), (lo + 1).clamp(0, k - 1)
    return factor * inside * (weight[:, lo_c] * (1 - frac) + weight[:, hi_c] * frac)


class SpeakerAugment:
    """On-the-fly speaker and SpecAugment-style changes inside the model's front end,
    in training mode only (evaluation and the converted model are untouched):
      * with probability warp_prob per group of examples, the log-power patch filters
        frequency-warped by a factor in warp_range (default WARP_RANGE; vocal-tract-length warping);
      * with probability mask_prob per example, up to two time spans of up to 10 tokens
        (100 ms at the demo model's rate) and up to two bands of up to 1/8 of the feature
        channels replaced by that example's mean feature value."""

    GROUPS = 4

    def __init__(self, model, warp_prob: float, mask_prob: float, rng: np.random.Generator,
                 warp_range=WARP_RANGE):
        self.emb, self.warp_prob, self.mask_prob, self.rng = model.embed_tokens, warp_prob, mask_prob, rng
        self.warp_range = tuple(warp_range)
        self.plain = self.emb.forward
        if warp_prob > 0 and self.emb.features not in ("logpower", "logmel"):
            raise ValueError("--warp-prob needs the log-power or log-mel front end")
        # log-mel: the masks fall on the mel bands, before they are mixed into channels
        self.mask_bands = self.emb.features == "logmel"
        self.emb.forward = self.forward

    def embed(self, s: torch.Tensor, factor: float) -> torch.Tensor:
        emb = self.emb
        if self.mask_bands:
            return emb.log_power(s, None if factor == 1.0 else warp_filters(emb.weight, factor))
        if factor == 1.0:
            return self.plain(s)
        return emb.finish(emb.log_power(s, warp_filters(emb.weight, factor)))

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        if not self.emb.training:
            return self.plain(s)
        rng = self.rng
        parts = []
        for g in torch.arange(s.shape[0]).chunk(self.GROUPS):
            warp = self.warp_prob > 0 and rng.random() < self.warp_prob
            parts.append(self.embed(s[g], float(rng.uniform(*self.warp_range)) if warp else 1.0))
        x = torch.cat(parts)
        if self.mask_prob > 0:
            x = self.mask(x)
        return self.emb.finish(x) if self.mask_bands else x

    def mask(self, x: torch.Tensor) -> torch.Tensor:
        rng = self.rng
        keep = torch.ones_like(x)
        t, d = x.shape[1], x.shape[2]
        for i in range(x.shape[0]):
            if rng.random() >= self.mask_prob:
                continue
            for _ in range(int(rng.integers(1, 3))):
                w = int(rng.integers(1, 11))
                a = int(rng.integers(0, max(1, t - w)))
                keep[i, a:a + w, :] = 0
            for _ in range(int(rng.integers(1, 3))):
                w = int(rng.integers(1, max(2, d // 8) + 1))
                a = int(rng.integers(0, max(1, d - w)))
                keep[i, :, a:a + w] = 0
        fill = x.detach().mean(dim=(1, 2), keepdim=True)
        return x * keep + fill * (1 - keep)


class HardExamples:
    """Streaming windows mined by tools/mega_kws_tools/training/mine_hard.py (2 s each: the
    context second and the window second, as make_batch builds them), mixed
    into training batches: replace() swaps each row for a random hard example
    with probability `share`, at a random level (+-6 dB)."""

    def __init__(self, paths, labels):
        audio, y = [], []
        for p in paths:
            with np.load(p) as z:
                if z["audio"].ndim != 2 or z["audio"].shape[1] != 2 * SR:
                    raise ValueError(f"{p}: audio must be (N, {2 * SR})")
                unknown = sorted(set(z["labels"].tolist()) - set(labels))
                if unknown:
                    raise ValueError(f"{p}: labels {unknown} are not this run's")
                audio.append(z["audio"])
                y.append(np.array([labels.index(l) for l in z["labels"].tolist()], np.int64))
        self.labels = labels
        self.audio = np.concatenate(audio) if audio else np.zeros((0, 2 * SR), np.int16)
        self.y = np.concatenate(y) if y else np.zeros(0, np.int64)

    def __len__(self):
        return len(self.y)

    def summary(self) -> str:
        counts = np.bincount(self.y, minlength=len(self.labels))
        return ", ".join(f"{l} {c}" for l, c in zip(self.labels, counts) if c)

    def replace(self, x: torch.Tensor, y: torch.Tensor, rng: np.random.Generator, share: float):
        for i in np.nonzero(rng.random(len(y)) < share)[0]:
            j = int(rng.integers(len(self.y)))
            a = self.audio[j].astype(np.float32) / 32768.0 * float(10 ** (rng.uniform(-6, 6) / 20))
            x[i] = torch.from_numpy(np.clip(a, -1.0, 1.0))
            y[i] = int(self.y[j])


def stop_on_signal() -> list:
    """SIGINT and SIGTERM (unless ignored, as for a background job's SIGINT)
    append their number to the returned list, which the training loop checks
    after each step, and restore the default action, so that a second one
    stops the process at once."""
    caught = []

    def handler(signum, frame):
        caught.append(signum)
        signal.signal(signum, signal.SIG_DFL)

    for s in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(s) is not signal.SIG_IGN:
            signal.signal(s, handler)
    return caught


class BatchWorker:
    """Training batches drawn ahead by a child process (--prefetch N), so that
    making them (the pitch shift most of all) runs on a second core while this
    one trains. The child draws exactly what the loop would: it is forked
    before the model exists, gets the batch generator's state with start(),
    and sends each batch with the generator's state after it, which next()
    copies into the caller's generator, so checkpoints and --resume see the
    same state as without it (train_smoke compares the losses)."""

    def __init__(self, depth: int, draw):
        import multiprocessing
        ctx = multiprocessing.get_context("fork")
        self.orders = ctx.Queue()
        self.slots = ctx.Semaphore(depth)  # batches the child may make before this side takes them
        # batches come through a pipe whose only write end is the child's: if the child dies, even
        # halfway through sending a batch, reading here ends (EOFError) instead of waiting for ever
        self.reader, writer = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=self._work, args=(draw, os.getpid(), writer), daemon=True)
        self.proc.start()
        writer.close()

    def _work(self, draw, parent: int, writer):
        import ctypes
        import traceback
        # die with the trainer, even when it is killed (PR_SET_PDEATHSIG); Ctrl-C, which the terminal
        # sends to both, is the trainer's to handle (it stops after the step and saves)
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.reader.close()
        if os.getppid() != parent:
            return
        state, count = self.orders.get()
        rng = np.random.default_rng()
        rng.bit_generator.state = state
        try:
            for _ in range(count):
                self.slots.acquire()
                batch = draw(rng)
                writer.send((tuple(t.numpy() for t in batch), rng.bit_generator.state))
        except Exception:  # noqa: BLE001  (any failure is reported to the trainer, which stops)
            writer.send(("error", traceback.format_exc()))

    def start(self, rng: np.random.Generator, count: int):
        """Draw `count` batches from the generator's present state."""
        self.orders.put((rng.bit_generator.state, count))

    def next(self, rng: np.random.Generator):
        """The next batch, the tuple of tensors draw returned (x, y, ...); rng is left
        where drawing it left the child's."""
        try:
            item = self.reader.recv()  # the child's death closes the pipe's only write end: EOFError
        except (EOFError, OSError):
            self.proc.join(5)
            raise RuntimeError(f"the batch worker (pid {self.proc.pid}) died, exit code "
                               f"{self.proc.exitcode}") from None
        self.slots.release()
        if isinstance(item[0], str):
            raise RuntimeError(f"the batch worker failed:\n{item[1]}")
        arrays, state = item
        rng.bit_generator.state = state
        return tuple(torch.from_numpy(a) for a in arrays)

    def close(self):
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()
        self.reader.close()


def voice_targets(ds: Dataset):
    """--voice-adversary's classes: (names, one class index per clip). One class per
    voice group of the generated clips (tools/mega_kws_tools/data/voices.py: voices built from one
    recorded speaker share a group), one for every real speaker together ("real", so
    that synthetic against real is one more cue to lose), and -1 for clips that no
    voice says (_silence_, background crops), which the adversary does not see."""
    from mega_kws_tools.data import voices as vc
    group = {v.id: v.group for v in vc.ALL_VOICES}
    silence = ds.labels.index(SILENCE) if SILENCE in ds.labels else -1
    keys = [None if not v or y == silence else "real" if v.startswith("speaker:") else group.get(v, v)
            for v, y in zip(ds.voice, ds.y)]
    names = sorted({k for k in keys if k is not None})
    index = {n: i for i, n in enumerate(names)}
    return names, np.array([-1 if k is None else index[k] for k in keys], dtype=np.int64)


class _ReversedGradient(torch.autograd.Function):
    """Identity forward; the gradient times -scale backward."""

    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.scale * grad, None


class VoiceAdversary(torch.nn.Module):
    """--voice-adversary: a small classifier that names the voice of a clip from the
    window embedding the keyword head reads (MegaKWS.window_embedding), trained
    through a reversed gradient (domain-adversarial training): it learns to tell the
    voices apart while the encoder is pushed, with weight `scale`, to make them
    impossible to tell apart. Training only: it is not part of the model file."""

    LR_SCALE = 10.0  # it starts from nothing beside a fine-tuned encoder: a faster rate than the model's

    def __init__(self, dim: int, names, hidden: int = 128):
        super().__init__()
        self.names = list(names)
        self.net = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.ReLU(),
                                       torch.nn.Linear(hidden, len(self.names)))

    def forward(self, embedding: torch.Tensor, scale: float) -> torch.Tensor:
        return self.net(_ReversedGradient.apply(embedding, scale))


def adversary_scale(weight: float, ramp: int, step: int) -> float:
    """The reversed gradient's weight at `step` (0-based): 0 at the first step, rising
    linearly to `weight` over `ramp` steps, so the adversary first learns the voices."""
    return weight * min(1.0, step / ramp) if ramp > 0 else weight


class WeightAverage:
    """An exponential moving average of a model's weights and BatchNorm
    statistics (--weight-average): after each optimizer step,
    avg <- d * avg + (1 - d) * current, with d = min(decay, (1 + n) / (10 + n))
    at the n-th update so that the starting weights fade out early. Integer
    buffers (BatchNorm's step counters) are copied."""

    def __init__(self, model, decay: float):
        self.decay, self.n = decay, 0
        self.avg = {k: v.detach().clone() for k, v in model.state_dict().items()}

    def state_dict(self) -> dict:  # the decay is the run's --weight-average, kept with its args
        return {"avg": self.avg, "n": self.n}

    def load_state_dict(self, state: dict):
        if state.keys() != {"avg", "n"} or state["avg"].keys() != self.avg.keys():
            raise ValueError("the checkpoint's weight average does not fit this model")
        self.avg, self.n = state["avg"], state["n"]

    @torch.no_grad()
    def update(self, model):
        self.n += 1
        d = min(self.decay, (1 + self.n) / (10 + self.n))
        for k, v in model.state_dict().items():
            a = self.avg[k]
            if a.is_floating_point():
                a.mul_(d).add_(v.detach(), alpha=1 - d)
            else:
                a.copy_(v)

    @contextlib.contextmanager
    def applied(self, model):
        """The model holds the averaged weights inside the block, its own after."""
        own = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(self.avg)
        try:
            yield
        finally:
            model.load_state_dict(own)


def evaluate(model, ds: Dataset, batch: int = 128):
    model.eval()
    rng = np.random.default_rng(123)
    correct, confusion = 0, np.zeros((len(ds.labels), len(ds.labels)), dtype=np.int64)
    with torch.no_grad():
        for s in range(0, len(ds), batch):
            idx = np.arange(s, min(len(ds), s + batch))
            x, y = make_batch(ds, idx, rng, train=False)
            pred = model.window_logits(x).argmax(dim=1)
            correct += int((pred == y).sum())
            for t, p in zip(y.tolist(), pred.tolist()):
                confusion[t, p] += 1
    model.train()
    return correct / max(1, len(ds)), confusion


def js_divergence(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Mean Jensen-Shannon divergence between the softmax of two (B, C) logit
    tensors: KL of each to their mixture, halved; 0 where they agree, at most ln 2."""
    pa, pb = F.log_softmax(a, dim=1), F.log_softmax(b, dim=1)
    mix = torch.logsumexp(torch.stack([pa, pb]), dim=0) - math.log(2.0)
    return 0.5 * ((pa.exp() * (pa - mix)).sum(dim=1) + (pb.exp() * (pb - mix)).sum(dim=1)).mean()


def mixup(x: torch.Tensor, y: torch.Tensor, rng: np.random.Generator, prob: float, alpha: float):
    """--mixup-prob: each clip of the batch, with probability prob, becomes
    lam * itself + (1 - lam) * another clip of the batch (a random pairing;
    rarely itself), lam ~ Beta(alpha, alpha) folded to at least 0.5 so that
    its own label keeps the larger share; the others keep lam = 1. Returns the
    mixed batch, each clip's partner's label and lam (for mixup_loss)."""
    b = len(y)
    partner = torch.from_numpy(rng.permutation(b))
    lam = rng.beta(alpha, alpha, size=b)
    lam = np.where(rng.random(b) < prob, np.maximum(lam, 1.0 - lam), 1.0)
    lam = torch.from_numpy(lam.astype(np.float32))
    mixed = lam[:, None] * x + (1.0 - lam[:, None]) * x[partner]
    return mixed, y[partner], lam


def mixup_loss(logits: torch.Tensor, y: torch.Tensor, partner_y: torch.Tensor, lam: torch.Tensor,
               label_smoothing: float) -> torch.Tensor:
    """Cross-entropy against the mixed targets: lam of the clip's own label and
    1 - lam of its partner's, each smoothed as in the unmixed loss."""
    own = F.cross_entropy(logits, y, label_smoothing=label_smoothing, reduction="none")
    other = F.cross_entropy(logits, partner_y, label_smoothing=label_smoothing, reduction="none")
    return (lam * own + (1.0 - lam) * other).mean()


def keyword_js_divergence(a: torch.Tensor, b: torch.Tensor, y: torch.Tensor, keywords: torch.Tensor) -> torch.Tensor:
    """js_divergence over the keyword clips of y only (y holds one label per row;
    keywords is a bool mask over the classes), of the two views' softmax over the
    keyword columns alone, renormalized: the views must agree on which keyword it
    is, while how sure they are that it is a keyword at all is left to the
    cross-entropy. 0 if the batch has no keyword clip."""
    rows = keywords[y]
    if not bool(rows.any()):
        return a.new_zeros(())
    return js_divergence(a[rows][:, keywords], b[rows][:, keywords])


def sampling_probabilities(ds: Dataset, unknown_share: float = 0.0, extra_share: Optional[float] = None,
                           boost: Optional[dict] = None) -> np.ndarray:
    """Per-clip probabilities of being drawn: every class equally likely
    (class-balanced), or, with unknown_share > 0, _unknown_ drawn that share of
    the time and the other classes equally likely in the rest.

    Within a class, clips are equally likely, so a class with few extra
    (real) clips is almost always heard in a synthetic voice. extra_share, if
    given, draws the extra clips of every class that has both kinds that share of
    the class's time, so that the kind of voice says nothing about the class.

    boost, if given, maps class names to factors: such a class is drawn that
    many times as often as it otherwise would be, taken from the others in proportion."""
    counts = np.bincount(ds.y, minlength=len(ds.labels)).astype(np.float64)
    present = counts > 0
    share = present / present.sum()
    if unknown_share > 0 and "_unknown_" in ds.labels and present[ds.labels.index("_unknown_")]:
        u = ds.labels.index("_unknown_")
        rest = present.copy()
        rest[u] = False
        share = np.where(rest, (1.0 - unknown_share) / max(1, rest.sum()), 0.0)
        share[u] = unknown_share
    if boost:
        share = share * np.array([boost.get(name, 1.0) for name in ds.labels])
        share = share / share.sum()
    p = (share / np.maximum(counts, 1))[ds.y]
    if extra_share is not None:
        n = len(ds.labels)
        extra = np.bincount(ds.y[ds.source == 1], minlength=n).astype(np.float64)
        base = counts - extra
        both = (extra > 0) & (base > 0)
        for s, kind_count, frac in ((1, extra, extra_share), (0, base, 1.0 - extra_share)):
            sel = (ds.source == s) & both[ds.y]
            p[sel] = (share * frac / np.maximum(kind_count, 1))[ds.y[sel]]
    return p / p.sum()


def load_init(path):
    """The checkpoint dict behind --init: a training checkpoint, or a .mega file unpacked."""
    try:
        if path.endswith(".mega"):
            from mega_kws_tools.convert import mega_unpack  # the FlatBuffers reader, only needed here
            with open(path, "rb") as f:
                model, labels, _, _ = mega_unpack.unpack(f.read())
            return {"config": dataclasses.asdict(model.cfg), "model": model.state_dict(), "labels": labels,
                    "step": None, "best_val": None}
        return torch.load(path, map_location="cpu")
    except Exception as e:  # unreadable, corrupt, or not a model: say which file and why
        print(f"train.py: --init {path}: {e}", file=sys.stderr)
        return None


def load_model(path):
    """(model, labels) of a training checkpoint or a .mega file, as --init reads them, for the
    analysis tools; exits with the file and the reason when it is not a usable model."""
    ck = load_init(path)
    if ck is None:
        sys.exit(1)
    try:
        return mt.model_from_config_checkpoint(ck), ck["labels"]
    except (KeyError, ValueError) as e:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {path}: {e}")


def state_mismatch(model, weights: dict):
    """None when `weights` fit `model`, else one line saying what differs (missing and
    unexpected tensors, shapes), naming --patch-norm when its start value is the difference."""
    own = model.state_dict()
    missing = [k for k in own if k not in weights]
    extra = [k for k in weights if k not in own]
    shapes = [f"{k} {tuple(weights[k].shape)} (this run {tuple(own[k].shape)})" for k in own
              if k in weights and tuple(weights[k].shape) != tuple(own[k].shape)]
    if not (missing or extra or shapes):
        return None

    def few(names):
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    parts = ([f"this run has {few(missing)}, the checkpoint not"] if missing else []) + \
        ([f"the checkpoint has {few(extra)}, this run not"] if extra else []) + \
        ([f"shapes differ: {few(shapes)}"] if shapes else [])
    hint = " (--patch-norm differs from the checkpoint's)" if "embed_tokens.norm_init" in missing + extra else ""
    return "; ".join(parts) + hint


def mean_log_power(model, ds: Dataset, rng: np.random.Generator, n: int):
    """The front end's mean log power (log-mel: per band) over n training inputs drawn
    without augmentation, per channel, and how many inputs that was."""
    x, _ = make_batch(ds, rng.choice(len(ds), size=min(n, len(ds)), replace=False), rng, train=False)
    with torch.no_grad():
        return model.embed_tokens.log_power(model.scale_input(x)).mean(dim=(0, 1)), len(x)


def init_running_mean(model, ds: Dataset, rng: np.random.Generator, keep_function: bool, n: int = 256):
    """Sets the running mean's starting value (embed_tokens.norm_init) to the mean log
    power of n training inputs, so the normalization starts where it removes a typical
    spectrum. keep_function (a checkpoint trained without it): the bias absorbs
    scale * that mean, so the model computes what the checkpoint did while the running
    mean stays at its start."""
    emb = model.embed_tokens
    mean, count = mean_log_power(model, ds, rng, n)
    with torch.no_grad():
        emb.norm_init.copy_(mean)
        if keep_function:
            emb.bias.add_(emb.scale * mean)
    print(f"running mean: decay {emb.norm_decay}, starting value set from {count} training inputs "
          f"(mean {float(mean.mean()):.2f})", flush=True)


def init_logmel_bias(model, ds: Dataset, rng: np.random.Generator, n: int = 256):
    """Sets a fresh log-mel embedding's bias to -mix . (mean log-mel of n training
    inputs), so its channels start near zero mean instead of at log-power offsets."""
    emb = model.embed_tokens
    mean, count = mean_log_power(model, ds, rng, n)
    with torch.no_grad():
        emb.bias.copy_(-torch.matmul(emb.mix, mean))
    print(f"log-mel: {emb.bands.shape[0]} bands, bias set from {count} training inputs "
          f"(mean log-mel {float(mean.mean()):.2f})", flush=True)


def save(path, model, opt, step, best, labels, args, rngs, best_key=None, average=None, adversary=None):
    """rngs: the batch and the feature-augmentation generators, whose states
    --resume restores so that a resumed run draws what the whole run would."""
    tmp = path + ".tmp"
    ck = {"config": dataclasses.asdict(model.cfg), "model": model.state_dict(), "labels": labels,
          "optimizer": opt.state_dict(), "step": step, "best_val": best, "args": vars(args),
          "rng": rngs[0].bit_generator.state, "augment_rng": rngs[1].bit_generator.state, "best_key": best_key}
    if average is not None:
        ck["weight_average"] = average.state_dict()
    if adversary is not None:
        ck["voice_adversary"] = {"names": adversary.names, "state": adversary.state_dict()}
    torch.save(ck, tmp)
    os.replace(tmp, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="Speech Commands-layout folder")
    ap.add_argument("--classes", choices=["sc10", "kws12"], default="kws12")
    ap.add_argument("--out", required=True, help="run directory (checkpoints, log)")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="demo")
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=200, help="steps of linear learning-rate warm-up")
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--frontend-lr-scale", type=float, default=0.03,
                    help="learning-rate factor for the log-power front end's filters")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefetch", type=int, default=0, metavar="N",
                    help="make up to N training batches ahead in a second process (a second core), so "
                         "the augmentation does not wait on the model; the same batches, losses and "
                         "checkpoints as without it (default 0: in this process)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-per-class", type=int, default=0, help="cap clips per class (smoke tests)")
    ap.add_argument("--resume", action="store_true", help="continue from RUN_DIR/last.pt")
    ap.add_argument("--stop-at", type=int, metavar="STEP",
                    help="stop after this step (validated and checkpointed) and leave the rest of --steps, "
                         "schedule included, to a later --resume: a run split across sessions")
    ap.add_argument("--extra-data", action="append", default=[], metavar="DIR",
                    help="another Speech Commands-layout folder whose training split is added to the "
                         "training clips (repeatable); validation comes from --data and --extra-val")
    ap.add_argument("--extra-val", action="append", default=[], metavar="DIR",
                    help="another Speech Commands-layout folder whose validation split is added to the "
                         "validation clips (repeatable), e.g. real recordings of validation-split speakers")
    ap.add_argument("--noise-prob", type=float, default=0.0, metavar="P",
                    help="mix a fresh noise or babble clip into a training example with probability P "
                         "(on-the-fly augmentation against overfitting; default 0)")
    ap.add_argument("--babble-prob", type=float, default=0.0, metavar="P",
                    help="with --noise-prob: the noise is, with probability P, babble of 3-7 _unknown_ words "
                         "at -3..12 dB SNR over the second instead of one noise clip (default 0)")
    ap.add_argument("--speed-prob", type=float, default=0.0, metavar="P",
                    help=f"play a training example {SPEED_RANGE[0]}-{SPEED_RANGE[1]}x as fast (tempo and pitch) "
                         "with probability P (on-the-fly augmentation; default 0)")
    ap.add_argument("--speed-range", type=float, nargs=2, default=list(SPEED_RANGE), metavar=("LO", "HI"),
                    help=f"the playback-rate factors of --speed-prob (default {SPEED_RANGE[0]} {SPEED_RANGE[1]}; "
                         f"{RANGE_LIMITS[0]}-{RANGE_LIMITS[1]})")
    ap.add_argument("--color-prob", type=float, default=0.0, metavar="P",
                    help=f"move a training example's formants by {FORMANT_RANGE[0]}-{FORMANT_RANGE[1]}x at the same "
                         f"pitch and tilt its spectrum by {TILT_RANGE[0]:+g} to {TILT_RANGE[1]:+g} dB per octave with "
                         "probability P (speaker augmentation; default 0)")
    ap.add_argument("--vowel-prob", type=float, default=0.0, metavar="P",
                    help=f"move a training example's formants by a factor that drifts within {FORMANT_RANGE[0]}-"
                         f"{FORMANT_RANGE[1]}x from one {VOWEL_KNOT * COLOR_HOP * 1000 // SR} ms stretch to the next "
                         "(each sound its own vowel quality) with probability P (speaker augmentation; default 0)")
    ap.add_argument("--pitch-prob", type=float, default=0.0, metavar="P",
                    help=f"move a training example's pitch by {PITCH_RANGE[0]}-{PITCH_RANGE[1]}x, its formants and "
                         "timing kept, with probability P (speaker augmentation; default 0)")
    ap.add_argument("--warp-prob", type=float, default=0.0, metavar="P",
                    help=f"frequency-warp the log-power front end's filters by {WARP_RANGE[0]}-{WARP_RANGE[1]} for a "
                         "quarter of the batch with probability P (vocal-tract-length augmentation; default 0)")
    ap.add_argument("--warp-range", type=float, nargs=2, default=list(WARP_RANGE), metavar=("LO", "HI"),
                    help=f"the frequency-warp factors of --warp-prob (default {WARP_RANGE[0]} {WARP_RANGE[1]}; "
                         f"{RANGE_LIMITS[0]}-{RANGE_LIMITS[1]})")
    ap.add_argument("--mask-prob", type=float, default=0.0, metavar="P",
                    help="SpecAugment-style time and channel masks on an example's features with probability P "
                         "(default 0)")
    ap.add_argument("--unknown-share", type=float, default=0.0, metavar="S",
                    help="draw _unknown_ clips this share of the time (the other classes equally often in "
                         "the rest); default 0: every class equally often")
    ap.add_argument("--extra-share", type=float, metavar="S",
                    help="within each class that has --extra-data clips and --data clips, draw the extra "
                         "ones this share of the class's time (default: as their number falls, so a class "
                         "with few real clips is heard almost only in synthetic voices)")
    ap.add_argument("--splice-prob", type=float, default=0.0, metavar="P",
                    help="with probability P a drawn keyword clip becomes half of it spliced to half of an "
                         "_unknown_ word (its onset and the other's coda, or the reverse), labelled _unknown_: "
                         "near misses that sound like the start or end of a keyword (default 0)")
    ap.add_argument("--label-smoothing", type=float, default=0.05, metavar="E",
                    help="train toward targets of 1 - E + E/classes for the clip's class and E/classes for "
                         "each other class, which bounds how sure the model learns to be (default 0.05)")
    ap.add_argument("--hard-examples", action="append", default=[], metavar="NPZ",
                    help="hard streaming windows of training voices (tools/mega_kws_tools/training/mine_hard.py); repeatable")
    ap.add_argument("--hard-share", type=float, default=0.2, metavar="S",
                    help="with --hard-examples: the share of each batch drawn from them (default 0.2)")
    ap.add_argument("--voice-adversary", type=float, default=0.0, metavar="W",
                    help="domain-adversarial training against the voice: a small classifier names each "
                         "clip's voice group (all real speakers one class) from the window embedding, and "
                         "its gradient reaches the encoder reversed and times W, so that the voice stops "
                         "being a usable cue (default 0: off; training only, not in the model file)")
    ap.add_argument("--voice-adversary-ramp", type=int, default=200, metavar="N",
                    help="with --voice-adversary: W rises from 0 to W over the first N steps of the run "
                         "(default 200), so the classifier first learns the voices")
    ap.add_argument("--mixup-prob", type=float, default=0.0, metavar="P",
                    help="each training clip, with probability P, is mixed with another clip of its batch "
                         "(lam of it, lam ~ Beta(A, A) folded to >= 0.5) and the loss is the same mix of the "
                         "two labels' cross-entropies (mixup); default 0: off")
    ap.add_argument("--mixup-alpha", type=float, default=0.4, metavar="A",
                    help="with --mixup-prob: the Beta distribution's parameter (small: lam near 1)")
    ap.add_argument("--consistency", type=float, default=0.0, metavar="W",
                    help="draw half a batch of clips and augment each twice (its own pitch, speed, noise, "
                         "shift, context and warp), and add W times the Jensen-Shannon divergence between "
                         "the two views' predictions to the loss: the same word in two made-up voices "
                         "must get the same answer (default 0: off; try 2-10)")
    ap.add_argument("--consistency-scope", choices=("all", "keywords"), default="all",
                    help="with --consistency: 'all' compares the views over every class and clip; 'keywords' "
                         "only on keyword clips and over the keyword classes renormalized, so the views must "
                         "agree on which keyword it is but not on whether it is one (default all)")
    ap.add_argument("--class-boost", action="append", default=[], metavar="WORD=F",
                    help="draw class WORD F times as often as the class balance would (F > 0), taken in proportion "
                         "from the other classes; repeatable, e.g. --class-boost go=2 --class-boost no=1.5")
    ap.add_argument("--val-stream", nargs=2, metavar=("WAV", "CSV"),
                    help="a continuous recording of validation voices and its labels (make_stream.py): "
                         "keep the checkpoint with the best recall there at <= --val-max-fa false alarms "
                         "per keyword-free hour (as tune_detection.py tunes it; ties: validation accuracy) "
                         "instead of the best validation accuracy")
    ap.add_argument("--val-max-fa", type=float, default=5.0, metavar="N",
                    help="with --val-stream: false alarms per keyword-free hour allowed (default 5)")
    ap.add_argument("--weight-average", type=float, metavar="DECAY",
                    help="keep an exponential moving average of the weights (and BatchNorm statistics) with "
                         "this decay per step, e.g. 0.999; validation, the kept checkpoint (best.pt) and "
                         "so the converted model use the average (default: off)")
    ap.add_argument("--patch-norm", choices=mt.PATCH_NORMS, default="none",
                    help="running_mean: the log-power features less their running mean per channel "
                         "(a streaming cepstral-mean-style normalization; needs a log-power preset)")
    ap.add_argument("--patch-norm-decay", type=float, default=0.01, metavar="A",
                    help="with --patch-norm running_mean: weight of each new token in the mean (default 0.01, "
                         "about 1 s at 100 tokens/s)")
    ap.add_argument("--init", metavar="CKPT",
                    help="start from this checkpoint's weights (same preset) with a fresh optimizer "
                         "and schedule: fine-tuning, e.g. on more data; a .mega model file works too "
                         "(e.g. models/sc10-demo.mega, unpacked by tools/mega_kws_tools/convert/mega_unpack.py)")
    args = ap.parse_args()
    if args.weight_average is not None and not 0.0 < args.weight_average < 1.0:
        ap.error(f"--weight-average {args.weight_average}: must be between 0 and 1 (exclusive)")
    if args.prefetch < 0:
        ap.error(f"--prefetch {args.prefetch}: must be 0 (off) or more batches")
    if args.stop_at is not None and not 0 < args.stop_at <= args.steps:
        ap.error(f"--stop-at {args.stop_at}: must be a step of the run, 1 to --steps {args.steps}")
    if args.extra_share is not None and not args.extra_data:
        ap.error("--extra-share needs --extra-data")
    if not 0.0 <= args.mixup_prob <= 1.0:
        ap.error(f"--mixup-prob {args.mixup_prob}: must be between 0 and 1")
    if not args.mixup_alpha > 0:
        ap.error(f"--mixup-alpha {args.mixup_alpha}: must be above 0")
    if args.mixup_prob > 0 and args.consistency > 0:
        ap.error("--mixup-prob does not combine with --consistency (its two views of a clip would be mixed "
                 "with different partners)")
    if args.consistency < 0:
        ap.error(f"--consistency {args.consistency}: must be at least 0")
    if not (args.voice_adversary >= 0 and math.isfinite(args.voice_adversary)):
        ap.error(f"--voice-adversary {args.voice_adversary}: must be a number of at least 0")
    if args.voice_adversary_ramp < 0:
        ap.error(f"--voice-adversary-ramp {args.voice_adversary_ramp}: must be 0 or more steps")
    if args.voice_adversary > 0 and (args.mixup_prob > 0 or args.hard_examples):
        ap.error("--voice-adversary does not combine with --mixup-prob or --hard-examples (a mixed clip "
                 "or a mined window has no one voice)")
    if args.consistency > 0 and (args.batch < 2 or args.batch % 2):
        ap.error(f"--consistency needs an even --batch (two views of each clip), not {args.batch}")
    if args.consistency_scope != "all" and args.consistency == 0:
        ap.error(f"--consistency-scope {args.consistency_scope} needs --consistency W (the term it scopes)")
    if args.consistency > 0 and (args.hard_examples or args.splice_prob > 0):
        ap.error("--consistency does not combine with --hard-examples or --splice-prob "
                 "(both change a clip's label in one view only)")
    boost = {}
    for item in args.class_boost:
        word, _, factor = item.partition("=")
        try:
            boost[word] = float(factor)
        except ValueError:
            ap.error(f"--class-boost {item}: expected WORD=F with a number F, e.g. go=2")
        if not boost[word] > 0 or not math.isfinite(boost[word]):
            ap.error(f"--class-boost {item}: the factor must be a positive number")
    if not 0.0 <= args.label_smoothing < 1.0:
        ap.error(f"--label-smoothing {args.label_smoothing}: must be at least 0 and below 1")
    if args.babble_prob > 0 and args.noise_prob <= 0:
        ap.error("--babble-prob needs --noise-prob P > 0 (it decides what the noise is, not how often)")
    if args.babble_prob > 0 and args.classes != "kws12":
        ap.error("--babble-prob needs --classes kws12 (its babble is _unknown_ words)")
    for name, prob in (("speed_range", "speed_prob"), ("warp_range", "warp_prob")):
        flag, lo, hi = "--" + name.replace("_", "-"), *getattr(args, name)
        if not (math.isfinite(lo) and math.isfinite(hi) and RANGE_LIMITS[0] <= lo < hi <= RANGE_LIMITS[1]):
            ap.error(f"{flag} {lo:g} {hi:g}: needs {RANGE_LIMITS[0]:g} <= LO < HI <= {RANGE_LIMITS[1]:g}")
        if [lo, hi] != list(ap.get_default(name)) and getattr(args, prob) <= 0:
            ap.error(f"{flag} needs --{prob.replace('_', '-')} P > 0 (it sets the factors, not how often)")
    for name in ("babble_prob", "noise_prob", "speed_prob", "color_prob", "vowel_prob", "pitch_prob", "splice_prob", "unknown_share", "warp_prob", "mask_prob", "hard_share", "extra_share"):
        if getattr(args, name) is not None and not 0.0 <= getattr(args, name) <= 1.0:
            ap.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be between 0 and 1")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    for d in [args.data] + args.extra_data + args.extra_val:
        if not os.path.isdir(d):
            print(f"train.py: {d}: not a folder", file=sys.stderr)
            return 1
    train = Dataset(args.data, args.classes, "training", args.max_per_class, args.seed)
    for d in args.extra_data:
        train.extend(Dataset(d, args.classes, "training", args.max_per_class, args.seed))
    val = Dataset(args.data, args.classes, "validation", args.max_per_class, args.seed)
    for d in args.extra_val:
        val.extend(Dataset(d, args.classes, "validation", args.max_per_class, args.seed))
    if len(train) == 0:
        print(f"train.py: no training clips found under {args.data}", file=sys.stderr)
        return 1
    print(f"data: {len(train)} training, {len(val)} validation clips, labels {train.labels} "
          f"({time.time() - t0:.0f} s to load)", flush=True)
    try:
        hard = HardExamples(args.hard_examples, train.labels)
    except (OSError, ValueError, KeyError) as e:
        print(f"train.py: --hard-examples: {e}", file=sys.stderr)
        return 1
    stream = None
    if args.val_stream:
        try:
            keywords, free = streamscore.read_stream_labels(args.val_stream[1])
            stream = (read_wav(args.val_stream[0]).astype(np.float32) / 32768.0, keywords, free)
        except (OSError, ValueError, KeyError) as e:
            print(f"train.py: --val-stream: {e}", file=sys.stderr)
            return 1
        if not free:
            print(f"train.py: --val-stream: {args.val_stream[1]} marks no keyword-free stretch", file=sys.stderr)
            return 1
    if len(hard):
        print(f"hard examples: {len(hard)} windows, {hard.summary()}, drawn {args.hard_share:.0%} of the time",
              flush=True)
    unknown_boost = sorted(set(boost) - set(train.labels))
    if unknown_boost:
        print(f"train.py: --class-boost {', '.join(unknown_boost)}: not a class of this run "
              f"({', '.join(train.labels)})", file=sys.stderr)
        return 1
    p_sample = sampling_probabilities(train, args.unknown_share, args.extra_share, boost)
    views = 2 if args.consistency > 0 else 1  # --consistency: two augmented views of each drawn clip
    voice_names, voice_class = voice_targets(train)
    if args.voice_adversary > 0:
        if len(voice_names) < 2:
            print(f"train.py: --voice-adversary: the training clips have {len(voice_names)} voice(s) "
                  f"known by name, need 2 or more", file=sys.stderr)
            return 1
        print(f"voice adversary: weight {args.voice_adversary:g} (reached at step "
              f"{args.voice_adversary_ramp}), {len(voice_names)} voice classes over "
              f"{int((voice_class >= 0).sum())} clips", flush=True)

    def draw(rng: np.random.Generator):
        """The next training batch (x, y, voice class per clip) and what it draws from rng."""
        idx = rng.choice(len(train), size=args.batch // views, p=p_sample)
        xs, ys = zip(*(make_batch(train, idx, rng, train=True, noise_prob=args.noise_prob,
                                  speed_prob=args.speed_prob, splice_prob=args.splice_prob,
                                  color_prob=args.color_prob, vowel_prob=args.vowel_prob,
                                  pitch_prob=args.pitch_prob, babble_prob=args.babble_prob,
                                  speed_range=tuple(args.speed_range))
                         for _ in range(views)))
        x, y = torch.cat(xs), torch.cat(ys)
        if len(hard):
            hard.replace(x, y, rng, args.hard_share)
        return x, y, torch.from_numpy(np.tile(voice_class[idx], views))

    # forked before the model exists, so the child inherits no torch thread pool
    worker = BatchWorker(args.prefetch, draw) if args.prefetch > 0 else None
    if worker is not None:
        print(f"prefetch: up to {args.prefetch} batches made ahead in process {worker.proc.pid}", flush=True)

    cfg = mt.MegaConfig(**PRESETS[args.preset], n_classes=len(train.labels), bidirectional=False,
                        patch_norm=args.patch_norm, patch_norm_decay=args.patch_norm_decay)
    try:
        model = mt.MegaKWS(cfg)
    except ValueError as e:
        print(f"train.py: preset {args.preset}: {e}", file=sys.stderr)
        return 1
    # Adam moves every weight by about lr per step, whatever its size: the front-end
    # filters (about 0.01 each) get a proportionally smaller rate, or the first
    # steps would wipe out their filterbank initialization.
    if cfg.patch_features == "logpower":
        front = [p for n, p in model.named_parameters() if n == "embed_tokens.weight"]
        rest = [p for n, p in model.named_parameters() if n != "embed_tokens.weight"]
        groups = [{"params": rest, "lr_scale": 1.0}, {"params": front, "lr_scale": args.frontend_lr_scale}]
    else:
        groups = [{"params": list(model.parameters()), "lr_scale": 1.0}]  # one group, as older checkpoints have
    adversary = None
    if args.voice_adversary > 0:
        adversary = VoiceAdversary(cfg.embed_dim, voice_names)
        groups.append({"params": list(adversary.parameters()), "lr_scale": VoiceAdversary.LR_SCALE})
    opt = torch.optim.AdamW(groups, lr=args.lr, weight_decay=args.weight_decay)
    step, best, best_key = 0, 0.0, None
    rng = np.random.default_rng(args.seed)
    augment_rng = np.random.default_rng(args.seed + 1)
    last = os.path.join(args.out, "last.pt")
    resumed = None
    if args.resume and os.path.exists(last):
        ck = torch.load(last, map_location="cpu")
        why = state_mismatch(model, ck["model"])
        if why:
            print(f"train.py: --resume {last} does not fit this run's flags (preset {args.preset}): {why}",
                  file=sys.stderr)
            return 1
        model.load_state_dict(ck["model"])
        if adversary is not None:
            saved = ck.get("voice_adversary")
            if saved is None or saved["names"] != voice_names:
                print(f"train.py: --resume {last}: "
                      f"{'no voice adversary in it' if saved is None else 'its voice adversary has other voices'}"
                      f"; resume with the flags it was made with", file=sys.stderr)
                return 1
            adversary.load_state_dict(saved["state"])
        elif "voice_adversary" in ck:
            print(f"train.py: --resume {last} was made with --voice-adversary; resume with it", file=sys.stderr)
            return 1
        opt.load_state_dict(ck["optimizer"])
        step, best = ck["step"], ck["best_val"]
        # older checkpoints kept the best validation accuracy, without a key
        best_key = ck.get("best_key") or (None if args.val_stream else [best])
        rng.bit_generator.state = ck["rng"]
        if "augment_rng" in ck:  # older checkpoints restart it
            augment_rng.bit_generator.state = ck["augment_rng"]
        resumed = ck
        print(f"resumed at step {step} (best validation accuracy {best:.4f})", flush=True)
    elif args.init:
        ck = load_init(args.init)
        if ck is None:
            return 1
        if ck.get("labels") != train.labels:
            print(f"train.py: {args.init} has labels {ck.get('labels')}, this run {train.labels}", file=sys.stderr)
            return 1
        weights = dict(ck["model"])
        fresh_norm = cfg.patch_norm != "none" and "embed_tokens.norm_init" not in weights
        if fresh_norm:  # a checkpoint without the normalization: start it where it changes nothing yet
            weights["embed_tokens.norm_init"] = model.embed_tokens.norm_init.detach()
        why = state_mismatch(model, weights)
        if why:
            print(f"train.py: --init {args.init} does not fit preset {args.preset}: {why}", file=sys.stderr)
            return 1
        model.load_state_dict(weights)
        if fresh_norm:
            init_running_mean(model, train, np.random.default_rng(args.seed + 2), keep_function=True)
        val_acc = ck.get("best_val")
        print(f"initialized from {args.init} (its step {ck.get('step')}, validation accuracy "
              f"{'unknown' if val_acc is None else f'{val_acc:.4f}'})", flush=True)
    elif cfg.patch_norm != "none":
        init_running_mean(model, train, np.random.default_rng(args.seed + 2), keep_function=False)
    elif cfg.patch_features == "logmel":
        init_logmel_bias(model, train, np.random.default_rng(args.seed + 2))
    average = None
    if args.weight_average is not None:
        average = WeightAverage(model, args.weight_average)
        if resumed is not None and "weight_average" in resumed:
            try:
                average.load_state_dict(resumed["weight_average"])
            except ValueError as e:
                print(f"train.py: {last}: {e}", file=sys.stderr)
                return 1
        print(f"weight average: decay {args.weight_average}, {average.n} updates so far", flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters, config {json.dumps(dataclasses.asdict(cfg))}", flush=True)
    print(f"label smoothing {args.label_smoothing}", flush=True)
    if args.mixup_prob > 0:
        print(f"mixup: {args.mixup_prob:g} of the clips, lam ~ Beta({args.mixup_alpha:g}) folded to >= 0.5",
              flush=True)
    if args.babble_prob > 0:
        print(f"babble: {args.babble_prob:g} of the noise, {BABBLE_WORDS[0]}-{BABBLE_WORDS[1]} _unknown_ words at "
              f"{BABBLE_SNR_DB[0]:g}..{BABBLE_SNR_DB[1]:g} dB", flush=True)

    if args.speed_prob > 0 or args.warp_prob > 0:
        print(f"speed factors {args.speed_range[0]:g}-{args.speed_range[1]:g} (p {args.speed_prob:g}), "
              f"warp factors {args.warp_range[0]:g}-{args.warp_range[1]:g} (p {args.warp_prob:g})", flush=True)
    try:
        SpeakerAugment(model, args.warp_prob, args.mask_prob, augment_rng, tuple(args.warp_range))
    except ValueError as e:
        print(f"train.py: {e}", file=sys.stderr)
        return 1
    keyword_mask = torch.tensor([name in KEYWORDS for name in train.labels])
    model.train()
    log = open(os.path.join(args.out, "log.txt"), "a")
    losses = open(os.path.join(args.out, "losses.txt"), "a", buffering=1)
    t_last = time.time()
    voice_right = voice_seen = 0
    stop = args.stop_at or args.steps  # checked above: 1 to --steps
    stop_signal = stop_on_signal()  # after the batch worker's fork: the worker keeps the defaults
    if worker is not None:
        worker.start(rng, stop - step)
    while step < stop:
        lr = args.lr * min(1.0, (step + 1) / max(1, args.warmup)) * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for g in opt.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        if worker is None:
            x, y, voice = draw(rng)
        else:
            try:
                x, y, voice = worker.next(rng)
            except RuntimeError as e:
                print(f"train.py: --prefetch: {e}", file=sys.stderr)
                return 1
        if args.mixup_prob > 0:  # drawn from augment_rng, in this process: --resume restores it
            x, partner_y, lam = mixup(x, y, augment_rng, args.mixup_prob, args.mixup_alpha)
        embedding = model.window_embedding(x)
        logits = model.head(embedding)
        if args.mixup_prob > 0:
            loss = mixup_loss(logits, y, partner_y, lam, args.label_smoothing)
        else:
            loss = F.cross_entropy(logits, y, label_smoothing=args.label_smoothing)
        if views == 2:
            a, b = logits.chunk(2)
            divergence = (keyword_js_divergence(a, b, y[:len(a)], keyword_mask)
                          if args.consistency_scope == "keywords" else js_divergence(a, b))
            loss = loss + args.consistency * divergence
        voiced = voice >= 0
        if adversary is not None and bool(voiced.any()):
            scale = adversary_scale(args.voice_adversary, args.voice_adversary_ramp, step)
            voice_logits = adversary(embedding[voiced], scale)
            loss = loss + F.cross_entropy(voice_logits, voice[voiced])
            voice_right += int((voice_logits.argmax(dim=1) == voice[voiced]).sum())
            voice_seen += int(voiced.sum())
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if average is not None:
            average.update(model)
        step += 1
        losses.write(f"{step} {loss.item():.6f}\n")
        if step % 25 == 0:
            msg = f"step {step} loss {loss.item():.4f} lr {lr:.2e} {(time.time() - t_last) / 25:.2f} s/step"
            if voice_seen:  # how well the voice can still be told, on these 25 training batches
                msg += f", voice adversary {voice_right / voice_seen:.3f} right"
                voice_right = voice_seen = 0
            print(msg, flush=True)
            log.write(msg + "\n")
            t_last = time.time()
        checkpoint = step % args.eval_every == 0 or step == stop
        if checkpoint:
            # the averaged weights, if any, are what is validated and kept as best.pt
            with average.applied(model) if average is not None else contextlib.nullcontext():
                acc, _ = evaluate(model, val)
                msg = f"step {step} validation accuracy {acc:.4f}"
                key = [acc]
                if stream is not None:
                    model.eval()
                    probs = tune_detection.stream_posteriors(model, stream[0])
                    model.train()
                    hop_s = cfg.chunk_samples / cfg.sample_rate
                    tuned, smoothing, thr, r = tune_detection.tune(probs, train.labels, hop_s, stream[1],
                                                                   stream[2], args.val_max_fa)
                    # (limit met, recall there or else minus the false-alarm rate, accuracy)
                    key = [float(tuned[0]), float(tuned[1]), acc]
                    msg += (f", stream recall {r['recall']:.4f} at threshold {thr:g} smoothing {smoothing} "
                            f"({r['fa_per_hour_keyword_free']:.1f} false alarms per keyword-free hour"
                            f"{'' if tuned[0] else ', over the limit'})")
                print(msg, flush=True)
                log.write(msg + "\n")
                log.flush()
                if best_key is None or key >= best_key:
                    best, best_key = acc, key
                    save(os.path.join(args.out, "best.pt"), model, opt, step, best, train.labels, args,
                         (rng, augment_rng), best_key)
        if checkpoint or stop_signal:
            save(last, model, opt, step, best, train.labels, args, (rng, augment_rng), best_key, average,
                 adversary)
        if stop_signal:
            break
    if worker is not None:
        worker.close()
    if stop_signal and step < stop:  # (one during the last step stopped nothing)
        name = signal.Signals(stop_signal[0]).name
        print(f"stopped at step {step} of {args.steps} ({name}): {last} saved; go on with the same command "
              f"and --resume; best validation accuracy so far {best:.4f}, {time.time() - t0:.0f} s", flush=True)
        return 128 + stop_signal[0]
    if step < args.steps:
        print(f"stopped at step {step} of {args.steps} (--stop-at): go on with the same command and --resume "
              f"instead of --stop-at; best validation accuracy so far {best:.4f}, {time.time() - t0:.0f} s",
              flush=True)
        return 0
    print(f"done: {step} steps, kept the checkpoint with validation accuracy {best:.4f}, "
          f"{time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
