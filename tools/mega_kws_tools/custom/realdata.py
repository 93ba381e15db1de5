# SPDX-License-Identifier: Apache-2.0
"""The project's real speech, when it has been built under work/data
(tools/scripts/reproduce_training.sh data): speechocean762's keyword-free read
sentences (training speakers in one recording, validation speakers in
another, each with a transcript per sentence) and the Speech Commands clips of
training-split speakers.

For a custom keyword, "keyword-free" means more: a sentence whose transcript
holds the keyword (or a word said exactly like it) is cut out, with a second
either side. The training speakers' recording is split by time (its speakers
come in order): the first 60% gives negatives and context, the rest tunes the
defaults; the validation speakers' recording is only measured, by the runtime,
at the end.
"""

import csv
import os
import re

import numpy as np

from mega_kws_tools.audio import read_wav

SR = 16000
TRAIN_SHARE = 0.6


def speech_paths(data_dir: str, split: str):
    """(wav, csv) of the keyword-free recording of `split` speakers, or None."""
    base = os.path.join(data_dir, "so762", f"keyword_free_{split}")
    return (base + ".wav", base + ".csv") if os.path.exists(base + ".wav") and os.path.exists(base + ".csv") else None


def sentences(csv_path: str):
    """[(onset_s, offset_s, text)] of the recording's read sentences, and its
    keyword-free stretches [(onset_s, offset_s)] as labelled."""
    spoken, free = [], []
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            a, b = float(row["onset_s"]), float(row["offset_s"])
            if row["kind"] == "keyword_free":
                free.append((a, b))
            text = row.get("source", "").split(": ", 1)
            if len(text) == 2:
                spoken.append((a, b, text[1]))
    return spoken, free


def _words(text: str):
    return re.sub(r"[^a-z' ]", " ", text.lower()).split()


def holds(text: str, phrases) -> bool:
    """True when the transcript says one of the phrases as whole words."""
    padded = " " + " ".join(_words(text)) + " "
    return any(" " + p + " " in padded for p in phrases)


def excluded(spoken, phrases, margin_s: float = 1.0):
    """[(a, b)] of the stretches (with a margin) whose sentence says a phrase."""
    return [(a - margin_s, b + margin_s) for a, b, text in spoken if holds(text, phrases)]


def keyword_free_stretches(free, cut):
    """The labelled keyword-free stretches less the cut ones."""
    out = []
    for a, b in free:
        pieces = [(a, b)]
        for ca, cb in cut:
            pieces = [p for x, y in pieces for p in ((x, min(y, ca)), (max(x, cb), y)) if p[1] - p[0] > 0]
        out += pieces
    return out


def hop_mask(end_s: np.ndarray, cut, window_s: float = 1.0) -> np.ndarray:
    """True for hops whose window (the second before its end) meets no cut stretch."""
    keep = np.ones(len(end_s), bool)
    for a, b in cut:
        keep &= ~((end_s > a) & (end_s - window_s < b))
    return keep


def load_speech(wav: str) -> np.ndarray:
    return read_wav(wav)  # int16: an hour is 115 MB, converted a second at a time


def real_words(data_dir: str, exclude, limit: int, rng: np.random.Generator):
    """Up to `limit` Speech Commands clips of training-split speakers whose word
    is not in `exclude` (the keywords and words said like them): [(word, path)]."""
    root = os.path.join(data_dir, "real_sc")
    if not os.path.isdir(root):
        return []
    val = set()
    lst = os.path.join(root, "validation_list.txt")
    if os.path.exists(lst):
        with open(lst) as f:
            val = {ln.strip() for ln in f if ln.strip()}
    out = []
    for word in sorted(os.listdir(root)):
        folder = os.path.join(root, word)
        if word.startswith("_") or word in exclude or not os.path.isdir(folder):
            continue
        out += [(word, os.path.join(folder, f)) for f in sorted(os.listdir(folder))
                if f.endswith(".wav") and f"{word}/{f}" not in val]
    if len(out) > limit:
        out = [out[i] for i in sorted(rng.choice(len(out), limit, replace=False))]
    return out
