# SPDX-License-Identifier: Apache-2.0
"""Distillation from the teacher classifier (--teacher-targets, --distill;
issue 83 item 4a): the student is trained toward the teacher's softened
answer on each clip the teacher has logits for, beside the labels.

The term is Hinton et al.'s: T^2 times the KL divergence from the teacher's
softmax at temperature T to the student's at the same T, averaged over the
rows of the batch that keep their drawn clip (a row replaced by a hard
example, spliced into an _unknown_ word or turned into a non-speech sound is
no longer the clip the teacher heard, and is left to the cross-entropy).

Unlabelled windows (--unlabeled, teacher.unlabeled's files: two-second windows
of audio with no label and the teacher's logits for each, as the student hears
them) replace a share of each batch's rows; such a row has the label IGNORE,
so the cross-entropy leaves it out and only the teacher's term teaches it."""

import numpy as np
import torch
import torch.nn.functional as F

from mega_kws_tools.audio import SR
from mega_kws_tools.teacher.targets import label_order, load_targets
from mega_kws_tools.training.mining import swap_rows


IGNORE = -100  # an unlabelled row's label: F.cross_entropy's ignore_index


class UnlabeledWindows:
    """teacher.unlabeled's windows ([N, 2 s] int16) and the teacher's logits for each,
    in the order of a run's labels (a label of the run the teacher lacks is an error)."""

    def __init__(self, paths, labels):
        audio, logits = [], []
        for p in paths:
            with np.load(p) as z:
                if z["audio"].ndim != 2 or z["audio"].shape[1] != 2 * SR or len(z["logits"]) != len(z["audio"]):
                    raise ValueError(f"{p}: need audio [N, {2 * SR}] and logits [N, labels] (teacher.unlabeled)")
                audio.append(z["audio"])
                logits.append(z["logits"][:, label_order(p, z["labels"], labels)].astype(np.float32))
        self.audio = np.concatenate(audio) if audio else np.zeros((0, 2 * SR), np.int16)
        self.logits = np.concatenate(logits) if logits else np.zeros((0, len(labels)), np.float32)
        if not np.isfinite(self.logits).all():
            raise ValueError(f"{', '.join(paths)}: the teacher's logits are not all finite")

    def __len__(self):
        return len(self.audio)

    def replace(self, x: torch.Tensor, y: torch.Tensor, teacher: torch.Tensor, drawn_y: torch.Tensor,
                rng: np.random.Generator, share: float) -> np.ndarray:
        """Replaces about `share` of the batch's rows with unlabelled windows at a random level
        (+-6 dB; the softmax of the teacher's answer does not depend on it), their label and
        drawn label IGNORE, their teacher row the window's logits; returns the rows replaced."""
        rows, picks = swap_rows(x, self.audio, rng, share)
        for i, j in zip(rows, picks):
            y[i] = drawn_y[i] = IGNORE
            teacher[i] = torch.from_numpy(self.logits[j])
        return rows


def labelled_cross_entropy(logits: torch.Tensor, y: torch.Tensor, label_smoothing: float) -> torch.Tensor:
    """The cross-entropy over the rows that have a label (0 when none has)."""
    if not bool((y != IGNORE).any()):
        return logits.new_zeros(())
    return F.cross_entropy(logits, y, ignore_index=IGNORE, label_smoothing=label_smoothing)


class TeacherTargets:
    """The teacher's logits for each training clip ([n_clips, n_labels], NaN rows: none)."""

    def __init__(self, path: str, labels, paths):
        self.logits, self.found = load_targets(path, labels, paths)

    def rows(self, idx: np.ndarray, views: int) -> torch.Tensor:
        """The teacher's logits for a drawn batch (idx repeated for each view)."""
        return torch.from_numpy(np.tile(self.logits[idx], (views, 1)))


def kept_rows(teacher: torch.Tensor, drawn_y: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The rows a teacher answer applies to: it has one, and the row still has
    the label its drawn clip had (augmentation that changes what a row is
    changes its label, except a non-speech sound in place of a _silence_ clip,
    which the teacher calls silence as well)."""
    return ~torch.isnan(teacher).any(dim=1) & (drawn_y == y)


def distill_loss(logits: torch.Tensor, teacher: torch.Tensor, rows: torch.Tensor, temperature: float) -> torch.Tensor:
    """T^2 * KL(softmax(teacher / T) || softmax(student / T)), the mean over `rows`; 0 without rows."""
    if not bool(rows.any()):
        return logits.new_zeros(())
    t = F.log_softmax(teacher[rows] / temperature, dim=1)
    s = F.log_softmax(logits[rows] / temperature, dim=1)
    return temperature ** 2 * (t.exp() * (t - s)).sum(dim=1).mean()
