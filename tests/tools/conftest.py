# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures of the training tools' tests: a small dataset in the Speech
Commands layout made of generated signals (no text-to-speech program), and the
smoke preset's model built in-process."""

import csv
import hashlib
import os
import wave

import numpy as np
import pytest

from mega_kws_tools import model as mt
from mega_kws_tools.data import layout
from mega_kws_tools.training import presets

SR = 16000
# _unknown_ words: some plain, some that SPLICE_AVOID keeps away from a keyword
UNKNOWN_WORDS = ["bed", "bird", "cat", "house", "yeah", "leaf", "cup", "shop", "own"]
# voice -> split; festival:kal_diphone and flite:kal are one voice group (one recorded speaker).
# flite:kal says no _unknown_ word, so its keywords are spliced to words of any voice.
VOICES = {"espeak-ng:en-us": "training", "espeak-ng:en-gb": "training", "flite:kal": "training",
          "festival:kal_diphone": "training", "espeak-ng:en-029": "validation",
          "espeak-ng:en-gb-scotland": "testing"}
NO_UNKNOWN = {"flite:kal"}
SILENCE_PER_SPLIT = 4


def write_wav(path, x):
    """float samples in [-1, 1] as a 16 kHz mono 16-bit WAV"""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pcm = np.clip(np.round(np.asarray(x, np.float64) * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.tobytes())


def word_clip(word, voice, n, rng):
    """One second: a harmonic burst whose pitch is the voice's and whose partials
    are the word's, at a random place, over faint noise."""
    key = int(hashlib.sha1(f"{word}".encode()).hexdigest()[:6], 16)
    f0 = 90 + int(hashlib.sha1(voice.encode()).hexdigest()[:4], 16) % 140
    partials = [1 + key % 5, 2 + key % 7, 4 + key % 11]
    start = int(rng.uniform(0.15, 0.35) * SR)
    length = int(rng.uniform(0.35, 0.55) * SR)
    t = np.arange(length) / SR
    burst = sum(np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6.28)) / k for k in partials)
    burst *= np.hanning(length) * 0.3 / np.abs(burst).max()
    x = rng.standard_normal(SR) * 1e-3
    x[start:start + length] += burst
    return x


def noise_clip(rng):
    """a _silence_ clip: white or brown noise"""
    x = rng.standard_normal(SR)
    if rng.random() < 0.5:
        x = np.cumsum(x)
        x -= np.linspace(x[0], x[-1], SR)
    return x * rng.uniform(0.01, 0.1) / np.abs(x).max()


def make_dataset(root, seed=3, per_word=2):
    """The layout make_sc10.py writes: <word>/<spk8>_<index>_nohash_0.wav, validation_list.txt,
    testing_list.txt and manifest.csv (path, label, split, engine, voice)."""
    rng = np.random.default_rng(seed)
    rows, index = [], 0
    for voice, split in VOICES.items():
        engine, name = voice.split(":")
        spk = hashlib.sha1(voice.encode()).hexdigest()[:8]
        words = [(w, per_word) for w in layout.KEYWORDS]
        if voice not in NO_UNKNOWN:
            words += [(w, 1) for w in UNKNOWN_WORDS]
        for word, count in words:
            for _ in range(count):
                rel = f"{word}/{spk}_{index:05d}_nohash_0.wav"
                index += 1
                write_wav(os.path.join(root, rel), word_clip(word, voice, index, rng))
                label = word if word in layout.KEYWORDS else layout.UNKNOWN
                rows.append(dict(path=rel, label=label, split=split, engine=engine, voice=name, variant="0"))
    for split in ("training", "validation", "testing"):
        for _ in range(SILENCE_PER_SPLIT):
            rel = f"{layout.SILENCE}/noise_{index:05d}.wav"
            index += 1
            write_wav(os.path.join(root, rel), noise_clip(rng))
            rows.append(dict(path=rel, label=layout.SILENCE, split=split, engine="noise", voice="white", variant=""))
    for split, name in (("validation", "validation_list.txt"), ("testing", "testing_list.txt")):
        with open(os.path.join(root, name), "w") as f:
            f.writelines(r["path"] + "\n" for r in rows if r["split"] == split)
    with open(os.path.join(root, "manifest.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["path", "label", "split", "engine", "voice", "variant"])
        w.writeheader()
        w.writerows(rows)
    return str(root)


@pytest.fixture(scope="session")
def dataset(tmp_path_factory):
    """the folder of a small generated dataset (read it, do not change it)"""
    return make_dataset(tmp_path_factory.mktemp("data"))


@pytest.fixture
def model_like_trained():
    """make(preset="smoke", **config changes): the preset's 12-class model in eval mode, with random
    weights where every parameter matters (BatchNorm statistics too), standing in for a trained
    checkpoint"""
    def make(preset="smoke", **changes):
        m = mt.MegaKWS(mt.MegaConfig(**dict(presets.PRESETS[preset], **changes), n_classes=12, bidirectional=False))
        mt.randomize_for_testing(m, 7)
        return m.eval()
    return make
