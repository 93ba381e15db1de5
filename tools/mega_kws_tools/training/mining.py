# SPDX-License-Identifier: Apache-2.0
"""Hard streaming windows (training.mine_hard's files) mixed into training batches
(--hard-examples)."""

import numpy as np
import torch

from mega_kws_tools.audio import SR


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

    def replace(self, x: torch.Tensor, y: torch.Tensor, rng: np.random.Generator, share: float) -> np.ndarray:
        """Replaces about `share` of the batch's rows with hard examples; returns the rows replaced."""
        rows, picks = swap_rows(x, self.audio, rng, share)
        for i, j in zip(rows, picks):
            y[i] = int(self.y[j])
        return rows


def swap_rows(x: torch.Tensor, audio: np.ndarray, rng: np.random.Generator, share: float):
    """Replaces about `share` of the rows of x with windows of audio ([N, 2 s] int16), each drawn
    at random and at a random level (+-6 dB); returns (the rows replaced, the window of each)."""
    rows = np.nonzero(rng.random(len(x)) < share)[0]
    picks = []
    for i in rows:
        j = int(rng.integers(len(audio)))
        a = audio[j].astype(np.float32) / 32768.0 * float(10 ** (rng.uniform(-6, 6) / 20))
        x[i] = torch.from_numpy(np.clip(a, -1.0, 1.0))
        picks.append(j)
    return rows, picks
