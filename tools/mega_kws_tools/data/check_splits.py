#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Check that a generated keyword dataset is voice-disjoint.

  check_splits.py DATA_DIR

Reads DATA_DIR/manifest.csv (tools/mega_kws_tools/data/make_sc10.py) and the split lists, and
fails (exit 1, naming them) if a voice group (tools/mega_kws_tools/data/voices.py: engine +
voice, or the voices of one recorded speaker) has clips in two splits, if a
clip's split disagrees with its voice's assigned split or with the list files,
or if a reserved voice appears at all. Prints the clips per split and voice, and
warns (without failing) about _unknown_ clips whose word the voice reads as a
keyword (voices.Voice.reads_as_keyword: "app" where up is "ap"), which
make_sc10.py now re-draws but older generations hold.
"""

import csv
import os
import sys

from mega_kws_tools.data import voices as vc


def check(data: str, warnings=None) -> list:
    by_id = {v.id: v for v in vc.ALL_VOICES}
    lists = {}
    for split, name in (("validation", "validation_list.txt"), ("testing", "testing_list.txt")):
        with open(os.path.join(data, name)) as f:
            lists.update({p: split for p in f.read().split()})
    problems, groups, counts = [], {}, {}
    with open(os.path.join(data, "manifest.csv"), newline="") as f:
        for r in csv.DictReader(f):
            listed = lists.get(r["path"], "training")
            if listed != r["split"]:
                problems.append(f"{r['path']}: manifest says {r['split']}, the lists {listed}")
            if r["engine"] == "noise":
                continue
            vid = f"{r['engine']}:{r['voice']}"
            if vc.is_reserved(r["voice"]) or vc.is_reserved(r["variant"]):
                problems.append(f"{r['path']}: reserved voice {vid}")
                continue
            v = by_id.get(vid)
            if v is None:
                problems.append(f"{r['path']}: voice {vid} is not in the pool")
                continue
            if vc.split_of(v) != r["split"]:
                problems.append(f"{r['path']}: voice {vid} belongs to {vc.split_of(v)}, clip is in {r['split']}")
            if warnings is not None and r.get("label") == "_unknown_" and v.reads_as_keyword(r.get("word", "")):
                warnings.append(f"{r['path']} ({r['split']}): {vid} reads {r['word']!r} as a keyword")
            groups.setdefault(v.group, set()).add(r["split"])
            counts[(r["split"], vid)] = counts.get((r["split"], vid), 0) + 1
    problems += [f"voice group {g} is in {len(s)} splits: {sorted(s)}" for g, s in groups.items() if len(s) > 1]
    for split in vc.SPLITS:
        row = sorted((vid, n) for (s, vid), n in counts.items() if s == split)
        print(f"{split}: {sum(n for _, n in row)} speech clips, {len(row)} voices: "
              + ", ".join(f"{vid} {n}" for vid, n in row))
    return problems


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 2 if len(sys.argv) != 2 else 0
    warnings = []
    problems = check(sys.argv[1], warnings)
    if warnings:
        print(f"warning: {len(warnings)} _unknown_ clip(s) say a keyword in their voice (regenerate with "
              f"make_sc10.py to re-draw them), e.g. " + "; ".join(warnings[:3]), file=sys.stderr)
    for p in problems[:50]:
        print("error:", p, file=sys.stderr)
    if problems:
        print(f"check_splits: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("voice-disjoint: no voice group in two splits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
