#!/usr/bin/python3
"""tools/mega_kws_tools/evaluation/ship_rule.py on made-up run folders: a candidate that is better
everywhere passes, each part of the rule fails on its own when only its figure
is worse, the boundaries are where docs/models.md puts them, and the best
passing candidate by pooled recall at <= 5 false alarms per hour is named."""

import contextlib
import copy
import io
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")  # the mega_kws_tools package, for this test and the tools it runs
sys.path.insert(0, TOOLS)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (TOOLS, os.environ.get("PYTHONPATH")) if p)
from mega_kws_tools.evaluation import ship_rule  # noqa: E402

KWS = "yes no up down left right on off stop go".split()

BASE = {
    "at": {"0.70": 79.2, "0.80": 74.7, "0.90": 63.2, "0.95": 48.6},
    "curve": {5: 23.7, 10: 37.5, 20: 48.5, 50: 63.0, 100: 75.4},
    "real": 92.4,
    "per": {k: 80.0 for k in KWS},
}


def write_run(root, name, fig):
    d = os.path.join(root, name, "validation")
    os.makedirs(d)
    per = {k: v / 100 for k, v in fig["per"].items()}
    per.update({"_silence_": 1.0, "_unknown_": 0.72})
    voices = {"clips": {
        "keyword_accuracy": 0.778, "rejected": {"_unknown_": 0.72},
        "keywords_at_rejection": {r: {"keyword_accuracy": a / 100} for r, a in fig["at"].items()},
        "per_label": per, "unknown_kinds": {"near_miss": {"clips": 10, "rejected": 0.6}}}}
    with open(os.path.join(d, "voices.json"), "w") as f:
        json.dump(voices, f)
    with open(os.path.join(d, "real.json"), "w") as f:
        json.dump({"clips": {"keyword_accuracy": fig["real"] / 100}}, f)
    with open(os.path.join(d, "curve.txt"), "w") as f:
        for b, r in fig["curve"].items():
            f.write(f"<= {b} per keyword-free hour: recall {r}% at threshold 0.9, smoothing 2 ({b} per hour)\n")
        f.write("chose threshold 0.9, smoothing 2: recall 0.2, 3 false alarms -> x\n")
    return os.path.join(root, name)


def variant(**changes):
    fig = copy.deepcopy(BASE)
    for key, value in changes.items():
        if key in ("at", "curve", "per"):
            fig[key].update(value)
        else:
            fig[key] = value
    return fig


def run_rule(root, shipped, cands):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = ship_rule.main([shipped] + cands)
    return rc, out.getvalue()


def verdicts(text):
    return {ln.split(":")[0]: ln.split("| ")[-1] for ln in text.splitlines() if "largest keyword fall" in ln}


def main():
    better = {5: 25.0, 10: 40.0}
    cases = {
        "good": (variant(curve=better), "PASS"),
        # (a): 1 point lower is allowed, more is not
        "a_edge": (variant(curve=better, at={"0.70": 78.2, "0.80": 73.7}), "PASS"),
        "a_fail": (variant(curve=better, at={"0.80": 73.6}), "(a) at 80% rejection"),
        # (b): strictly higher at both limits
        "b_equal": (variant(curve={5: 25.0, 10: 37.5}), "(b) pooled recall at <= 10"),
        "b_fail5": (variant(curve={5: 20.0, 10: 40.0}), "(b) pooled recall at <= 5"),
        # (c)
        "c_edge": (variant(curve=better, real=91.4), "PASS"),
        "c_fail": (variant(curve=better, real=91.3), "(c) real speakers"),
        # (d): 5 points lower is allowed, more is not
        "d_edge": (variant(curve=better, per={"go": 75.0}), "PASS"),
        "d_fail": (variant(curve=better, per={"left": 74.9}), "(d) left"),
        "best": (variant(curve={5: 30.0, 10: 38.0}), "PASS"),
    }
    with tempfile.TemporaryDirectory() as root:
        shipped = write_run(root, "shipped", BASE)
        paths = [write_run(root, name, fig) for name, (fig, _) in cases.items()]
        rc, text = run_rule(root, shipped, paths)
        assert rc == 0, text
        got = verdicts(text)
        for (name, (_, want)), path in zip(cases.items(), paths):
            v = got[path]
            ok = v == "PASS" if want == "PASS" else (v.startswith("fail") and want in v and v.count("(") == 1)
            assert ok, f"{name}: expected {want!r}, got {v!r}"
        # the passing candidate with the best pooled recall at <= 5 per hour
        assert text.strip().splitlines()[-1] == "ship: " + os.path.join(root, "best"), text
        # nothing passes: the shipped model stays
        rc, text = run_rule(root, shipped, [paths[list(cases).index("c_fail")]])
        assert rc == 0 and text.strip().endswith("ship: none (the shipped model stays)"), text
        # a run that was never validated is an error, not a verdict
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc, _ = run_rule(root, shipped, [os.path.join(root, "missing")])
        assert rc == 2 and "ship_rule:" in err.getvalue(), err.getvalue()
    print("ship_rule: all cases as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
