#!/usr/bin/python3
"""Apply the demo model's shipping rule (docs/lab-log.md) to validated runs.

  ship_rule.py SHIPPED CANDIDATE [CANDIDATE ...]

Each argument is a run folder that validate_run.sh has filled; this reads its
RUN/validation/curve.txt, voices.json and real.json. Everything read here is
validation data: validation voices, real validation-split speakers, and the
validation recordings. A candidate passes against the shipped model when

  (a) its validation voices' keyword accuracy at 70% and at 80% rejection of
      _unknown_ is at most 1 point lower;
  (b) its recall at <= 5 and at <= 10 false alarms per keyword-free hour on the
      validation recordings pooled (curve.txt) is higher;
  (c) the real validation speakers' keyword accuracy is at most 1 point lower;
  (d) no keyword on the validation voices is more than 5 points lower.

Of the candidates that pass, the one with the best pooled recall at <= 5 per
hour is the one to ship. Prints one line of figures per run, then each
candidate's verdict; exits 0 whatever the verdicts (2 on unreadable input).
"""

import argparse
import json
import os
import re
import sys

CURVE_LINE = re.compile(r"<= (\d+(?:\.\d+)?) per keyword-free hour: recall ([\d.]+)%")
# the levels and limits printed are whatever evaluate.py and tune_detection.py --curve wrote
KEYWORDS_AT_REJECTION = ("0.70", "0.80")  # (a) judges these
FA_LIMITS = (5.0, 10.0)                   # (b) judges these
EQUAL_REJECTION_SLACK = 1.0   # (a), points
REAL_SLACK = 1.0              # (c), points
PER_KEYWORD_SLACK = 5.0       # (d), points


def read_curve(path):
    """{false alarms per keyword-free hour: recall in %} from tune_detection.py --curve's output."""
    out = {}
    with open(path) as f:
        for line in f:
            m = CURVE_LINE.match(line.strip())
            if m:
                out[float(m.group(1))] = float(m.group(2))
    if not out:
        raise ValueError(f"{path}: no '<= N per keyword-free hour: recall X%' lines")
    return out


def read_run(run):
    """The figures the rule reads, in percent, from RUN/validation/."""
    d = os.path.join(run, "validation")
    with open(os.path.join(d, "voices.json")) as f:
        voices = json.load(f)["clips"]
    with open(os.path.join(d, "real.json")) as f:
        real = json.load(f)["clips"]
    at = voices["keywords_at_rejection"]
    fig = {
        "keywords": 100 * voices["keyword_accuracy"],
        "unknown_rejected": 100 * voices["rejected"]["_unknown_"],
        "at_rejection": {r: 100 * at[r]["keyword_accuracy"] if at[r] else float("nan") for r in sorted(at)},
        "curve": read_curve(os.path.join(d, "curve.txt")),
        "real": 100 * real["keyword_accuracy"],
        "per_keyword": {k: 100 * a for k, a in voices["per_label"].items() if not k.startswith("_")},
    }
    near = voices.get("unknown_kinds", {}).get("near_miss")
    fig["near_miss_rejected"] = 100 * near["rejected"] if near else float("nan")
    return fig


def verdict(shipped, cand):
    """(list of failed parts with reasons, largest per-keyword fall as (keyword, points))."""
    fails = []
    for r in KEYWORDS_AT_REJECTION:
        c, s = (f["at_rejection"].get(r, float("nan")) for f in (cand, shipped))
        if not c >= s - EQUAL_REJECTION_SLACK:
            fails.append(f"(a) at {float(r):.0%} rejection {c:.1f} against {s:.1f}")
    for b in FA_LIMITS:
        c, s = cand["curve"].get(b), shipped["curve"].get(b)
        if c is None or s is None or not c > s:
            fails.append(f"(b) pooled recall at <= {b:g} per hour {c} against {s}")
    if not cand["real"] >= shipped["real"] - REAL_SLACK:
        fails.append(f"(c) real speakers' keywords {cand['real']:.1f} against {shipped['real']:.1f}")
    falls = {k: cand["per_keyword"].get(k, float("-inf")) - v for k, v in shipped["per_keyword"].items()}
    worst = min(falls, key=falls.get)
    if not falls[worst] >= -PER_KEYWORD_SLACK:
        fails.append(f"(d) {worst} {falls[worst]:+.1f} points")
    return fails, (worst, falls[worst])


def line(name, f):
    levels, limits = sorted(f["at_rejection"]), sorted(f["curve"])
    at = " / ".join(f"{f['at_rejection'][r]:.1f}" for r in levels)
    curve = " / ".join(f"{f['curve'][b]:.1f}" for b in limits)
    return (f"{name}: keywords {f['keywords']:.1f}, _unknown_ rejected {f['unknown_rejected']:.1f}, "
            f"near misses rejected {f['near_miss_rejected']:.1f} | keywords at "
            f"{'/'.join(f'{100 * float(r):.0f}' for r in levels)}% rejection {at} | pooled recall at <= "
            f"{'/'.join(f'{b:g}' for b in limits)} per hour {curve} | real speakers' keywords {f['real']:.1f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shipped", help="run folder of the shipped model")
    ap.add_argument("candidates", nargs="+", help="run folders of the candidates")
    args = ap.parse_args(argv)
    try:
        shipped = read_run(args.shipped)
        cands = [(c, read_run(c)) for c in args.candidates]
    except (OSError, KeyError, ValueError) as e:
        print(f"ship_rule: {e}", file=sys.stderr)
        return 2
    print(line(args.shipped + " (shipped)", shipped))
    for name, f in cands:
        print(line(name, f))
    passing = []
    for name, f in cands:
        fails, (kw, fall) = verdict(shipped, f)
        state = "PASS" if not fails else "fail: " + "; ".join(fails)
        print(f"{name}: largest keyword fall {kw} {fall:+.1f} | {state}")
        if not fails:
            passing.append((f["curve"][5], name))
    print("ship: " + (max(passing)[1] if passing else "none (the shipped model stays)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
