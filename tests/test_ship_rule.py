#!/usr/bin/python3
"""tools/mega_kws_tools/evaluation/ship_rule.py on made-up run folders: a candidate that is better
everywhere passes, each part of the rule fails on its own when only its figure
is worse, the boundaries are where docs/models.md puts them, and the best
passing candidate by pooled recall at <= 5 false alarms per hour is named."""

import copy
import json
import os

import pytest

from mega_kws_tools.evaluation import ship_rule

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


def run_rule(capsys, shipped, cands):
    """ship_rule.py's exit status and what it printed"""
    capsys.readouterr()
    rc = ship_rule.main([shipped] + cands)
    out = capsys.readouterr()
    return rc, out.out, out.err


def verdicts(text):
    return {ln.split(":")[0]: ln.split("| ")[-1] for ln in text.splitlines() if "largest keyword fall" in ln}


BETTER = {5: 25.0, 10: 40.0}
CASES = {
    "good": (variant(curve=BETTER), "PASS"),
    # (a): 1 point lower is allowed, more is not
    "a_edge": (variant(curve=BETTER, at={"0.70": 78.2, "0.80": 73.7}), "PASS"),
    "a_fail": (variant(curve=BETTER, at={"0.80": 73.6}), "(a) at 80% rejection"),
    # (b): strictly higher at both limits
    "b_equal": (variant(curve={5: 25.0, 10: 37.5}), "(b) pooled recall at <= 10"),
    "b_fail5": (variant(curve={5: 20.0, 10: 40.0}), "(b) pooled recall at <= 5"),
    # (c)
    "c_edge": (variant(curve=BETTER, real=91.4), "PASS"),
    "c_fail": (variant(curve=BETTER, real=91.3), "(c) real speakers"),
    # (d): 5 points lower is allowed, more is not
    "d_edge": (variant(curve=BETTER, per={"go": 75.0}), "PASS"),
    "d_fail": (variant(curve=BETTER, per={"left": 74.9}), "(d) left"),
    "best": (variant(curve={5: 30.0, 10: 38.0}), "PASS"),
}


@pytest.fixture
def runs(tmp_path):
    """(the shipped run's folder, {case: candidate folder})"""
    shipped = write_run(str(tmp_path), "shipped", BASE)
    return shipped, {name: write_run(str(tmp_path), name, fig) for name, (fig, _) in CASES.items()}


def test_each_part_of_the_rule_fails_alone_and_the_best_passing_candidate_is_named(runs, capsys):
    shipped, paths = runs
    rc, text, _ = run_rule(capsys, shipped, list(paths.values()))
    assert rc == 0, text
    got = verdicts(text)
    for name, (_, want) in CASES.items():
        v = got[paths[name]]
        ok = v == "PASS" if want == "PASS" else (v.startswith("fail") and want in v and v.count("(") == 1)
        assert ok, f"{name}: expected {want!r}, got {v!r}"
    # the passing candidate with the best pooled recall at <= 5 per hour
    assert text.strip().splitlines()[-1] == "ship: " + paths["best"], text


def test_when_nothing_passes_the_shipped_model_stays(runs, capsys):
    shipped, paths = runs
    rc, text, _ = run_rule(capsys, shipped, [paths["c_fail"]])
    assert rc == 0 and text.strip().endswith("ship: none (the shipped model stays)"), text


def test_a_run_never_validated_is_an_error_not_a_verdict(runs, capsys, tmp_path):
    shipped, _ = runs
    rc, _, err = run_rule(capsys, shipped, [str(tmp_path / "missing")])
    assert rc == 2 and "ship_rule:" in err, err
