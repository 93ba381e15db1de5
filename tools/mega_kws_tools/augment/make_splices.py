#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Half-keyword clips for measuring near-miss rejection.

  make_splices.py --data DIR --split validation --per-keyword 100 --out OUT [--seed 1]

Each clip is half of a keyword joined to half of another word of the same
split, said by the same voice or speaker where it has one (tools/mega_kws_tools/training/train.py's
splice_pool and splice_pair: the keyword's onset and the other
word's coda, or the other word's onset and the keyword's coda, alternately;
never a word that could make the keyword again, augment.splice.SPLICE_AVOID). Such a
clip sounds like the start or the end of a keyword and must not be taken for
one. OUT gets the Speech Commands layout that tools/mega_kws_tools/evaluation/evaluate.py reads:
every clip in OUT/halfword/ (so `_unknown_`), all listed in
validation_list.txt and testing_list.txt, and splices.csv (clip, keyword,
the part kept, the other word, whether one voice says both, both source clips).

The clips come only from DIR's SPLIT, so halves of validation voices stay
validation data: measure with `evaluate.py --data OUT --split validation`.
"""

import argparse
import csv
import os
import sys


import numpy as np

from mega_kws_tools.audio import write_wav
from mega_kws_tools.augment.splice import splice_pair, splice_pool
from mega_kws_tools.data.dataset import Dataset
from mega_kws_tools.data.layout import KEYWORDS

FOLDER = "halfword"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="Speech Commands-layout folder")
    ap.add_argument("--split", required=True, choices=["training", "validation", "testing"])
    ap.add_argument("--per-keyword", type=int, default=100)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if args.per_keyword < 1:
        ap.error("--per-keyword must be at least 1")
    if os.path.exists(args.out):
        print(f"make_splices.py: {args.out} exists; give a new folder", file=sys.stderr)
        return 1
    ds = Dataset(args.data, "kws12", args.split)
    rng = np.random.default_rng(args.seed)
    os.makedirs(os.path.join(args.out, FOLDER))
    rows = []
    for k, keyword in enumerate(KEYWORDS):
        clips = np.nonzero(ds.y == k)[0]
        if not len(clips) or not len(splice_pool(ds, keyword, clips[0])):
            print(f"make_splices.py: {keyword}: no clips or no other words in {args.split}", file=sys.stderr)
            continue
        made = tries = 0
        while made < args.per_keyword and tries < 20 * args.per_keyword:
            tries += 1
            j = clips[rng.integers(len(clips))]
            pool = splice_pool(ds, keyword, j)
            o = pool[rng.integers(len(pool))]
            keep_onset = made % 2 == 0
            y = splice_pair(ds.audio[j] / 32768.0, ds.audio[o] / 32768.0, keep_onset, rng)
            if y is None:
                continue
            name = f"{FOLDER}/{keyword}_{made:04d}.wav"
            write_wav(os.path.join(args.out, name), (np.clip(y, -1.0, 1.0) * 32767).astype(np.int16))
            rows.append({"clip": name, "keyword": keyword, "kept": "onset" if keep_onset else "coda",
                         "other_word": os.path.basename(os.path.dirname(ds.paths[o])),
                         "same_voice": int(bool(ds.voice[j]) and ds.voice[o] == ds.voice[j]),
                         "keyword_clip": ds.paths[j], "other_clip": ds.paths[o]})
            made += 1
    for lst in ("validation_list.txt", "testing_list.txt"):
        with open(os.path.join(args.out, lst), "w") as f:
            f.writelines(r["clip"] + "\n" for r in rows)
    with open(os.path.join(args.out, "splices.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["clip"])
        w.writeheader()
        w.writerows(rows)
    same = sum(r["same_voice"] for r in rows)
    print(f"wrote {len(rows)} half-keyword clips of {args.split} to {args.out} ({same} within one voice)")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
