# SPDX-License-Identifier: Apache-2.0
"""A split of a Speech Commands-layout folder in memory (Dataset), and who says each clip."""

import csv
import os
import random

import numpy as np

from mega_kws_tools.audio import read_wav, SR
from mega_kws_tools.data.layout import clip_splits, folder_label, KEYWORDS, SILENCE, UNKNOWN


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
        self.paths += [""] * n  # a crop has no file of its own; paths stay one per clip
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
