# SPDX-License-Identifier: Apache-2.0
"""The teacher classifier beside the bundled model, judge by judge, as a
Markdown table (issue 83, item 3; docs/models.md, "Teacher classifier").

Each judge is a pair of JSON files for the same clips: the bundled model's
from evaluate.py (--json-out; its "clips" part) and the head's from
`head eval --json-out`. Every figure is counted from the two confusion
matrices, so both are read the same way; the rows at equal rejection are
evaluate.py's rejection_tradeoff of each one's logits.

Usage (from the repository root, PYTHONPATH=tools):
  python3 -m mega_kws_tools.teacher.compare --judge NAME BUNDLED.json HEAD.json [--judge ...]
"""

import argparse
import json

AT_REJECTION = ("0.90", "0.95")  # evaluate.py's levels shown in the table


def load(path):
    with open(path) as f:
        r = json.load(f)
    return r["clips"] if isinstance(r.get("clips"), dict) else r


def figures(r):
    """{"keywords": (right, clips), per keyword (right, clips), "rejected": (non-keyword clips called
    any non-keyword label, non-keyword clips)} from a result's confusion matrix and labels."""
    labels, conf = r["labels"], r["confusion"]
    kw = [i for i, l in enumerate(labels) if not l.startswith("_")]
    other = [i for i, l in enumerate(labels) if l.startswith("_")]
    out = {labels[i]: (conf[i][i], sum(conf[i])) for i in kw if sum(conf[i])}
    out["keywords"] = (sum(conf[i][i] for i in kw), sum(sum(conf[i]) for i in kw))
    out["rejected"] = (sum(conf[i][j] for i in other for j in other), sum(sum(conf[i]) for i in other))
    return out


def cell(pair):
    right, n = pair
    return f"{100 * right / n:.1f}% ({right}/{n})" if n else "-"


def rows(name, bundled, head):
    """Markdown rows for one judge: keywords right, each keyword, non-keywords rejected (where it has them)."""
    a, b = figures(bundled), figures(head)
    out = []
    if a["keywords"][1]:
        out.append(f"| **{name}: keywords right** | {cell(a['keywords'])} | {cell(b['keywords'])} |")
        out += [f"| {name}: {k} | {cell(a[k])} | {cell(b.get(k, (0, 0)))} |"
                for k in a if k not in ("keywords", "rejected")]
    if a["rejected"][1]:
        out.append(f"| **{name}: non-keywords rejected** | {cell(a['rejected'])} | {cell(b['rejected'])} |")
    for level in AT_REJECTION:
        at = [(r.get("keywords_at_rejection") or {}).get(level) for r in (bundled, head)]
        if all(at):
            out.append(f"| {name}: keywords right where >= {float(level):.0%} of non-keywords are rejected "
                       f"(a bias on _unknown_, analysis only) | "
                       + " | ".join(f"{x['keyword_accuracy']:.1%} (bias {x['unknown_bias']:+.2f})" for x in at) + " |")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--judge", nargs=3, action="append", required=True, metavar=("NAME", "BUNDLED", "HEAD"))
    args = ap.parse_args(argv)
    print("| judge | the bundled model | the teacher classifier |")
    print("|---|---|---|")
    for name, bundled, head in args.judge:
        a, b = load(bundled), load(head)
        if figures(a)["keywords"][1] != figures(b)["keywords"][1] or figures(a)["rejected"][1] != figures(b)["rejected"][1]:
            raise SystemExit(f"compare: {name}: the two files do not count the same clips")
        print("\n".join(rows(name, a, b)))


if __name__ == "__main__":
    main()
