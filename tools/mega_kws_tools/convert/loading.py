# SPDX-License-Identifier: Apache-2.0
"""A model from a training checkpoint or a .mega file (as train --init reads it)."""

import dataclasses
import os
import sys

import torch

from mega_kws_tools import model as mt


def load_init(path):
    """The checkpoint dict behind --init: a training checkpoint, or a .mega file unpacked."""
    try:
        if path.endswith(".mega"):
            from mega_kws_tools.convert import mega_unpack  # the FlatBuffers reader, only needed here
            with open(path, "rb") as f:
                model, labels, _, _ = mega_unpack.unpack(f.read())
            return {"config": dataclasses.asdict(model.cfg), "model": model.state_dict(), "labels": labels,
                    "step": None, "best_val": None}
        return torch.load(path, map_location="cpu")
    except Exception as e:  # unreadable, corrupt, or not a model: say which file and why
        print(f"train.py: --init {path}: {e}", file=sys.stderr)
        return None


def load_model(path):
    """(model, labels) of a training checkpoint or a .mega file, as --init reads them, for the
    analysis tools; exits with the file and the reason when it is not a usable model."""
    ck = load_init(path)
    if ck is None:
        sys.exit(1)
    try:
        return mt.model_from_config_checkpoint(ck), ck["labels"]
    except (KeyError, ValueError) as e:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {path}: {e}")
