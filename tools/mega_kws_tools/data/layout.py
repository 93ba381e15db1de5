# SPDX-License-Identifier: Apache-2.0
"""The Speech Commands folder layout, shared by the data tools, the trainer and
the evaluator (plain Python: no numpy or torch here).

A dataset is one folder per word (`yes/`, `bed/`, ...), plus `_silence_/` or
`_background_noise_/`, with validation_list.txt and testing_list.txt naming
the clips of those splits.
"""

import os

KEYWORDS = ["yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go"]
SILENCE = "_silence_"
UNKNOWN = "_unknown_"
NOISE = "_background_noise_"


def folder_label(folder, labels):
    """The label a model with these labels learns for the clips of one folder:
    the folder's own name when it is a label (a keyword, `_silence_`),
    `_unknown_` for any other word when the model has that class, and None for
    a folder it does not use (`_background_noise_`, other `_..._` folders, or
    other words for a keywords-only model)."""
    if folder in labels:
        return folder
    if folder.startswith("_") or UNKNOWN not in labels:
        return None
    return UNKNOWN


def split_lists(root):
    """The clips (word/name.wav) that a Speech Commands-layout folder puts in its
    validation and its testing split; every other clip is training."""
    def read_list(name):
        p = os.path.join(root, name)
        if not os.path.exists(p):
            return set()
        with open(p) as f:
            return set(f.read().split())
    return read_list("validation_list.txt"), read_list("testing_list.txt")


def listed_missing(root, clips=None):
    """{"folder/name.wav": split} for the clips that `root`'s validation or testing
    list names but that are not on disk (sorted); `clips` is clip_splits(root) if
    the caller has it."""
    val, test = split_lists(root)
    have = clip_splits(root) if clips is None else clips
    return {rel: "validation" if rel in val else "testing" for rel in sorted((val | test) - set(have))}


def clip_splits(root):
    """{"folder/name.wav": split} for every clip in a subfolder of `root` (sorted by
    folder, then name), the split read from the list files."""
    val, test = split_lists(root)
    out = {}
    for folder in sorted(os.listdir(root)):
        full = os.path.join(root, folder)
        if not os.path.isdir(full):
            continue
        for f in sorted(os.listdir(full)):
            if f.endswith(".wav"):
                rel = f"{folder}/{f}"
                out[rel] = "validation" if rel in val else "testing" if rel in test else "training"
    return out
