# SPDX-License-Identifier: Apache-2.0
"""Clip accuracy of a PyTorch model on a Dataset, as training validates."""

import numpy as np
import torch

from mega_kws_tools.augment.batch import make_batch
from mega_kws_tools.data.dataset import Dataset


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
