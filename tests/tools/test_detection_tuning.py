# SPDX-License-Identifier: Apache-2.0
"""Detection tuning (mega_kws_tools.evaluation.tune_detection) per keyword, the trade-off
it writes for the model card, and the card's pictures (mega_kws_tools.evaluation.plot_card),
on made-up posteriors: a loud keyword whose false alarms force a high threshold
and a quiet one that needs a low one.
Runs with /usr/bin/python3 -m pytest tests/test_detection_tuning.py."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mega_kws_tools.evaluation import tune_detection as td

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root

LABELS = ["yes", "no", "_silence_", "_unknown_"]
HOP_S = 0.25
STARTS = [(0, 4)]  # one recording, with a 1 s window's warm-up (4 hops)


def recording(seed=1, hops=2000):
    """Posteriors of a made-up recording: 'yes' said loudly (0.97) and 'no'
    quietly (0.6) in the first half; the second half keyword-free, with
    'yes'-like spikes of 0.93 there (a high 'yes' threshold avoids them)."""
    rng = np.random.default_rng(seed)
    p = np.tile([0.02, 0.02, 0.9, 0.06], (hops, 1))
    keywords, free = [], [(hops // 2 * HOP_S, hops * HOP_S)]
    for k, h in enumerate(range(20, hops // 2 - 20, 40)):
        label, level = ("yes", 0.97) if k % 2 == 0 else ("no", 0.6)
        row = np.full(4, (1 - level) / 3)
        row[LABELS.index(label)] = level
        p[h:h + 3] = row
        keywords.append((h * HOP_S, (h + 3) * HOP_S, label))
    for h in rng.choice(np.arange(hops // 2 + 5, hops - 5), size=30, replace=False):
        p[h] = [0.93, 0.02, 0.02, 0.03]
    return p / p.sum(axis=1, keepdims=True), keywords, free


def test_per_keyword_thresholds_meet_the_limit_and_beat_one_threshold():
    probs, keywords, free = recording()
    limit = 2.0  # per keyword-free hour: in 0.07 keyword-free hours, no false alarm at all
    key, smoothing, thresholds, r = td.pick_per_keyword(probs, STARTS, LABELS, HOP_S, keywords, free, limit)
    assert key[0] == 1 and r["fa_per_hour_keyword_free"] <= limit
    assert thresholds[2:] == [1.0, 1.0]  # labels that never fire
    assert all(0 < t <= 1 for t in thresholds)
    assert thresholds[0] > 0.93 > 0.6 >= thresholds[1]  # yes above its spikes, no at or below its level
    # the stored thresholds give the score reported
    again = td.run_detector(probs, STARTS, LABELS, np.array(thresholds), smoothing,
                            td.refractory_in_hops(1000, HOP_S), HOP_S, keywords, free)
    assert again["recall"] == r["recall"] and again["false_alarms"] == r["false_alarms"]
    # one shared threshold must stay above the spikes and so loses every quiet 'no'
    _, _, _, shared = td.tune(probs, STARTS, LABELS, HOP_S, keywords, free, limit)
    assert r["recall"] == pytest.approx(1.0) and shared["recall"] <= 0.5 + 1e-9


def test_the_finds_per_keyword_count_what_a_setting_finds_and_misses():
    probs, keywords, free = recording()
    refr = td.refractory_in_hops(1000, HOP_S)
    said = {k: sum(1 for *_, l in keywords if l == k) for k in ("yes", "no")}
    # 'no' (0.6) shut out above its level, 'yes' (0.97) found: what the ship rule's (f) reads
    r = td.run_detector(probs, STARTS, LABELS, np.array([0.95, 0.7, 1.0, 1.0]), 1, refr, HOP_S, keywords, free)
    assert td.found_per_keyword(keywords, r["missed"]) == {"no": [0, said["no"]], "yes": [said["yes"]] * 2}
    r = td.run_detector(probs, STARTS, LABELS, np.array([0.95, 0.5, 1.0, 1.0]), 1, refr, HOP_S, keywords, free)
    assert td.found_per_keyword(keywords, r["missed"]) == {"no": [said["no"]] * 2, "yes": [said["yes"]] * 2}


def budget_trap(hops=1200):
    """Posteriors where the step that gains most uses up the false-alarm budget: 'yes' finds
    5 words at 0.71 but fires on 2 keyword-free spikes of 0.75; 'no' and 'up' find 4 words
    each, with one spike each. With 2 false alarms allowed, 'no' and 'up' find 8, 'yes' 5."""
    labels = ["yes", "no", "up", "_silence_", "_unknown_"]
    p = np.tile([0.02, 0.02, 0.02, 0.9, 0.04], (hops, 1))
    keywords, free = [], [(hops // 2 * HOP_S, hops * HOP_S)]

    def event(h, label, level):
        row = np.full(5, (1 - level) / 4)
        row[labels.index(label)] = level
        p[h:h + 3] = row  # three hops: the smoothing treats words and spikes alike
    words = ["yes"] * 5 + ["no"] * 4 + ["up"] * 4
    for i, label in enumerate(words):
        event(40 + 40 * i, label, 0.71)
        keywords.append(((40 + 40 * i) * HOP_S, (43 + 40 * i) * HOP_S, label))
    for i, label in enumerate(["yes", "yes", "no", "up"]):
        event(hops // 2 + 40 + 100 * i, label, 0.75)
    return labels, p, keywords, free


def test_per_keyword_greedy_does_not_spend_the_budget_on_one_step():
    labels, probs, keywords, free = budget_trap()
    limit = 2.5 / (sum(b - a for a, b in free) / 3600)  # 2 keyword-free false alarms allowed, not 3
    th, r = td.tune_per_keyword(probs, STARTS, labels, HOP_S, keywords, free, limit, 1, by="gain")
    assert r["detected"] == 5 and th[0] <= 0.71 < min(th[1:3]), (th, r)  # 'yes' first: the budget is gone
    th, r = td.tune_per_keyword(probs, STARTS, labels, HOP_S, keywords, free, limit, 1, by="gain_per_false_alarm")
    assert r["detected"] == 8 and r["false_alarms_keyword_free"] == 2 and th[0] > 0.75, (th, r)
    # the tuning takes the better of the two ways
    key, smoothing, thresholds, r = td.pick_per_keyword(probs, STARTS, labels, HOP_S, keywords, free, limit)
    assert key[0] == 1 and r["detected"] == 8 and thresholds[0] > 0.75 >= 0.71 >= max(thresholds[1:3])
    with pytest.raises(ValueError, match="gain_per_false_alarm"):
        td.tune_per_keyword(probs, STARTS, labels, HOP_S, keywords, free, limit, 1, by="recall")


def test_no_default_below_even_odds():
    # 'no' said at 0.45: a threshold of 0.44 would find it without a false alarm, but a
    # default under MIN_DEFAULT would leave --sensitivity no room, so 'no' stays unfound
    probs, keywords, free = recording()
    no = LABELS.index("no")
    quiet = probs[:, no] > 0.5
    probs[quiet] = [0.05, 0.45, 0.05, 0.45]
    key, smoothing, thresholds, r = td.pick_per_keyword(probs, STARTS, LABELS, HOP_S, keywords, free, 2.0)
    assert min(thresholds) >= td.MIN_DEFAULT and thresholds[no] > 0.45
    assert r["recall"] == pytest.approx(0.5)  # the loud 'yes' only
    rows = td.sweep(probs, STARTS, LABELS, HOP_S, keywords, free)
    assert min(thr for _, thr, _ in rows) < td.MIN_DEFAULT  # the curve still sees the low end
    assert td.pick(rows, 1000.0)[2] >= td.MIN_DEFAULT


def test_each_pooled_recording_has_its_warm_up_and_detections_are_timed_when_heard():
    # two recordings back to back, each opening with a 'yes' spike while the model's window
    # fills: the runtime scans each as its own stream and ignores the spike in its warm-up
    probs, keywords, free = recording(hops=200)
    probs[:3] = [0.97, 0.01, 0.01, 0.01]
    length = len(probs) * HOP_S
    probs = np.concatenate([probs, probs])
    keywords += [(a + length, b + length, l) for a, b, l in keywords]
    free += [(a + length, b + length) for a, b in free]
    th = np.full(4, 0.95)  # above the keyword-free stretch's 0.93 spikes

    def run(starts):
        return td.run_detector(probs, starts, LABELS, th, 3, 4, HOP_S, keywords, free)
    both = run([(0, 4), (200, 4)])
    assert both["false_alarms"] == 0 and both["detected"] == len(keywords) // 2, both  # every loud 'yes'
    assert run([(0, 4)])["false_alarm_list"] == [(length + HOP_S, "yes")]  # one stream: the second spike fires
    # without a warm-up each spike fires at its third hop; it is timed at the end of its first,
    # as keyword_spotter scan reports time_s
    assert run([(0, 0), (200, 0)])["false_alarm_list"] == [(HOP_S, "yes"), (length + HOP_S, "yes")]


def test_trade_off_is_the_upper_left_frontier():
    probs, keywords, free = recording()
    rows = td.sweep(probs, STARTS, LABELS, HOP_S, keywords, free)
    key, smoothing, thr, r = td.pick(rows, 5.0)
    setting = {"thresholds": [thr] * 4, "smoothing_hops": smoothing}
    t = td.trade_off(rows, r, setting)
    fa = [p[0] for p in t["frontier"]]
    rec = [p[1] for p in t["frontier"]]
    assert fa == sorted(fa) and all(b > a for a, b in zip(rec, rec[1:]))
    # no setting of the sweep lies above the frontier at its false-alarm rate
    for _, _, s in rows:
        best_at = max([p[1] for p in t["frontier"] if p[0] <= s["fa_per_hour_keyword_free"] + 1e-9], default=0)
        assert s["recall"] <= best_at + 1e-4
    assert t["chosen"]["recall"] == round(r["recall"], 4) and t["keywords"] == len(keywords)
    assert t["keyword_free_hours"] == round(sum(b - a for a, b in free) / 3600, 4)


def test_plot_card_draws_both_pictures(tmp_path):
    pytest.importorskip("matplotlib", reason="python3-matplotlib (scripts/setup.sh installs it)")
    probs, keywords, free = recording()
    rows = td.sweep(probs, STARTS, LABELS, HOP_S, keywords, free)
    key, smoothing, thr, r = td.pick(rows, 5.0)
    curve = td.trade_off(rows, r, {"thresholds": [thr] * 4, "smoothing_hops": smoothing})
    with open(tmp_path / "curve.json", "w") as f:
        json.dump(curve, f)
    with open(tmp_path / "eval.json", "w") as f:
        json.dump({"clips": {"labels": LABELS, "confusion": [[9, 1, 0, 0], [2, 7, 0, 1], [0, 0, 0, 0],
                                                               [0, 1, 0, 19]]}}, f)
    out = tmp_path / "img"
    res = subprocess.run([sys.executable, "-m", "mega_kws_tools.evaluation.plot_card",
                          "--curve", str(tmp_path / "curve.json"), "--confusion", str(tmp_path / "eval.json"),
                          "--out-dir", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    for name in ("detection_curve.png", "confusion.png"):
        with open(out / name, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    res = subprocess.run([sys.executable, "-m", "mega_kws_tools.evaluation.plot_card",
                          "--curve", str(tmp_path / "missing.json"), "--confusion", str(tmp_path / "eval.json"),
                          "--out-dir", str(out)], capture_output=True, text=True)
    assert res.returncode == 1 and "missing.json" in res.stderr
