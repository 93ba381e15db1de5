# SPDX-License-Identifier: Apache-2.0
"""The teacher classifier's logits for training clips, keyed by each clip's
path, for a student trained toward them (train.py --teacher-targets,
--distill; issue 83 item 4a).

The logits are the kept head's (teacher.head) over the cached embeddings of
the clean clips (teacher.embed_cache): the student hears each clip augmented,
the teacher's answer is for the clip as recorded. A cache is given with the
data folder it was made from (CACHE=DATA), so each clip's key is the real
path of DATA/its relative path, as train.py's Dataset finds it.

Usage (from the repository root, PYTHONPATH=tools):
  python3 -m mega_kws_tools.teacher.targets --head RUN/best.pt \\
      --cache work/data/tcache/real-train-all=work/data/real_sc [--cache ...] -o targets.npz
"""

import argparse
import os
import sys

import numpy as np

from mega_kws_tools.teacher.embed_cache import load_cache


def clip_key(path: str) -> str:
    """The key of one clip file: its real path, so links and relative spellings agree."""
    return os.path.realpath(path)


def cache_logits(model, cache: str, data: str):
    """(keys, logits [N, n_labels] float32) of every clip in one cache."""
    from mega_kws_tools.teacher.head import predict
    emb, _, rels = load_cache(cache)
    keys = [clip_key(os.path.join(data, str(r))) for r in rels]
    return keys, predict(model, emb).astype(np.float32)


def write_targets(head_path: str, pairs, out: str, log=print) -> int:
    """Writes out (keys, logits, labels) for the caches of `pairs` [(cache, data)];
    a clip in two caches keeps its first logits. Returns the number of clips."""
    from mega_kws_tools.teacher.head import load_head
    model, ck = load_head(head_path)
    keys, logits, seen = [], [], set()
    for cache, data in pairs:
        k, lg = cache_logits(model, cache, data)
        fresh = [i for i, key in enumerate(k) if key not in seen]
        seen.update(k[i] for i in fresh)
        keys += [k[i] for i in fresh]
        logits.append(lg[fresh])
        log(f"{cache}: {len(k)} clips ({len(k) - len(fresh)} already in an earlier cache)")
    tmp = out + ".part.npz"
    np.savez(tmp, keys=np.array(keys), logits=np.concatenate(logits), labels=np.array(list(ck["labels"])))
    os.replace(tmp, out)
    return len(keys)


def label_order(path: str, teacher_labels, labels) -> list:
    """The column of each of a run's `labels` among the teacher's (the file at path's); a label
    of the run the teacher lacks is an error."""
    teacher_labels = [str(l) for l in teacher_labels]
    missing = [l for l in labels if l not in teacher_labels]
    if missing:
        raise ValueError(f"{path}: the teacher has no label {', '.join(missing)} (its labels: "
                         f"{', '.join(teacher_labels)})")
    return [teacher_labels.index(l) for l in labels]


def load_targets(path: str, labels, paths):
    """The teacher's logits for each of `paths` (training clips, in order) in the
    order of `labels`: ([len(paths), len(labels)] float32 with NaN rows for clips
    the file lacks, the number found). A label of the run the teacher lacks is an error."""
    with np.load(path) as f:
        keys, logits, teacher_labels = list(f["keys"]), f["logits"], [str(l) for l in f["labels"]]
    order = label_order(path, teacher_labels, labels)
    row = {str(k): i for i, k in enumerate(keys)}
    out = np.full((len(paths), len(labels)), np.nan, dtype=np.float32)
    found = 0
    for i, p in enumerate(paths):
        j = row.get(clip_key(p))
        if j is not None:
            out[i] = logits[j, order]
            found += 1
    return out, found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head", required=True, help="a kept teacher head (teacher.head train's best.pt)")
    ap.add_argument("--cache", action="append", required=True, metavar="CACHE=DATA",
                    help="a cache folder and the data folder it was made from (repeat)")
    ap.add_argument("-o", "--out", required=True, help="the .npz to write")
    args = ap.parse_args(argv)
    pairs = []
    for item in args.cache:
        cache, sep, data = item.partition("=")
        if not sep or not os.path.isdir(cache) or not os.path.isdir(data):
            sys.exit(f"targets: --cache {item}: give CACHE=DATA, two existing folders")
        pairs.append((cache, data))
    n = write_targets(args.head, pairs, args.out)
    print(f"done: teacher logits of {n} clips in {args.out}")


if __name__ == "__main__":
    main()
