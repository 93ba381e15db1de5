#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The demo model's shipping rule, real speakers first: does a candidate run
replace the shipped one?

  python3 -m mega_kws_tools.evaluation.ship_rule SHIPPED CANDIDATE [CANDIDATE ...]

Each argument is a run folder that tools/scripts/continue_real.sh filled. The
rule reads only real validation data (speakers the model never trained on):
RUN/detection.json (the recall its stored defaults reach on the real validation
recordings, tuned to at most 2 false alarms per keyword-free hour),
RUN/eval-realval.json (the real validation speakers' one-second clips) and,
where both runs have it, RUN/eval-speech.json (one-second windows of real
keyword-free read sentences). A candidate passes against the shipped model when

  (a) its recall on the real validation recordings at its stored defaults is
      higher, within the same false-alarm limit (the tuning met it);
  (b) its keyword accuracy on the real validation clips is at most 1 point lower;
  (c) its rejection of the real validation clips' other words is at most 1 point lower;
  (d) no keyword with at least 20 real validation clips is more than 5 points lower;
  (e) its rejection of real running speech is at most 2 points lower;
  (f) every keyword the shipped model finds in the real validation recordings at
      its stored defaults, the candidate finds at least once at its own (issue 83
      item 7: a keyword shut out at the defaults is a keyword the user cannot say).
      Judged where both runs' detection.json count the finds per keyword
      (tune_detection writes them since 2026-12-07).

Of the candidates that pass, the one with the best recall (a) ships. Synthetic
test voices (RUN/eval-syntest.json, if there) are printed, never judged.
Prints one line of figures per run, then each candidate's verdict; exits 0
whatever the verdicts (2 on unreadable input).
"""

import argparse
import json
import os
import sys

KEYWORD_SLACK = 1.0        # (b), points
REJECTION_SLACK = 1.0      # (c), points
PER_KEYWORD_SLACK = 5.0    # (d), points
PER_KEYWORD_MIN_CLIPS = 20  # (d) judges only keywords with this many real validation clips
SPEECH_SLACK = 2.0         # (e), points


def read_json(run, name, required=True):
    path = os.path.join(run, name)
    if not required and not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def read_run(run):
    """The figures the rule reads, in percent."""
    tuned = read_json(run, "detection.json")["tuned_on"]
    clips = read_json(run, "eval-realval.json")["clips"]
    labels, confusion = clips["labels"], clips["confusion"]
    fig = {
        "recall": 100 * tuned["recall"] if tuned.get("limit_met") else float("nan"),
        "fa_per_hour": tuned["fa_per_hour_keyword_free"],
        "keywords": 100 * clips["keyword_accuracy"],
        "rejected": 100 * clips["rejected"]["_unknown_"],
        "per_keyword": {k: 100 * a for k, a in clips["per_label"].items()
                        if not k.startswith("_") and sum(confusion[labels.index(k)]) >= PER_KEYWORD_MIN_CLIPS},
    }
    speech = read_json(run, "eval-speech.json", required=False)
    fig["speech_rejected"] = 100 * speech["clips"]["rejected"]["_unknown_"] if speech else None
    fig["found"] = tuned.get("found_per_keyword")  # {keyword: [found, said]}, absent in older runs
    syn = read_json(run, "eval-syntest.json", required=False)
    fig["synthetic"] = 100 * syn["clips"]["keyword_accuracy"] if syn else None
    return fig


def shut_out(shipped, cand):
    """[(keyword, times said, found by the shipped model)] for each keyword the shipped model
    finds in the recordings and the candidate never does; [] when either run lacks the counts."""
    if not shipped or not cand:
        return []
    return [(k, n, shipped[k][0]) for k, (found, n) in sorted(cand.items())
            if found == 0 and shipped.get(k, [0])[0] > 0]


def verdict(shipped, cand):
    """(list of failed parts with reasons, largest per-keyword fall as (keyword, points))."""
    fails = []
    if not cand["recall"] > shipped["recall"]:
        fails.append(f"(a) recordings' recall {cand['recall']:.1f} against {shipped['recall']:.1f}")
    if not cand["keywords"] >= shipped["keywords"] - KEYWORD_SLACK:
        fails.append(f"(b) real keyword clips {cand['keywords']:.1f} against {shipped['keywords']:.1f}")
    if not cand["rejected"] >= shipped["rejected"] - REJECTION_SLACK:
        fails.append(f"(c) other words rejected {cand['rejected']:.1f} against {shipped['rejected']:.1f}")
    falls = {k: cand["per_keyword"].get(k, float("-inf")) - v for k, v in shipped["per_keyword"].items()}
    worst = min(falls, key=falls.get) if falls else "-"
    if falls and not falls[worst] >= -PER_KEYWORD_SLACK:
        fails.append(f"(d) {worst} {falls[worst]:+.1f} points")
    s, c = shipped["speech_rejected"], cand["speech_rejected"]
    if s is not None and c is not None and not c >= s - SPEECH_SLACK:
        fails.append(f"(e) running speech rejected {c:.1f} against {s:.1f}")
    shut = shut_out(shipped["found"], cand["found"])
    if shut:
        fails.append("(f) shut out at the defaults: " + ", ".join(
            f"{k} 0 of {n}, the shipped model {m}" for k, n, m in shut))
    return fails, (worst, falls.get(worst, 0.0))


def line(name, f):
    def pc(v):
        return "-" if v is None else f"{v:.1f}"
    return (f"{name}: recordings' recall {f['recall']:.1f} at {f['fa_per_hour']:.2f} false alarms per keyword-free "
            f"hour | real keyword clips {f['keywords']:.1f}, other words rejected {f['rejected']:.1f}, running "
            f"speech rejected {pc(f['speech_rejected'])} | synthetic voices' keywords {pc(f['synthetic'])} (not judged)")


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
            passing.append((f["recall"], name))
    print("ship: " + (max(passing)[1] if passing else "none (the shipped model stays)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
