#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Average the weights of several checkpoints of one model ("model soup").

    soup.py -o OUT.pt A.pt B.pt [C.pt ...] [--weights 1 1 2]
    soup.py -o OUT.pt A.pt B.pt [C.pt ...] --greedy DATA [--extra-val DIR ...]

The checkpoints must share the configuration and the labels, as runs continued
from one parent (--init) do: their weights then lie in one basin, and their
average often generalizes better than any of them. Every floating-point tensor
of the state dict (BatchNorm running statistics too) becomes the weighted mean;
integer tensors (BatchNorm's batch counters) are taken from the first
checkpoint. OUT.pt is a checkpoint that evaluate, tune_detection, mega_convert
and train.py --init read like any other (without optimizer state: it cannot be
--resumed).

--greedy DATA (a "greedy soup"): the checkpoints are candidates. Each is scored
by its accuracy on the validation split of DATA (and of every --extra-val
folder), as train.py scores checkpoints; in order of that score, best first,
each joins the soup (equal weights) if the soup's score does not drop. The
scores are printed; OUT.pt is the soup kept. Validation data only: never pass
a testing split."""

import argparse
import sys


import torch


def check_match(checkpoints):
    """ValueError unless the (name, checkpoint dict) pairs share configuration,
    labels, tensor names and shapes."""
    first = checkpoints[0]
    for name, ck in checkpoints[1:]:
        if ck.get("config") != first[1].get("config"):
            raise ValueError(f"{name}: its configuration differs from {first[0]}'s")
        if ck.get("labels") != first[1].get("labels"):
            raise ValueError(f"{name}: its labels differ from {first[0]}'s")
        if ck["model"].keys() != first[1]["model"].keys():
            raise ValueError(f"{name}: its tensors differ from {first[0]}'s")
        for key, ref in first[1]["model"].items():
            if ck["model"][key].shape != ref.shape:
                raise ValueError(f"{name}: {key} has shape {tuple(ck['model'][key].shape)}, "
                                 f"{first[0]} {tuple(ref.shape)}")


def soup(checkpoints, weights):
    """The averaged checkpoint dict; ValueError when the checkpoints do not match."""
    check_match(checkpoints)
    first = checkpoints[0]
    total = float(sum(weights))
    out = {}
    for key, ref in first[1]["model"].items():
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


def accuracy(ck, val) -> float:
    """train.py's validation accuracy of the checkpoint dict ck on the Dataset val."""
    from mega_kws_tools import model as mega_torch
    from mega_kws_tools.evaluation.accuracy import evaluate
    return evaluate(mega_torch.model_from_config_checkpoint(ck), val)[0]


def greedy(checkpoints, val, log=print):
    """(kept names, their soup, its score): candidates in order of their own score,
    each kept if the soup with it scores at least as well as without."""
    score = {name: accuracy(ck, val) for name, ck in checkpoints}
    for name, _ in checkpoints:
        log(f"{name}: {score[name]:.4f}")
    order = sorted(checkpoints, key=lambda c: -score[c[0]])  # stable: ties keep the command's order
    kept, best, best_soup = [order[0]], score[order[0][0]], order[0][1]
    for cand in order[1:]:
        trial = soup(kept + [cand], [1.0] * (len(kept) + 1))
        s = accuracy(trial, val)
        log(f"+ {cand[0]}: {s:.4f} ({'kept' if s >= best else 'left out'})")
        if s >= best:
            kept, best, best_soup = kept + [cand], s, trial
    return [name for name, _ in kept], best_soup, best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("checkpoints", nargs="+", help="training checkpoints (.pt) of one configuration")
    ap.add_argument("-o", "--out", required=True, help="the averaged checkpoint to write")
    ap.add_argument("--weights", type=float, nargs="+",
                    help="one non-negative weight per checkpoint (default: all equal)")
    ap.add_argument("--greedy", metavar="DATA",
                    help="greedy soup, scored on the validation split of this dataset folder")
    ap.add_argument("--extra-val", action="append", default=[], metavar="DIR",
                    help="with --greedy: the validation split of this folder joins the scoring (repeatable)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for --greedy (default 1)")
    args = ap.parse_args()
    if args.greedy and args.weights:
        ap.error("--greedy weighs the checkpoints it keeps equally: leave out --weights")
    if args.extra_val and not args.greedy:
        ap.error("--extra-val needs --greedy")
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
        if not args.greedy:
            out = soup(loaded, weights)
        else:
            from mega_kws_tools.data.dataset import Dataset
            check_match(loaded)
            torch.set_num_threads(args.threads)
            labels = loaded[0][1]["labels"]
            classes = "kws12" if len(labels) == 12 else "sc10"
            val = Dataset(args.greedy, classes, "validation", 0, 1)
            if val.labels != labels:
                raise ValueError(f"the checkpoints' labels {labels} are not train.py's {val.labels}")
            for folder in args.extra_val:
                val.extend(Dataset(folder, classes, "validation", 0, 1))
            if not len(val):
                raise ValueError(f"{args.greedy}: no validation clips")
            names, out, best = greedy(loaded, val, log=lambda m: print(f"soup.py: {m}", flush=True))
            print(f"soup.py: greedy soup of {len(names)}: {' '.join(names)} ({best:.4f})")
    except (ValueError, OSError) as e:
        print(f"soup.py: {e}", file=sys.stderr)
        return 1
    torch.save(out, args.out)
    if not args.greedy:
        print(f"soup.py: {args.out}: the average of {len(loaded)} checkpoints, weights "
              + " ".join(f"{w:g}" for w in weights))
    return 0


if __name__ == "__main__":
    sys.exit(main())
