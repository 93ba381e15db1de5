# SPDX-License-Identifier: Apache-2.0
"""Starting values of the front end from the training data (--patch-norm,
log-mel presets)."""

import numpy as np
import torch

from mega_kws_tools.augment.batch import make_batch
from mega_kws_tools.data.dataset import Dataset


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
