#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A .mega model cut down to its first N Mega layers, for checks that need the
model's widths and chunk but not its depth (scripts/test_cross.sh: the base
model under qemu, a sixth of the time). The file is unpacked to a checkpoint
(mega_unpack, which checks the file's self-test), the later layers' tensors are
dropped, and the converter writes it again with a self-test of its own.
Usage: keep_layers.py MODEL.mega N OUT.mega"""
import argparse
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import torch  # noqa: E402  (after the path is set)

from mega_kws_tools.convert import mega_convert, mega_unpack  # noqa: E402

LAYER = re.compile(r"layers\.(\d+)\.")


def first_layers(ckpt: dict, n: int) -> dict:
    """The checkpoint with layers 0..n-1 only (the embedding, final norm and head kept)."""
    layers = ckpt["config"]["n_layers"]
    if not 1 <= n <= layers:
        raise ValueError(f"the model has {layers} layers: keep 1 to {layers}, not {n}")
    out = dict(ckpt)
    out["config"] = dict(ckpt["config"], n_layers=n)
    out["model"] = {k: v for k, v in ckpt["model"].items()
                    if not (m := LAYER.match(k)) or int(m.group(1)) < n}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help=".mega file")
    ap.add_argument("n", type=int, help="layers to keep (from the first)")
    ap.add_argument("out", help="output .mega file")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        full, cut = os.path.join(tmp, "full.pt"), os.path.join(tmp, "cut.pt")
        if mega_unpack.main([args.model, "-o", full]) != 0:
            return 1
        try:
            ckpt = first_layers(torch.load(full, map_location="cpu", weights_only=False), args.n)
        except ValueError as e:
            print(f"keep_layers.py: {e}", file=sys.stderr)
            return 2
        torch.save(ckpt, cut)
        notes = f"TEST ONLY: the first {args.n} layers of {os.path.basename(args.model)}"
        return mega_convert.main([cut, "-o", args.out, "--notes", notes])


if __name__ == "__main__":
    sys.exit(main())
