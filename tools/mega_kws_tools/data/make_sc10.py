#!/usr/bin/python3
"""Generate a synthetic Speech Commands-style keyword dataset (SC10 + _unknown_ + _silence_).

  make_sc10.py --out DIR [--seed 1] [--per-word 1000] [--unknown 3000] [--silence 1200] [--jobs 2]

Layout (the same as Speech Commands v0.02, so tools/mega_kws_tools/training/train.py reads it as is):

  DIR/<label>/<name>.wav       1.000 s, 16 kHz, mono, 16-bit PCM
  DIR/validation_list.txt      "label/name.wav" per line (~10 %)
  DIR/testing_list.txt         "label/name.wav" per line (~10 %); every other clip is training
  DIR/manifest.csv             one row per clip: how it was made (see MANIFEST_FIELDS)
  DIR/README.txt               the generation command, tool versions and counts

Labels: yes no up down left right on off stop go, _unknown_ (the other Speech
Commands words plus near-miss and common words, so that a live detector learns
to stay quiet on other speech) and _silence_ (noise, hum, near-silence, clicks;
no speech).

Speech sources: the voice pool of tools/mega_kws_tools/data/voices.py (ONLY those; the reserved
voices named there are refused by name and judge the model from outside):
  * espeak-ng, its English voices and the voices of 38 other languages reading
    the English words (accents), each clip with a random variant from espeak-ng's
    variant folder (voices/!v: m1..m8, f1..f5, klatt*, whisper, croak, ...) or
    none, rate -s 110..220, pitch -p 20..80;
  * flite kal (8 kHz) and kal16, duration_stretch 0.8..1.3, int_f0_target_mean 90..160;
  * festival: kal_diphone and 13 non-English voices (Czech dita, krb (a child),
    machac, ph; Catalan ona; Italian lp, pc; Finnish lj, mv; Russian; the Hindi,
    Marathi and Telugu NSK voices), Duration_Stretch 0.8..1.3.
  Non-English voices read the keywords through phonetic respellings
  (voices.RESPELL, checked with tools/mega_kws_tools/data/voice_check.py: docs/voices.md).
  Half the renderings are warped (resampled 0.88..1.15x: pitch, formants and
  tempo together) before trimming.

Per speech clip: synthesize -> resample to 16 kHz (sox) -> trim leading and
trailing silence (energy based) -> if the word is longer than 0.95 s, speed it
up with sox `tempo` (pitch kept; at most 1.6x, otherwise re-drawn) -> place at
a random offset inside the second (the whole word fits, >= 20 ms from the
edges where it is short enough) -> reverberation
(p=0.3; exponentially decaying noise impulse response, RT60 0.1..0.6 s) ->
band-limiting (p=0.3; telephone 300-3400 Hz or low-pass 2.5-6 kHz, FFT-domain
mask with raised-cosine edges) -> background noise (p=0.7; white, pink,
brown, babble or 50/60 Hz hum with harmonics at an SNR of 0, 5, 10, 20 or 30 dB;
SNR = speech RMS over the word / noise RMS) -> speech peak scaled to -20..-3 dBFS
-> TPDF-dithered 16-bit quantization (the mix is kept inside [-1, 1)).
Babble is the sum of 4..8 quiet, unrelated, overlapping TTS words drawn from a
bank rendered once per run (never keywords; 300 words, --babble-words).

Silence clips: white / pink / brown noise at -60..-20 dBFS RMS, hum, noise+hum,
near-digital silence (tiny dither), optional band-limiting, and occasionally
clicks or short noise bursts.

Determinism: every clip is drawn from its own generator
np.random.default_rng(SeedSequence([seed, label_index, clip_index])), so the
output does not depend on --jobs and clip k of a label is the same whatever
--per-word / --unknown / --silence are (prefix-stable). The babble bank and
the set of usable variants are deterministic too (same tool versions assumed).
--festival pipe (not the default) keeps one festival process per voice and
worker running instead of starting text2wave for every word
(tools/mega_kws_tools/data/festival_pipe.py): the near-miss command of docs/models.md made its
2,384 held-out clips in 124 s with it, against 13 minutes with text2wave (an
earlier session, the same 2 cores). Festival carries some state from word to
word: 52 of those 2,384 clips differed from text2wave's, mostly Finnish mv
words whose quiet last 0.1 s came out silent. Use it for training clips only,
never for the clips that measure models.

Splits are voice-disjoint: every voice group (voices.py: one engine + voice, or
the voices of one recorded speaker) belongs to one split, and a clip draws its
split first (10 % validation, 10 % testing) and then a voice of that split. A
clip is named "<spk8>_<index>_nohash_0.wav" (spk8: the first 8 hex digits of
sha1("engine:voice:variant"); index: the clip's index within its label); the
list files hold the splits, and tools/mega_kws_tools/data/check_splits.py verifies them.

--near-miss N adds N more _unknown_ clips, each a near miss of a keyword
(CONFUSABLE: "yet", "nope", "goal", "good", "call", ...) said by a Latin-script
voice of the clip's split, named "<spk8>_n<index>_nohash_0.wav" and drawn from
generators of their own (label code EXTRA[NEAR]), so they leave every other clip
as it was: a folder of them alone (--per-word 0 --unknown 0 --silence 0) can be
merged into an existing dataset with tools/mega_kws_tools/data/merge_sets.py.

--only-split SPLIT makes only the clips that fall in SPLIT (scanning clip indices
from --first-index up; the clip at an index is the one a full run makes there):
for example more clips of the validation voices, past the indices of an
existing run with the same --seed, to merge into it.

--accent N adds N more keyword clips in the same way (label code EXTRA[ACCENT],
"<spk8>_a<index>_nohash_0.wav"): a keyword drawn at random, said by an English
espeak-ng voice of the clip's split through one of its accented pronunciations
(voices.ACCENT_PHONEMES, given as phonemes, [[...]]).

Resuming: clips are made in shards of SHARD whose results are kept in
OUT/parts/; the same command run again after an interruption continues after
the last finished shard.

manifest.csv columns: path, label, split, engine (espeak-ng | flite | noise),
voice, variant, rate (espeak-ng: words per minute; flite: duration_stretch),
pitch (espeak-ng: -p 0..99; flite: int_f0_target_mean in Hz), snr_db (empty =
no added noise), reverb ("rt60=0.32,wet=0.55" or empty), band ("tel",
"lp4200" or empty), level_dbfs (speech clips: peak of the speech part; silence
clips: RMS of the clip), offset_s (where the trimmed word starts), and extra
columns word, word_dur_s (the trimmed word spans [offset_s, offset_s +
word_dur_s]), tempo (sox tempo factor, 1 = none), noise (noise type), text
(what the voice was given to read: the word or its respelling), warp (the
resampling warp factor, 1 = none).

Needs: /usr/bin/python3 with numpy, and the espeak-ng, flite, festival and sox
commands with the festvox voices above (scripts/setup.sh installs them).
"""

import argparse
import csv
import hashlib
import json
import multiprocessing as mp
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from mega_kws_tools.audio import read_wav, write_wav  # noqa: F401 (write_wav: make_sc10.write_wav for its users)
from mega_kws_tools.data import festival_pipe
from mega_kws_tools.data import voices as vc
from mega_kws_tools.data.layout import KEYWORDS, SILENCE, UNKNOWN

SR = 16000
CLIP = SR  # samples per clip (1.000 s)

LABELS = KEYWORDS + [UNKNOWN, SILENCE]

# The other Speech Commands v0.02 words.
SC_OTHER = ("bed bird cat dog eight five four happy house marvin nine one seven sheila six three tree two wow zero "
            "backward forward follow learn visual").split()
# Near misses of the keywords (a different consonant or vowel, or the keyword plus a
# coda). Exact homophones of a keyword ("know" = "no", "write" = "right" in espeak-ng)
# and words that start with a whole keyword ("often", "upper", "yesterday") are left
# out on purpose: they would be label noise.
NEAR_MISS = ("yeah yep yet guess chess "          # yes
             "now nose note nope snow oh "         # no
             "cup pup app hop "                    # up
             "town brown dawn done round "         # down
             "leaf lift loft let laugh "           # left
             "light bright ride white night rate "  # right
             "onto own an in gone don "            # on
             "of cough awful "                     # off
             "stock top shop step spot stuff "     # stop
             "goal goat gold show grow").split()   # go
COMMON = ("okay hey the and hello music weather please play next call time what turn volume open close start "
          "pause back home alarm timer good morning water computer maybe nothing sorry hi").split()
UNKNOWN_WORDS = SC_OTHER + NEAR_MISS + COMMON
assert not set(UNKNOWN_WORDS) & set(KEYWORDS)
# What --near-miss clips say: the near misses above and more of the same kind, among
# them the words validation found heard as keywords ("good", "call" -> go).
CONFUSABLE = NEAR_MISS + ("yell less mess "       # yes
                          "nor knob nod "          # no
                          "pub hub "               # up
                          "doubt bound "           # down
                          "lend theft "            # left
                          "rice ripe "             # right
                          "pawn "                  # on
                          "moth "                  # off
                          "stab stomp "            # stop
                          "good call cold code coat low").split()  # go
assert not set(CONFUSABLE) & set(KEYWORDS) and len(set(CONFUSABLE)) == len(CONFUSABLE)
NEAR = "_near_"              # task label of a --near-miss clip (an _unknown_ clip)
ACCENT = "_accent_"          # task label of an --accent clip (a keyword clip)
# The extra task labels: their SeedSequence label code and the prefix of a clip's
# index in its name (clip_name), e.g. <spk8>_n<index>_nohash_0.wav.
EXTRA = {NEAR: (1001, "n"), ACCENT: (1002, "a")}

P_NO_VARIANT = 0.05          # espeak-ng clips rendered with the bare voice
RATE_RANGE = (110, 220)      # espeak-ng -s
PITCH_RANGE = (20, 80)       # espeak-ng -p
STRETCH_RANGE = (0.8, 1.3)   # flite duration_stretch
F0_RANGE = (90, 160)         # flite int_f0_target_mean
P_WARP, WARP_RANGE = 0.5, (0.88, 1.15)  # resampling warp: pitch, formants and tempo together

MAX_WORD_S = 0.95            # longer words are sped up (sox tempo) ...
MAX_TEMPO = 1.6              # ... by at most this factor, else re-drawn
MIN_WORD_S = 0.08            # shorter "words" count as a failed rendering
RENDER_TIMEOUT_S = 60.0      # an engine that takes longer has failed the rendering
PROBE_RETRIES = 2            # a voice whose probe fails is probed again, alone, this many times
PROBE_RETRY_TIMEOUT_S = 600  # with this timeout for the engine
TRIM_DB = -40.0              # trim threshold relative to the loudest 5 ms frame
TRIM_MARGIN_S = 0.010

P_REVERB, P_BAND, P_NOISE = 0.3, 0.3, 0.7
SNRS_DB = [0, 5, 10, 20, 30]
SPEECH_NOISES = ["white", "pink", "brown", "babble", "hum"]
LEVEL_RANGE_DBFS = (-20.0, -3.0)

BABBLE_BANK_SIZE = 300
SHARD = 500                  # clips per resumable unit of work
BABBLE_CODE = 1000           # SeedSequence label code of the babble bank

VAL_PCT, TEST_PCT = 10.0, 10.0

MANIFEST_FIELDS = ["path", "label", "split", "engine", "voice", "variant", "rate", "pitch", "snr_db", "reverb",
                   "band", "level_dbfs", "offset_s", "word", "word_dur_s", "tempo", "noise", "text", "warp"]

# Filled in the parent before the worker processes fork.
G = {"variants": [], "voices": {}, "bank": [], "tmp_root": None, "out": None, "festival": "text2wave"}
FESTIVAL = festival_pipe.Renderer()


# ----------------------------------------------------------------------------- splits

def clip_name(speaker_id: str, index: int, prefix: str = "") -> str:
    return f"{hashlib.sha1(speaker_id.encode('utf-8')).hexdigest()[:8]}_{prefix}{index:05d}_nohash_0.wav"


def _named_with(path: str, prefix: str) -> bool:
    """Whether a clip's name is clip_name's with this index prefix: <spk8>_<prefix><index>_nohash_0.wav
    (a real Speech Commands name, <speaker>_nohash_<n>.wav, is not)."""
    return re.fullmatch(rf"[0-9a-f]{{8}}_{prefix}\d+_nohash_0\.wav", os.path.basename(path)) is not None


def is_near_miss(path: str) -> bool:
    """Whether a clip is a --near-miss clip, by its name."""
    return _named_with(path, EXTRA[NEAR][1])


def is_accent(path: str) -> bool:
    """Whether a clip is an --accent clip, by its name."""
    return _named_with(path, EXTRA[ACCENT][1])


def clip_rng(seed: int, code: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, code, index]))


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
    try:
        return read_wav(path).astype(np.float32) / 32768.0
    except ValueError:
        pass
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


def babble(rng: np.random.Generator, n: int) -> np.ndarray:
    """Sum of 4..8 overlapping unrelated words from the babble bank, unit RMS."""
    bank = G["bank"]
    if not bank:
        return colored_noise(rng, n, "pink")
    y = np.zeros(n, np.float32)
    for _ in range(int(rng.integers(4, 9))):
        w = bank[int(rng.integers(len(bank)))]
        pos = int(rng.integers(-len(w) // 2, n))
        a, b = max(0, pos), min(n, pos + len(w))
        if b > a:
            y[a:b] += w[a - pos: b - pos] * np.float32(10 ** (rng.uniform(-8, 0) / 20))
    if rms(y) < 1e-6:
        return colored_noise(rng, n, "pink")
    return y / rms(y)


def make_noise(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    if kind == "hum":
        return hum(rng, n)
    if kind == "babble":
        return babble(rng, n)
    return colored_noise(rng, n, kind)


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


# ----------------------------------------------------------------------------- TTS

def tmp_dir() -> str:
    d = os.path.join(G["tmp_root"], str(os.getpid()))
    os.makedirs(d, exist_ok=True)
    return d


def synthesize(spk: dict, text: str, timeout: float = RENDER_TIMEOUT_S) -> np.ndarray:
    """Render `text` with the given engine settings; float32 at 16 kHz, untrimmed (empty on failure,
    or when the engine takes longer than `timeout` seconds)."""
    vc.check_allowed(spk["engine"], spk["voice"], spk["variant"])
    out = os.path.join(tmp_dir(), "tts.wav")
    if os.path.exists(out):
        os.remove(out)
    if spk["engine"] == "espeak-ng":
        v = spk["voice"] + (f"+{spk['variant']}" if spk["variant"] else "")
        cmd = ["espeak-ng", "-v", v, "-s", str(spk["rate"]), "-p", str(spk["pitch"]), "-w", out, text]
    elif spk["engine"] == "flite":
        cmd = ["flite", "-voice", spk["voice"], "--setf", f"duration_stretch={spk['rate']}",
               "--setf", f"int_f0_target_mean={spk['pitch']}", "-t", text, "-o", out]
    else:  # festival: the text from a file (UTF-8), duration stretch as a parameter
        txt = os.path.join(tmp_dir(), "tts.txt")
        with open(txt, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        render = FESTIVAL.render if G["festival"] == "pipe" else festival_pipe.text2wave
        ok = render(spk["voice"], spk["rate"], txt, out, timeout)
        return load_16k(out) if ok and os.path.exists(out) and os.path.getsize(out) > 44 else np.zeros(0, np.float32)
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return np.zeros(0, np.float32)
    if r.returncode != 0 or not os.path.exists(out) or os.path.getsize(out) <= 44:
        return np.zeros(0, np.float32)
    return load_16k(out)


def draw_voice(rng: np.random.Generator, split: str, latin_only: bool = False,
               english_espeak: bool = False) -> "vc.Voice":
    """A voice of `split`: a family by FAMILY_WEIGHTS (among those the split has), then a voice of it;
    with latin_only, among the voices that read Latin script; with english_espeak, among
    espeak-ng's English voices."""
    pool = [v for v in G["voices"][split] if (v.script in vc.LATIN or not latin_only)
            and (not english_espeak or (v.engine == "espeak-ng" and v.script == "english"))]
    fams = sorted({v.family for v in pool})
    w = np.array([vc.FAMILY_WEIGHTS[f] for f in fams])
    fam = fams[int(rng.choice(len(fams), p=w / w.sum()))]
    cands = [v for v in pool if v.family == fam]
    return cands[int(rng.integers(len(cands)))]


def draw_speaker(rng: np.random.Generator, split: str, latin_only: bool = False,
                 english_espeak: bool = False) -> dict:
    v = draw_voice(rng, split, latin_only, english_espeak)
    spk = dict(engine=v.engine, voice=v.name, variant="", obj=v)
    if v.engine == "flite":
        spk.update(rate=round(float(rng.uniform(*STRETCH_RANGE)), 2), pitch=int(rng.integers(F0_RANGE[0], F0_RANGE[1] + 1)))
    elif v.engine == "festival":
        spk.update(rate=round(float(rng.uniform(*STRETCH_RANGE)), 2), pitch="")
    else:
        variants = G["variants"]
        spk.update(variant="" if (rng.random() < P_NO_VARIANT or not variants) else str(variants[int(rng.integers(len(variants)))]),
                   rate=int(rng.integers(RATE_RANGE[0], RATE_RANGE[1] + 1)),
                   pitch=int(rng.integers(PITCH_RANGE[0], PITCH_RANGE[1] + 1)))
    return spk


def speaker_id(spk: dict) -> str:
    return f"{spk['engine']}:{spk['voice']}:{spk['variant']}"


def warp(x: np.ndarray, factor: float) -> np.ndarray:
    """Play `x` `factor` times faster by linear interpolation: pitch, formants (the
    vocal tract length) and tempo all scale by `factor`."""
    n = len(x)
    m = max(2, int(round(n / factor)))
    return np.interp(np.arange(m) * (n - 1) / (m - 1), np.arange(n), x).astype(np.float32)


def draw_other_word(rng: np.random.Generator, v: "vc.Voice", label: str) -> str:
    """The word an UNKNOWN clip (or a NEAR one: a CONFUSABLE word) of voice `v` says: one it
    can read, re-drawn while the voice would read it exactly as a keyword's respelling
    ("of" where off is respelled "of"), so that no _unknown_ clip is a keyword."""
    if label == NEAR:
        words = CONFUSABLE
    else:
        words = vc.unknown_words_for(v, UNKNOWN_WORDS)
        if v.script in vc.LATIN and rng.random() < 0.5:
            words = SC_OTHER
    word = str(words[int(rng.integers(len(words)))])
    while v.reads_as_keyword(word):
        word = str(words[int(rng.integers(len(words)))])
    return word


def render_word(rng: np.random.Generator, label: str, split: str, fails: list, max_s: float = MAX_WORD_S):
    """Draw a speaker of `split` and a word for `label` (the keyword, an unknown word the
    voice can read, for NEAR a CONFUSABLE word said by a Latin-script voice, for ACCENT a
    keyword said by an English espeak-ng voice in an accent of vc.ACCENT_PHONEMES), render,
    warp and trim it; returns (spk, word, text, audio, tempo, warp) or None after 6 tries."""
    for _ in range(6):
        spk = draw_speaker(rng, split, latin_only=label == NEAR, english_espeak=label == ACCENT)
        v = spk["obj"]
        if label == ACCENT:
            word = KEYWORDS[int(rng.integers(len(KEYWORDS)))]
            alts = vc.ACCENT_PHONEMES[word]
            text = f"[[{alts[int(rng.integers(len(alts)))]}]]"
        else:
            word = draw_other_word(rng, v, label) if label in (UNKNOWN, NEAR) else label
            text = v.text_for(word)
        x = trim(synthesize(spk, text))
        wf = float(rng.uniform(*WARP_RANGE)) if rng.random() < P_WARP else 1.0
        if wf != 1.0 and len(x):
            x = trim(warp(x, wf))
        if len(x) < MIN_WORD_S * SR:
            fails.append((speaker_id(spk), "empty"))
            continue
        tempo = 1.0
        if len(x) > max_s * SR:
            tempo = len(x) / (rng.uniform(0.85, 0.93) * SR)
            if tempo > MAX_TEMPO:
                fails.append((speaker_id(spk), "too long"))
                continue
            x = trim(sox_tempo(x, tempo))
            if not (MIN_WORD_S * SR <= len(x) <= max_s * SR):
                fails.append((speaker_id(spk), "tempo failed"))
                continue
        return spk, word, text, x, tempo, wf
    return None


def draw_split(rng: np.random.Generator) -> str:
    u = rng.random() * 100.0
    if G.get("training_only"):  # --pool more: every voice of it trains (the draw is kept all the same)
        return "training"
    return "validation" if u < VAL_PCT else "testing" if u < VAL_PCT + TEST_PCT else "training"


def label_code(label: str) -> int:
    """The SeedSequence code of `label`'s clips (a keyword, _unknown_, _silence_, NEAR or ACCENT)."""
    return EXTRA[label][0] if label in EXTRA else LABELS.index(label)


def split_of_clip(seed: int, label: str, index: int) -> str:
    """The split clip `index` of `label` falls in: a clip draws its split first from its own
    generator, so this costs one draw."""
    return draw_split(clip_rng(seed, label_code(label), index))


def indices_of_split(seed: int, label: str, split: str, first: int, n: int) -> list:
    """The first `n` clip indices >= `first` of `label` whose clip falls in `split`."""
    out, i = [], first
    while len(out) < n:
        if split_of_clip(seed, label, i) == split:
            out.append(i)
        i += 1
    return out


# ----------------------------------------------------------------------------- clip makers

def make_speech_clip(seed: int, label: str, index: int) -> dict:
    """Clip `index` of `label` (a keyword, UNKNOWN, NEAR: an UNKNOWN clip of a near-miss word,
    or ACCENT: a keyword clip in an accent)."""
    prefix = EXTRA[label][1] if label in EXTRA else ""
    rng = clip_rng(seed, label_code(label), index)
    split = draw_split(rng)
    fails = []
    got = render_word(rng, label, split, fails)
    if got is None:
        return dict(row=None, fails=fails, error=f"{label}/{index}: could not render it with a {split} voice")
    spk, word, text, w, tempo, wf = got

    guard = min(int(0.02 * SR), (CLIP - len(w)) // 2)  # keep >= 20 ms (when possible) from the clip edges
    offset = int(rng.integers(guard, CLIP - len(w) - guard + 1))
    x = np.zeros(CLIP, np.float32)
    x[offset: offset + len(w)] = w
    rev = ""
    if rng.random() < P_REVERB:
        x, rev = reverb(rng, x)
    band = draw_band(rng) if rng.random() < P_BAND else ""
    x = band_limit(x, band)
    speech_rms = rms(x[offset: offset + len(w)])
    noise_kind, snr = "", None
    mix = x
    if rng.random() < P_NOISE:
        noise_kind = str(rng.choice(SPEECH_NOISES))
        snr = int(rng.choice(SNRS_DB))
        nz = band_limit(make_noise(rng, CLIP, noise_kind), band)
        mix = x + nz * np.float32(speech_rms / max(rms(nz), 1e-12) * 10 ** (-snr / 20))
    g = 10 ** (rng.uniform(*LEVEL_RANGE_DBFS) / 20) / max(peak(x), 1e-9)
    mix = mix * np.float32(g)
    if peak(mix) > 0.98:  # keep inside [-1, 1) without hard clipping
        g *= 0.98 / peak(mix)
        mix *= np.float32(0.98 / peak(mix))
    level = db(peak(x) * g)

    name = clip_name(speaker_id(spk), index, prefix)
    label = {NEAR: UNKNOWN, ACCENT: word}.get(label, label)
    rel = f"{label}/{name}"
    write_wav(os.path.join(G["out"], rel), to_pcm16(rng, mix))
    row = dict(path=rel, label=label, split=split, engine=spk["engine"], voice=spk["voice"],
               variant=spk["variant"], rate=spk["rate"], pitch=spk["pitch"], snr_db="" if snr is None else snr,
               reverb=rev, band=band, level_dbfs=f"{level:.1f}", offset_s=f"{offset / SR:.4f}", word=word,
               word_dur_s=f"{len(w) / SR:.4f}", tempo=f"{tempo:.3f}", noise=noise_kind, text=text,
               warp=f"{wf:.3f}")
    return dict(row=row, fails=fails, error=None)


SILENCE_KINDS = ["white", "pink", "brown", "hum", "noise+hum", "digital"]
SILENCE_P = [0.15, 0.17, 0.13, 0.15, 0.2, 0.2]


def make_silence_clip(seed: int, index: int) -> dict:
    rng = clip_rng(seed, LABELS.index(SILENCE), index)
    split = draw_split(rng)
    kind = str(rng.choice(SILENCE_KINDS, p=SILENCE_P))
    if kind == "digital":
        x = colored_noise(rng, CLIP, "white") * np.float32(10 ** (rng.uniform(-100, -80) / 20))
    else:
        if kind == "noise+hum":
            nz = colored_noise(rng, CLIP, str(rng.choice(["white", "pink", "brown"])))
            x = nz + hum(rng, CLIP) * np.float32(10 ** (rng.uniform(-12, 6) / 20))
            x /= rms(x)
        else:
            x = make_noise(rng, CLIP, kind)
        x = x * np.float32(10 ** (rng.uniform(-60, -20) / 20))
    band = draw_band(rng) if (kind != "digital" and rng.random() < P_BAND) else ""
    x = band_limit(x, band)
    variant = ""
    if rng.random() < 0.15:  # clicks / short bursts
        variant = "clicks"
        for _ in range(int(rng.integers(1, 4))):
            pos = int(rng.integers(0, CLIP - 600))
            a = 10 ** (rng.uniform(-45, -12) / 20)
            if rng.random() < 0.5:
                m = int(rng.integers(1, 4))
                x[pos: pos + m] += np.float32(a * rng.choice([-1.0, 1.0]))
            else:
                m = int(rng.uniform(0.002, 0.03) * SR)
                burst = rng.standard_normal(m) * np.exp(-np.arange(m) / (m / 4))
                x[pos: pos + m] += (a * burst / max(peak(burst), 1e-12)).astype(np.float32)
    if peak(x) > 0.98:
        x *= np.float32(0.98 / peak(x))
    pcm = to_pcm16(rng, x)
    spk = f"noise:{kind}:{variant}"
    name = clip_name(spk, index)
    rel = f"{SILENCE}/{name}"
    write_wav(os.path.join(G["out"], rel), pcm)
    row = dict(path=rel, label=SILENCE, split=split, engine="noise", voice=kind, variant=variant,
               rate="", pitch="", snr_db="", reverb="", band=band,
               level_dbfs=f"{db(rms(pcm.astype(np.float32) / 32768.0)):.1f}", offset_s="", word="",
               word_dur_s="", tempo="", noise=kind, text="", warp="")
    return dict(row=row, fails=[], error=None)


def bank_word(seed: int, index: int):
    """One babble-bank word: an unrelated word, any engine, peak-normalized."""
    rng = clip_rng(seed, BABBLE_CODE, index)
    got = render_word(rng, UNKNOWN, "training", [], max_s=2.0)  # training voices only
    if got is None:
        return None
    return (got[3] / max(peak(got[3]), 1e-9)).astype(np.float32)


def do_task(task):
    kind, seed, label, index = task
    if kind == "bank":
        return bank_word(seed, index)
    if kind == "probe":  # index: the render's timeout in seconds
        spk = dict(engine=label[0], voice=label[1], variant=label[2],
                   rate=175 if label[0] == "espeak-ng" else 1.0, pitch=50 if label[0] == "espeak-ng" else 100)
        x = synthesize(spk, label[3], index)
        return (label[:3], len(trim(x)) / SR, hashlib.sha1(x.tobytes()).hexdigest())
    try:
        if label == SILENCE:
            return make_silence_clip(seed, index)
        return make_speech_clip(seed, label, index)
    except Exception as e:  # keep going; reported at the end
        return dict(row=None, fails=[], error=f"{label}/{index}: {type(e).__name__}: {e}")


# ----------------------------------------------------------------------------- main

def espeak_variants():
    """Variant names = file names in espeak-ng-data/voices/!v (some contain spaces, e.g. 'Mr serious')."""
    out = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"Data at:\s*(\S+)", out)
    d = os.path.join(m.group(1), "voices", "!v") if m else ""
    if d and os.path.isdir(d):
        return sorted(f for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))
    listing = subprocess.run(["espeak-ng", "--voices=variant"], capture_output=True, text=True).stdout.splitlines()
    return sorted({ln.split()[4].replace("!v/", "") for ln in listing[1:] if len(ln.split()) >= 5})


def tool_versions():
    ev = subprocess.run(["espeak-ng", "--version"], capture_output=True, text=True).stdout.strip().split("  Data")[0]
    fv = [ln.strip().replace("version: ", "") for ln in
          subprocess.run(["flite", "--version"], capture_output=True, text=True).stdout.splitlines() if "version" in ln]
    sv = subprocess.run(["sox", "--version"], capture_output=True, text=True).stdout.strip()
    return ev, (fv[0] if fv else "flite"), sv


def run_tasks(pool, tasks, chunksize=8):
    if pool is None:
        return map(do_task, tasks)
    return pool.imap(do_task, tasks, chunksize=chunksize)


def run_probes(pool, probes):
    """The probe tasks' results, in order. A voice that failed is probed again, alone and with a
    long timeout, PROBE_RETRIES times: on a loaded machine (or at nice 19 beside other work)
    festival can take over a minute to load a voice, and dropping an installed voice would
    silently give every split other voices and other clips."""
    res = list(run_tasks(pool, probes, 4))
    for i, r in enumerate(res):
        for _ in range(PROBE_RETRIES):
            if r[1] >= MIN_WORD_S:
                break
            r = do_task(("probe", 0, probes[i][2], PROBE_RETRY_TIMEOUT_S))
        res[i] = r
    return res


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output folder (created; existing clips are overwritten)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--per-word", type=int, default=1000, help="clips per keyword")
    ap.add_argument("--unknown", type=int, default=3000, help="_unknown_ clips")
    ap.add_argument("--silence", type=int, default=1200, help="_silence_ clips")
    ap.add_argument("--near-miss", type=int, default=0, metavar="N",
                    help="N more _unknown_ clips, each a near miss of a keyword (CONFUSABLE) said by a "
                         "Latin-script voice; drawn from their own seeds, so adding them changes no other clip")
    ap.add_argument("--accent", type=int, default=0, metavar="N",
                    help="N more keyword clips, each said by an English espeak-ng voice in an accent "
                         "(voices.ACCENT_PHONEMES); drawn from their own seeds like --near-miss")
    ap.add_argument("--pool", choices=sorted(vc.POOLS), default="base",
                    help="voices: base (the first pool: training, validation and testing voices) or more "
                         "(voices.MORE_VOICES, added later: training voices only, so every clip is training; "
                         "merge the folder into a base one with merge_sets.py)")
    ap.add_argument("--only-split", choices=vc.SPLITS, default=None,
                    help="make only clips whose voice falls in this split: each count is then a number of "
                         "clips of the split, found by scanning clip indices from --first-index up")
    ap.add_argument("--first-index", type=int, default=0, metavar="K",
                    help="with --only-split: scan from clip index K, past the clips an earlier run made "
                         "with the same --seed, so that the new clips are new (and merge without clashes)")
    ap.add_argument("--keep-splits", default="", metavar="SPLIT,...",
                    help="make only the clips of these splits (training, validation, testing; comma-separated) "
                         "among those the same command without it makes: the same clips, byte for byte, so "
                         "folders made with complementary --keep-splits merge (merge_sets.py) into the full "
                         "set. For rebuilding the held-out splits alone (a fifth of the time)")
    ap.add_argument("--voices", default="", metavar="ID,...",
                    help="with --only-split: draw only these voices of that split (engine:name, as "
                         "manifest.csv and the README name them, comma-separated), for more clips of "
                         "voices the pool has few of (festival's female and child voices)")
    ap.add_argument("--babble-words", type=int, default=BABBLE_BANK_SIZE, metavar="N",
                    help="words in the babble bank, rendered before any clip (about 0.8 s each at one job). "
                         "Fewer makes small runs such as the tests fast, but clips with babble then differ "
                         "from a full run's; 0: pink noise where babble would be (default %(default)s)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes")
    ap.add_argument("--festival", choices=["text2wave", "pipe"], default="text2wave",
                    help="how festival voices render: text2wave (default: a new festival process per word) or "
                         "pipe (one festival process per voice and worker, kept running: about 6 times faster, "
                         "but a few words come out with their quiet end cut; training clips only: "
                         "tools/mega_kws_tools/data/festival_pipe.py)")
    return ap.parse_args()


def check_args(args):
    """Exits naming the first option that is out of range or does not combine;
    returns (only_voices, keep)."""
    if args.babble_words < 0:
        sys.exit(f"make_sc10: --babble-words must be 0 or more, not {args.babble_words}")
    only_voices = [v for v in args.voices.split(",") if v]
    if only_voices:
        if not args.only_split:
            sys.exit("make_sc10: --voices goes with --only-split")
        ids = {v.id: v for v in vc.POOLS[args.pool]}
        for vid in only_voices:
            if vid not in ids:
                sys.exit(f"make_sc10: --voices: '{vid}' is not a voice of the {args.pool} pool "
                         f"(for example {next(iter(ids))})")
            if vc.split_of(ids[vid]) != args.only_split:
                sys.exit(f"make_sc10: --voices: {vid} is a {vc.split_of(ids[vid])} voice, "
                         f"not a {args.only_split} one")
    keep = [sp for sp in args.keep_splits.split(",") if sp]
    bad = [sp for sp in keep if sp not in vc.SPLITS]
    if bad:
        sys.exit(f"make_sc10: --keep-splits: {bad[0]!r} is not a split ({', '.join(vc.SPLITS)})")
    if keep and args.only_split:
        sys.exit("make_sc10: --keep-splits and --only-split do not go together")
    if args.first_index and not args.only_split:
        sys.exit("make_sc10: --first-index goes with --only-split")
    if args.only_split and args.pool == "more":
        sys.exit("make_sc10: --only-split goes with --pool base (every --pool more clip is training)")
    if args.first_index < 0:
        sys.exit("make_sc10: --first-index must be >= 0")
    if args.pool == "more" and args.silence:
        sys.exit("make_sc10: --pool more makes speech clips only; give --silence 0 (the base pool's "
                 "_silence_ clips have no voice)")
    for tool in ("espeak-ng", "flite", "sox", "text2wave"):
        if shutil.which(tool) is None:
            sys.exit(f"make_sc10: '{tool}' not found (scripts/setup.sh installs the voices: "
                     "apt-get install espeak-ng flite sox festival festvox-...)")
    return only_voices, keep


def probe_voices(ctx, args):
    """Renders a word in every voice and variant, keeps in G those that render; returns the skipped ones."""
    # 1) probe voices and variants; drop the ones that do not render
    variants = espeak_variants()
    pool_voices = vc.POOLS[args.pool]
    G["training_only"] = args.pool == "more"
    probes = [("probe", 0, (v.engine, v.name, "", v.text_for("stop")), RENDER_TIMEOUT_S) for v in pool_voices]
    probes += [("probe", 0, ("espeak-ng", "en-us", v, "seven"), RENDER_TIMEOUT_S) for v in variants
               if not vc.is_reserved(v)]
    pool = ctx.Pool(args.jobs) if args.jobs > 1 else None
    res = run_probes(pool, probes)
    if pool is not None:
        pool.close()
        pool.join()
    bad = [r[0] for r in res if r[1] < MIN_WORD_S]
    for b in bad:
        print(f"skipped (does not render): {b[0]} {b[1]}{'+' + b[2] if b[2] else ''}", flush=True)
    usable = [v for v in pool_voices if (v.engine, v.name, "") not in bad]
    G["voices"] = {sp: vc.voices_of(sp, usable) for sp in vc.SPLITS}
    G["variants"] = [v for v in variants if not vc.is_reserved(v) and ("espeak-ng", "en-us", v) not in bad]
    for sp in vc.SPLITS:
        if not G["voices"][sp] and not (G["training_only"] and sp != "training"):
            sys.exit(f"make_sc10: no {sp} voice renders")
        print(f"{sp} voices ({len(G['voices'][sp])}): {' '.join(v.id for v in G['voices'][sp])}", flush=True)
    print(f"espeak-ng variants: {len(G['variants'])}", flush=True)
    return bad


def make_bank(ctx, args, only_voices, t0):
    """The babble bank (the parent keeps it; the clip workers inherit it by fork)."""
    # 2) babble bank (parent keeps it; the clip workers inherit it by fork)
    pool = ctx.Pool(args.jobs) if args.jobs > 1 else None
    bank = list(run_tasks(pool, [("bank", args.seed, None, i) for i in range(args.babble_words)], 4))
    if pool is not None:
        pool.close()
        pool.join()
    G["bank"] = [b for b in bank if b is not None]
    print(f"babble bank: {len(G['bank'])} words ({time.time() - t0:.0f} s)", flush=True)
    if only_voices:  # the babble above is drawn from every training voice, the clips from these
        G["voices"][args.only_split] = [v for v in G["voices"][args.only_split] if v.id in only_voices]
        if len(G["voices"][args.only_split]) < len(only_voices):
            sys.exit("make_sc10: --voices: a voice given does not render")
        print(f"clips of: {' '.join(v.id for v in G['voices'][args.only_split])}", flush=True)


def clip_tasks(args, keep, only_voices):
    """The clips to make, as tasks, and the key that tells whether a shard kept
    in OUT/parts belongs to this run."""
    # 3) the clips, in shards whose results are kept in OUT/parts: an interrupted
    # run started again with the same arguments continues after the last shard.
    counts = {k: args.per_word for k in KEYWORDS}
    counts[UNKNOWN], counts[SILENCE] = args.unknown, args.silence
    if args.near_miss:
        counts[NEAR] = args.near_miss
    if args.accent:
        counts[ACCENT] = args.accent
    order = LABELS + [NEAR, ACCENT]
    if args.only_split:
        tasks = [("clip", args.seed, lab, i) for lab in order
                 for i in indices_of_split(args.seed, lab, args.only_split, args.first_index, counts.get(lab, 0))]
        counts = {lab: n for lab, n in counts.items() if n}
    else:
        tasks = [("clip", args.seed, lab, i) for lab in order for i in range(counts.get(lab, 0))
                 if not keep or split_of_clip(args.seed, lab, i) in keep]
    # interleave labels so that progress and load are even
    tasks.sort(key=lambda t: (t[3] / max(counts[t[2]], 1), order.index(t[2])))
    run_key = f"seed={args.seed} counts={sorted(counts.items())}" + ("" if args.pool == "base" else f" pool={args.pool}")
    if args.only_split:
        run_key += f" only={args.only_split} first={args.first_index}"
    if only_voices:
        run_key += f" voices={','.join(only_voices)}"
    if keep:
        run_key += f" keep={','.join(sorted(keep))}"
    return tasks, run_key


def make_clips(ctx, args, tasks, run_key, out):
    """The clips, in shards whose results are kept in OUT/parts: an interrupted
    run started again with the same arguments continues after the last shard."""
    parts = os.path.join(out, "parts")
    os.makedirs(parts, exist_ok=True)
    rows, errors, fails = [], [], {}
    t1, done = time.time(), 0
    pool = ctx.Pool(args.jobs) if args.jobs > 1 else None
    for first in range(0, len(tasks), SHARD):
        path = os.path.join(parts, f"{first // SHARD:05d}.json")
        part = None
        if os.path.exists(path):
            with open(path) as f:
                part = json.load(f)
            if part.get("key") != run_key:
                part = None
        if part is None:
            part = {"key": run_key, "rows": [], "errors": [], "fails": []}
            for r in run_tasks(pool, tasks[first:first + SHARD], 8):
                if r["row"] is not None:
                    part["rows"].append(r["row"])
                if r["error"]:
                    part["errors"].append(r["error"])
                part["fails"] += r["fails"]
            with open(path + ".tmp", "w") as f:
                json.dump(part, f)
            os.replace(path + ".tmp", path)
            done += min(SHARD, len(tasks) - first)
            el = time.time() - t1
            left = len(tasks) - first - SHARD
            print(f"  {min(first + SHARD, len(tasks))}/{len(tasks)} clips, {el:.0f} s, "
                  f"eta {el / done * max(0, left):.0f} s", flush=True)
        rows += part["rows"]
        errors += part["errors"]
        for spk, why in part["fails"]:
            fails.setdefault(spk, {}).setdefault(why, 0)
            fails[spk][why] += 1
    if pool is not None:
        pool.close()
        pool.join()
    return rows, errors, fails


def write_lists(out, rows):
    """The split lists and manifest.csv."""
    rows.sort(key=lambda r: (LABELS.index(r["label"]), r["path"]))
    for split, fname in (("validation", "validation_list.txt"), ("testing", "testing_list.txt")):
        with open(os.path.join(out, fname), "w") as f:
            f.writelines(r["path"] + "\n" for r in rows if r["split"] == split)
    with open(os.path.join(out, "manifest.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=MANIFEST_FIELDS)
        w.writeheader()
        w.writerows(rows)


def summarize(args, out, rows, errors, fails, bad, only_voices, t0):
    """README.txt, and the same table and problems on stdout; the exit status."""
    table = {lab: {"training": 0, "validation": 0, "testing": 0} for lab in LABELS}
    for r in rows:
        table[r["label"]][r["split"]] += 1
    lines = [f"{'label':<10} {'training':>8} {'validation':>10} {'testing':>7} {'total':>6}"]
    for lab in LABELS + ["total"]:
        c = table[lab] if lab != "total" else {s: sum(table[x][s] for x in LABELS) for s in table[LABELS[0]]}
        lines.append(f"{lab:<10} {c['training']:>8} {c['validation']:>10} {c['testing']:>7} {sum(c.values()):>6}")
    eng = {}
    for r in rows:
        eng[r["engine"]] = eng.get(r["engine"], 0) + 1
    ev, fv, sv = tool_versions()
    cmd = " ".join(shlex.quote(a) for a in ["python3", "-m", "mega_kws_tools.data.make_sc10"] + sys.argv[1:])
    skipped = [f"{b[0]} {b[1]}{'+' + b[2] if b[2] else ''}" for b in bad]
    noisy_fail = {s: v for s, v in fails.items()}
    readme = [
        "Synthetic Speech Commands-style keyword dataset (SC10 + _unknown_ + _silence_).",
        "",
        f"Generated by: {cmd}",
        f"Tools: {ev}; {fv}; {sv}; numpy {np.__version__}",
        "Layout: <label>/<name>.wav (1.000 s, 16 kHz, mono, 16-bit PCM), validation_list.txt, testing_list.txt",
        "(the rest is training), manifest.csv (how each clip was made). See the docstring of",
        "tools/mega_kws_tools/data/make_sc10.py for the generation recipe and the split rule.",
        "",
        *[f"{sp} voices{' (clips)' if only_voices and sp == args.only_split else ''}: "
          + " ".join(v.id for v in G["voices"][sp]) for sp in vc.SPLITS],
        f"Near-miss _unknown_ clips (--near-miss, names <spk8>_n<index>_nohash_0.wav): "
        f"{sum(1 for r in rows if is_near_miss(r['path']))}",
        f"Accented keyword clips (--accent, names <spk8>_a<index>_nohash_0.wav): "
        f"{sum(1 for r in rows if is_accent(r['path']))}",
        f"espeak-ng variants: {len(G['variants'])}. Clips per engine: " + ", ".join(f"{k} {v}" for k, v in sorted(eng.items())),
        "Skipped (did not render): " + (", ".join(skipped) if skipped else "none"),
        "",
        *lines,
        "",
        f"Clips that could not be made: {len(errors)}",
        f"Renderings re-drawn (empty / too long / tempo failed): {sum(sum(v.values()) for v in noisy_fail.values())}",
    ]
    with open(os.path.join(out, "README.txt"), "w") as f:
        f.write("\n".join(readme) + "\n")
    print("\n".join(lines))
    for e in errors[:20]:
        print("error:", e)
    worst = sorted(fails.items(), key=lambda kv: -sum(kv[1].values()))[:10]
    if worst:
        print("most re-drawn renderings:", "; ".join(f"{s} {d}" for s, d in worst))
    print(f"wrote {len(rows)} clips to {out} in {time.time() - t0:.0f} s")
    return 0 if not errors else 1


def main():
    args = parse_args()
    only_voices, keep = check_args(args)
    t0 = time.time()
    out = os.path.abspath(args.out)
    for lab in LABELS:
        os.makedirs(os.path.join(out, lab), exist_ok=True)
    G["out"] = out
    G["festival"] = args.festival
    G["tmp_root"] = tempfile.mkdtemp(prefix="make_sc10_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    ctx = mp.get_context("fork")
    try:
        bad = probe_voices(ctx, args)
        make_bank(ctx, args, only_voices, t0)
        tasks, run_key = clip_tasks(args, keep, only_voices)
        rows, errors, fails = make_clips(ctx, args, tasks, run_key, out)
    finally:
        FESTIVAL.close()
        shutil.rmtree(G["tmp_root"], ignore_errors=True)
    write_lists(out, rows)
    return summarize(args, out, rows, errors, fails, bad, only_voices, t0)


if __name__ == "__main__":
    sys.exit(main())
