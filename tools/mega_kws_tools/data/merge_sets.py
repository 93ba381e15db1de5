#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Merge Speech Commands-layout datasets into one, linking the clips (no copies).

  merge_sets.py --out DIR SRC [SRC ...]

Each SRC is a folder laid out like Speech Commands (<label>/<name>.wav,
validation_list.txt, testing_list.txt; the rest is training), for example
tools/mega_kws_tools/data/make_sc10.py's output and a folder of its --near-miss clips. DIR
gets every clip of every SRC under the same relative path (a hard link where
the file system allows it, else a copy), the concatenated split lists, and, when
every SRC has one, the concatenated manifest.csv; README.txt names the sources
and counts the clips per label and split.

Refused (exit 1, nothing written): a clip path found in two sources, manifests
with different columns, a manifest row or list entry naming a missing clip, and
an existing DIR. When the result has a manifest, it is checked with
tools/mega_kws_tools/data/check_splits.py (voice-disjoint splits, no reserved voice) before
anything is written.
"""

import argparse
import contextlib
import csv
import io
import os
import shlex
import shutil
import sys

from mega_kws_tools.data import check_splits
from mega_kws_tools.data.layout import clip_splits, listed_missing

LISTS = (("validation", "validation_list.txt"), ("testing", "testing_list.txt"))


def read_source(src: str):
    """(clips {relpath: split}, manifest rows or None, manifest columns or None) of one folder."""
    clips = clip_splits(src)
    missing = list(listed_missing(src, clips))
    if missing:
        raise ValueError(f"{src}: {len(missing)} listed clip(s) missing, e.g. {missing[0]}")
    rows, fields = None, None
    manifest = os.path.join(src, "manifest.csv")
    if os.path.exists(manifest):
        with open(manifest, newline="") as f:
            reader = csv.DictReader(f)
            fields, rows = reader.fieldnames, list(reader)
        absent = [r["path"] for r in rows if r["path"] not in clips]
        if absent:
            raise ValueError(f"{src}/manifest.csv: {len(absent)} row(s) name a missing clip, e.g. {absent[0]}")
    return clips, rows, fields


def merge(out: str, sources: list) -> dict:
    """Merge `sources` into the new folder `out`; returns {label: {split: clips}}."""
    if os.path.exists(out):
        raise ValueError(f"{out} exists (merge_sets.py writes a new folder)")
    clips, origin, rows, fields = {}, {}, [], None
    with_manifest = True
    for src in sources:
        c, r, fl = read_source(src)
        for rel in c:
            if rel in origin:
                raise ValueError(f"{rel} is in both {origin[rel]} and {src}")
            origin[rel] = src
        clips.update(c)
        if r is None:
            with_manifest = False
        elif fields is None:
            fields = fl
        elif fl != fields:
            raise ValueError(f"{src}/manifest.csv has other columns than {sources[0]}/manifest.csv")
        rows += r or []
    tmp = out + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        for split, name in LISTS:
            with open(os.path.join(tmp, name), "w") as f:
                f.writelines(rel + "\n" for rel in sorted(clips) if clips[rel] == split)
        if with_manifest and fields:
            with open(os.path.join(tmp, "manifest.csv"), "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=fields)
                w.writeheader()
                w.writerows(rows)
            with contextlib.redirect_stdout(io.StringIO()):  # its per-voice counts
                problems = check_splits.check(tmp)
            if problems:
                raise ValueError(f"the merged splits fail check_splits ({len(problems)}): {problems[0]}")
        for rel in sorted(clips):
            dst = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            srcf = os.path.join(origin[rel], rel)
            try:
                os.link(srcf, dst)
            except OSError:
                shutil.copyfile(srcf, dst)
        table = {}
        for rel, split in clips.items():
            t = table.setdefault(rel.split("/")[0], {"training": 0, "validation": 0, "testing": 0})
            t[split] += 1
        cmd = " ".join(shlex.quote(a) for a in ["python3", "-m", "mega_kws_tools.data.merge_sets"] + sys.argv[1:])
        lines = [f"Merged by: {cmd}", "Sources:"] + [f"  {s}" for s in sources] + [
            "", f"{'label':<22} {'training':>8} {'validation':>10} {'testing':>7}"]
        lines += [f"{lab:<22} {t['training']:>8} {t['validation']:>10} {t['testing']:>7}" for lab, t in sorted(table.items())]
        with open(os.path.join(tmp, "README.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 3)[3],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the merged folder (must not exist)")
    ap.add_argument("sources", nargs="+", metavar="SRC", help="Speech Commands-layout folders")
    args = ap.parse_args()
    for s in args.sources:
        if not os.path.isdir(s):
            print(f"merge_sets.py: {s}: not a folder", file=sys.stderr)
            return 1
    try:
        table = merge(os.path.abspath(args.out), args.sources)
    except (OSError, ValueError) as e:
        print(f"merge_sets.py: {e}", file=sys.stderr)
        return 1
    n = sum(sum(t.values()) for t in table.values())
    print(f"merged {n} clips from {len(args.sources)} folders into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
