#!/usr/bin/python3
"""Average the weights of several checkpoints of one model ("model soup").

    soup.py -o OUT.pt A.pt B.pt [C.pt ...] [--weights 1 1 2]

The checkpoints must share the configuration and the labels, as runs continued
from one parent (--init) do: their weights then lie in one basin, and their
average often generalizes better than any of them. Every floating-point tensor
of the state dict (BatchNorm running statistics too) becomes the weighted mean;
integer tensors (BatchNorm's batch counters) are taken from the first
checkpoint. OUT.pt is a checkpoint that evaluate, tune_detection, mega_convert
and train.py --init read like any other (without optimizer state: it cannot be
--resumed)."""

import argparse
import sys

import torch


def soup(checkpoints, weights):
    """The averaged checkpoint dict; ValueError when the checkpoints do not match."""
    first = checkpoints[0]
    for name, ck in checkpoints[1:]:
        if ck.get("config") != first[1].get("config"):
            raise ValueError(f"{name}: its configuration differs from {first[0]}'s")
        if ck.get("labels") != first[1].get("labels"):
            raise ValueError(f"{name}: its labels differ from {first[0]}'s")
        if ck["model"].keys() != first[1]["model"].keys():
            raise ValueError(f"{name}: its tensors differ from {first[0]}'s")
    total = float(sum(weights))
    out = {}
    for key, ref in first[1]["model"].items():
        for name, ck in checkpoints[1:]:
            if ck["model"][key].shape != ref.shape:
                raise ValueError(f"{name}: {key} has shape {tuple(ck['model'][key].shape)}, "
                                 f"{first[0]} {tuple(ref.shape)}")
        if not ref.is_floating_point():
            out[key] = ref.clone()
            continue
        acc = torch.zeros_like(ref, dtype=torch.float64)
        for w, (_, ck) in zip(weights, checkpoints):
            acc += (w / total) * ck["model"][key].to(torch.float64)
        out[key] = acc.to(ref.dtype)
    return {"config": first[1].get("config"), "model": out, "labels": first[1].get("labels"),
            "step": None, "best_val": None,
            "soup": [(name, w) for (name, _), w in zip(checkpoints, weights)]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("checkpoints", nargs="+", help="training checkpoints (.pt) of one configuration")
    ap.add_argument("-o", "--out", required=True, help="the averaged checkpoint to write")
    ap.add_argument("--weights", type=float, nargs="+",
                    help="one non-negative weight per checkpoint (default: all equal)")
    args = ap.parse_args()
    if len(args.checkpoints) < 2:
        ap.error("give at least two checkpoints")
    weights = args.weights or [1.0] * len(args.checkpoints)
    if len(weights) != len(args.checkpoints):
        ap.error(f"{len(weights)} weights for {len(args.checkpoints)} checkpoints")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        ap.error("weights must be non-negative, and not all zero")
    loaded = []
    for path in args.checkpoints:
        try:
            ck = torch.load(path, map_location="cpu")
        except Exception as e:  # unreadable, corrupt or not a torch file
            print(f"soup.py: {path}: cannot read it ({type(e).__name__}: {e})", file=sys.stderr)
            return 1
        if not isinstance(ck, dict) or "model" not in ck or "config" not in ck:
            print(f"soup.py: {path}: not a training checkpoint (a dict with 'config' and 'model')",
                  file=sys.stderr)
            return 1
        loaded.append((path, ck))
    try:
        out = soup(loaded, weights)
    except ValueError as e:
        print(f"soup.py: {e}", file=sys.stderr)
        return 1
    torch.save(out, args.out)
    print(f"soup.py: {args.out}: the average of {len(loaded)} checkpoints, weights "
          + " ".join(f"{w:g}" for w in weights))
    return 0


if __name__ == "__main__":
    sys.exit(main())
