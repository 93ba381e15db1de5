#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Compares two `keyword_spotter classify --json` outputs (one JSON object per
line, the same files in the same order): same labels, and logits within a
tolerance. Exit 0 if they agree, 1 if not. Usage: compare_logits.py A B [--tol T]"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tol", type=float, default=1e-4, help="max abs logit difference [1e-4]")
    args = ap.parse_args()
    a, b = load(args.a), load(args.b)
    if not a or len(a) != len(b):
        print(f"different or empty outputs: {len(a)} vs {len(b)} results")
        return 1
    worst, ok = 0.0, True
    for x, y in zip(a, b):
        if x["file"] != y["file"] or x["label"] != y["label"] or len(x["logits"]) != len(y["logits"]):
            print(f"{x['file']}: {x['label']} vs {y['file']}: {y['label']}")
            ok = False
            continue
        d = max(abs(p - q) for p, q in zip(x["logits"], y["logits"]))
        worst = max(worst, d)
        if d > args.tol:
            print(f"{x['file']}: logits differ by {d:.3g} (tolerance {args.tol:g})")
            ok = False
    print(f"{len(a)} results, same labels: {'yes' if ok else 'NO'}, max abs logit difference {worst:.3g}"
          f" (tolerance {args.tol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
