# SPDX-License-Identifier: Apache-2.0
"""How a custom keyword model does on real people, where real recordings of its
word exist that it never trained on (docs/custom-keywords.md):

  python3 -m mega_kws_tools.custom.evaluate --model bed.mega --clips work/data/real_sc/bed
      [--label bed] [--data work/data] [--keyword-spotter PATH] [--json]

Each clip is scanned by the runtime at the model's stored defaults, at its own
level, after 1.5 s of faint noise (a live stream's start) and before 1 s of it:
recall is the share of clips in which the label fires. False alarms: the
validation speakers' keyword-free read sentences (work/data/so762), the
sentences that say the label or a word said like it left out.
"""

import argparse
import json
import os
import sys

from mega_kws_tools.custom import keywords as kw
from mega_kws_tools.custom import package as pk
from mega_kws_tools.custom.paths import ROOT
from mega_kws_tools.data.sc10_audio import load_16k


def clip_names(folder: str, split: str):
    """The folder's files; for a split, those its parent's validation_list.txt
    puts in it (Speech Commands layout)."""
    names = sorted(f for f in os.listdir(folder) if os.path.isfile(os.path.join(folder, f)))
    if split == "all":
        return names
    word = os.path.basename(os.path.normpath(folder))
    with open(os.path.join(os.path.dirname(os.path.normpath(folder)), "validation_list.txt")) as f:
        val = {ln.strip() for ln in f}
    return [n for n in names if (f"{word}/{n}" in val) == (split == "validation")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m mega_kws_tools.custom.evaluate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--clips", required=True, help="a folder of clips of the word")
    ap.add_argument("--label", help="the model's label for the word (default: the folder's name)")
    ap.add_argument("--data", default=os.path.join(ROOT, "work", "data"))
    ap.add_argument("--keyword-spotter", default="")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of text")
    ap.add_argument("--scan-options", default="", help="options for keyword_spotter scan instead of the "
                    "stored defaults, e.g. '--smoothing 2 --threshold 0.7'")
    ap.add_argument("--split", choices=["all", "training", "validation"], default="all",
                    help="with a Speech Commands folder: only the clips of that split's speakers")
    args = ap.parse_args(argv)
    label = kw.normalize(args.label or os.path.basename(os.path.normpath(args.clips)))
    ks = pk.find_runtime(args.keyword_spotter, ROOT)
    if not ks:
        print("evaluate: keyword_spotter not found (build it, or --keyword-spotter)", file=sys.stderr)
        return 2
    if not os.path.isdir(args.clips):
        print(f"evaluate: --clips {args.clips}: not a folder", file=sys.stderr)
        return 2
    names = clip_names(args.clips, args.split)
    clips = [(0, load_16k(os.path.join(args.clips, f))) for f in names]
    options = args.scan_options.split()
    found, n = pk.recall_of(ks, args.model, clips, [label], options).get(label, (0, 0))
    lexicon = kw.load_dictionary()
    said_like = {label, *(kw.homophones(label, lexicon) if len(label.split()) == 1 else [])}
    fa = pk.false_alarm_rate(ks, args.model, args.data, said_like, options)
    out = {"model": args.model, "label": label, "split": args.split, "clips": n, "detected": found, "recall": found / max(1, n),
           "false_alarms": fa[0] if fa else None, "keyword_free_hours": round(fa[1], 3) if fa else None}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{label}: found in {found} of {n} clips ({100 * found / max(1, n):.1f}%) at the defaults; "
              + (f"{fa[0]} false alarms in {fa[1]:.2f} keyword-free hours ({fa[0] / fa[1]:.2f} per hour)"
                 if fa else "false alarms not measured (no keyword-free recording under --data)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
