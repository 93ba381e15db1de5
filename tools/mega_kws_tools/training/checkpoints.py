# SPDX-License-Identifier: Apache-2.0
"""Training checkpoints: saving them, and whether weights fit a model."""

import dataclasses
import os

import torch


def state_mismatch(model, weights: dict):
    """None when `weights` fit `model`, else one line saying what differs (missing and
    unexpected tensors, shapes), naming --patch-norm when its start value is the difference."""
    own = model.state_dict()
    missing = [k for k in own if k not in weights]
    extra = [k for k in weights if k not in own]
    shapes = [f"{k} {tuple(weights[k].shape)} (this run {tuple(own[k].shape)})" for k in own
              if k in weights and tuple(weights[k].shape) != tuple(own[k].shape)]
    if not (missing or extra or shapes):
        return None

    def few(names):
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    parts = ([f"this run has {few(missing)}, the checkpoint not"] if missing else []) + \
        ([f"the checkpoint has {few(extra)}, this run not"] if extra else []) + \
        ([f"shapes differ: {few(shapes)}"] if shapes else [])
    hint = " (--patch-norm differs from the checkpoint's)" if "embed_tokens.norm_init" in missing + extra else ""
    return "; ".join(parts) + hint


def save(path, model, opt, step, best, labels, args, rngs, best_key=None, average=None, adversary=None):
    """rngs: the batch and the feature-augmentation generators, whose states
    --resume restores so that a resumed run draws what the whole run would."""
    tmp = path + ".tmp"
    ck = {"config": dataclasses.asdict(model.cfg), "model": model.state_dict(), "labels": labels,
          "optimizer": opt.state_dict(), "step": step, "best_val": best, "args": vars(args),
          "rng": rngs[0].bit_generator.state, "augment_rng": rngs[1].bit_generator.state, "best_key": best_key}
    if average is not None:
        ck["weight_average"] = average.state_dict()
    if adversary is not None:
        ck["voice_adversary"] = {"names": adversary.names, "state": adversary.state_dict()}
    torch.save(ck, tmp)
    os.replace(tmp, path)
