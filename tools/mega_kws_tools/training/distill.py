# SPDX-License-Identifier: Apache-2.0
"""Distillation from the teacher classifier (--teacher-targets, --distill;
issue 83 item 4a): the student is trained toward the teacher's softened
answer on each clip the teacher has logits for, beside the labels.

The term is Hinton et al.'s: T^2 times the KL divergence from the teacher's
softmax at temperature T to the student's at the same T, averaged over the
rows of the batch that keep their drawn clip (a row replaced by a hard
example, spliced into an _unknown_ word or turned into a non-speech sound is
no longer the clip the teacher heard, and is left to the cross-entropy)."""

import numpy as np
import torch
import torch.nn.functional as F

from mega_kws_tools.teacher.targets import load_targets


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
