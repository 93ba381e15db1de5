#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The checks tests/tools/test_train_smoke.sh makes of what the training tools write
(losses, checkpoints, evaluations, generated data, detection settings), and
the checkpoints it edits: one function per check, run as
`train_smoke_checks.py NAME ARG...` (argv: NAME, then the arguments); a failed
check raises AssertionError or exits non-zero, saying what it found."""

import csv
import json
import os
import re
import sys

# numpy and torch are imported by the checks that use them: most need neither, and
# torch takes seconds to import


def loss_falls(argv):
    """argv: NAME, losses.txt, the run's steps, and what to call the run in the messages (optional)."""
    what = argv[3] + " " if len(argv) > 3 else ""
    loss = [float(l.split()[1]) for l in open(argv[1])]
    first, last = sum(loss[:10]) / 10, sum(loss[-10:]) / 10
    print(f"{what}loss {first:.3f} -> {last:.3f}")
    assert len(loss) == int(argv[2]) and last < 0.9 * first, f"{what}loss did not decrease"


def extra_data_doubles(argv):
    n = [re.search(r"data: (\d+) training, (\d+) validation", open(p).read()).groups() for p in argv[1:3]]
    assert int(n[1][0]) == 2 * int(n[0][0]), f"--extra-data: {n[1][0]} training clips, expected twice {n[0][0]}"
    assert int(n[1][1]) == 2 * int(n[0][1]), f"--extra-val: {n[1][1]} validation clips, expected twice {n[0][1]}"


def weights_loaded(argv):
    fresh = [float(l.split()[1]) for l in open(argv[1])][:3]
    tuned = [float(l.split()[1]) for l in open(argv[2])][:3]
    assert sum(tuned) < 0.9 * sum(fresh), f"{argv[3]}: first losses {tuned} vs {fresh} from fresh weights"


def rejection_levels_agree(argv):
    a, b = (json.load(open(p))["clips"]["keywords_at_rejection"] for p in argv[1:3])
    assert a.keys() == b.keys() and all((a[k] is None) == (b[k] is None) for k in a), (a, b)


def weight_average_kept(argv):
    import torch
    best, last = (torch.load(f"{argv[1]}/{n}.pt") for n in ("best", "last"))
    avg = last["weight_average"]
    assert avg["n"] == 20 and best["step"] == 20, (avg["n"], best["step"])
    assert all(torch.equal(v, avg["avg"][k]) for k, v in best["model"].items()), "best.pt is not the average"
    assert any(not torch.equal(v, last["model"][k]) for k, v in best["model"].items()), "the average is the weights"
    print("--weight-average: best.pt holds the average")


def soup_is_weighted_mean(argv):
    import torch
    a, b, s = (torch.load(p)["model"] for p in argv[1:4])
    floats = [k for k, v in a.items() if v.is_floating_point()]
    assert floats and any(not torch.equal(a[k], b[k]) for k in floats), "the two runs have the same weights"
    for k, v in s.items():
        assert v.dtype == a[k].dtype, k
        if v.is_floating_point():
            assert torch.allclose(v.double(), (a[k].double() + 3 * b[k].double()) / 4, rtol=1e-6, atol=1e-7), k
        else:
            assert torch.equal(v, a[k]), k
    print(f"soup.py: {len(floats)} tensors averaged 1:3")


def make_mismatched_checkpoints(argv):
    import torch
    ck = torch.load(argv[1])
    torch.save(dict(ck, config=dict(ck["config"], n_layers=ck["config"]["n_layers"] + 1)), argv[2])
    torch.save(dict(ck, labels=list(reversed(ck["labels"]))), argv[3])


def greedy_soup(argv):
    import torch
    log = open(argv[1]).read()
    score = {m[0]: float(m[1]) for m in re.findall(r"^soup.py: (\S+\.pt): ([0-9.]+)$", log, re.M)}
    assert len(score) == 3, log
    kept = re.search(r"^soup.py: greedy soup of \d+: (.*) \(([0-9.]+)\)$", log, re.M)
    names = kept[1].split()
    assert names[0] == max(score, key=score.get) and float(kept[2]) >= max(score.values()), log
    got, parts = torch.load(argv[2])["model"], [torch.load(n)["model"] for n in names]
    for k, v in got.items():
        if v.is_floating_point():
            assert torch.allclose(v.double(), sum(p[k].double() for p in parts) / len(parts), rtol=1e-6, atol=1e-7), k
    print(f"soup.py --greedy: kept {len(names)} of 3")


def splices_listed(argv):
    rows = list(csv.DictReader(open(os.path.join(argv[1], "splices.csv"))))
    listed = open(os.path.join(argv[1], "validation_list.txt")).read().split()
    assert len(rows) == 20 and listed == [r["clip"] for r in rows], (len(rows), listed[:3])
    assert all(r["clip"].startswith("halfword/") and os.path.getsize(os.path.join(argv[1], r["clip"])) == 32044
               for r in rows)
    assert {r["kept"] for r in rows} == {"onset", "coda"} and len({r["keyword"] for r in rows}) == 10
    print("make_splices: 20 half-keyword clips")


def halfwords_evaluated(argv):
    h = json.load(open(argv[1]))["clips"]["halfwords"]
    assert len(h) == 20 and all(r["clips"] == 1 for r in h.values()), h
    assert all(0 <= r["called_the_keyword"] <= r["called_a_keyword"] <= 1 for r in h.values()), h


def missing_clip_counted(argv):
    c = json.load(open(argv[1]))["clips"]
    assert c["errors"] == 1 and c["clips"] == 19, (c["errors"], c["clips"])


def unknown_words_reported(argv):
    c = json.load(open(argv[1]))["clips"]
    u, words = c["labels"].index("_unknown_"), c["unknown_words"]
    row = c["confusion"][u]
    kw = [i for i, l in enumerate(c["labels"]) if not l.startswith("_")]
    assert words and sum(r["clips"] for r in words.values()) == sum(row), (words, row)
    assert round(sum(r["called_a_keyword"] * r["clips"] for r in words.values())) == sum(row[i] for i in kw), (words, row)
    assert all((r["most_called"] in c["labels"]) == (r["called_a_keyword"] > 0) for r in words.values()), words
    # pooled by kind of word, the same clips and the same rejections
    kinds = c["unknown_kinds"]
    assert set(kinds) <= {"speech_commands", "near_miss", "other"} and kinds, kinds
    assert sum(r["clips"] for r in kinds.values()) == sum(row), (kinds, row)
    assert round(sum((1 - r["rejected"]) * r["clips"] for r in kinds.values())) == sum(row[i] for i in kw), kinds
    # per noise condition of the manifest: every keyword clip once, the same keywords right
    noise = c["per_noise"]
    assert noise, "no keyword clips with a manifest row"
    assert sum(r["clips"] for r in noise.values()) == sum(sum(c["confusion"][i]) for i in kw), noise
    assert round(sum(r["keyword_accuracy"] * r["clips"] for r in noise.values())) == sum(c["confusion"][i][i] for i in kw)
    assert round(sum(r["called_unknown"] * r["clips"] for r in noise.values())) == sum(c["confusion"][i][u] for i in kw)
    print(f"evaluate.py: {len(words)} _unknown_ words, {sum(row[i] for i in kw)} clips called a keyword")


def hard_examples_mined(argv):
    import numpy as np
    z = np.load(argv[1])
    rows = list(csv.DictReader(open(argv[2])))
    kws = [(float(r["onset_s"]), float(r["offset_s"]), r["label"]) for r in rows if r["kind"] == "keyword"]
    labels, times = z["labels"].tolist(), z["times_s"]
    assert z["audio"].shape == (len(labels), 32000) and z["audio"].dtype == np.int16
    neg = [t for l, t in zip(labels, times) if l == "_unknown_"]
    pos = [(l, t) for l, t in zip(labels, times) if l != "_unknown_"]
    assert neg and pos, f"{len(neg)} negatives, {len(pos)} positives"
    # a negative's window (the last second up to t) holds no part of any keyword
    assert all(not (on < t + 0.3 and off > t - 1.0) for t in neg for on, off, _ in kws)
    # a positive's window holds its whole keyword
    assert all(any(k == l and on >= t - 1.0 and off <= t for on, off, k in kws) for l, t in pos)
    print(f"mine_hard: {len(neg)} negatives, {len(pos)} positives")


def once_plays_each_once(argv):
    played = open(argv[1]).read().split()
    words = [r["source"] for p in argv[2:] for r in csv.DictReader(open(p)) if r["kind"] in ("keyword", "unknown")]
    assert words and sorted(words) == sorted(played), "the played list is not the recordings' words"
    assert len(set(words)) == len(words), "a clip was played twice"
    print(f"--once: {len(words)} clips, none twice")


def validation_only_split(argv):
    rows = list(csv.DictReader(open(os.path.join(argv[1], "manifest.csv"))))
    assert len(rows) == 14 and all(r["split"] == "validation" for r in rows), [(r["path"], r["split"]) for r in rows]
    assert all(int(r["path"].split("_")[-3].lstrip("n")) >= 12 for r in rows), [r["path"] for r in rows]


def tuned_on_two_streams(argv):
    a, b = (json.load(open(p)) for p in argv[1:3])
    assert b["tuned_on"]["stream"] == "va.wav + va.wav", b["tuned_on"]
    assert a["thresholds"] == b["thresholds"] and a["smoothing_hops"] == b["smoothing_hops"], (a, b)
    ta, tb = a["tuned_on"], b["tuned_on"]
    assert abs(ta["recall"] - tb["recall"]) < 1e-9 and tb["false_alarms"] == 2 * ta["false_alarms"], (ta, tb)
    assert abs(ta["fa_per_hour_keyword_free"] - tb["fa_per_hour_keyword_free"]) < 1e-6, (ta, tb)
    print("tune_detection: recordings pooled")


def curve_matches_tuning(argv):
    rows = re.findall(r"<= (\d+) per keyword-free hour: recall ([\d.]+)% at threshold ([\d.]+), smoothing (\d)",
                      open(argv[1]).read())
    assert [int(r[0]) for r in rows] == [5, 10, 20, 50, 100], rows
    recall = [float(r[1]) for r in rows]
    assert recall == sorted(recall), recall
    det = json.load(open(argv[2]))
    assert abs(recall[3] - 100 * det["tuned_on"]["recall"]) < 0.051 and int(rows[3][3]) == det["smoothing_hops"], (rows, det)
    print("tune_detection --curve:", recall)


def holdout_halves(argv):
    a = json.load(open(argv[1]))
    rows = [l for l in open(argv[2]) if l.startswith("| first half") or l.startswith("| second half")]
    assert len(rows) == 2, open(argv[2]).read()
    for row in rows:
        m = re.match(r"\| \w+ half \| ([0-9.]+), smoothing (\d); ([0-9.]+)%, ([0-9.]+) \| .*; ([0-9.]+)%, ([0-9.]+) \|$", row.strip())
        assert m, row
        assert abs(float(m[1]) - a["thresholds"][0]) < 1e-9 and int(m[2]) == a["smoothing_hops"], (row, a)
        t = a["tuned_on"]
        assert abs(float(m[3]) - round(100 * t["recall"], 1)) < 0.051, (row, t)
        assert abs(float(m[4]) - round(t["fa_per_hour_keyword_free"], 1)) < 0.051, (row, t)
    print("tune_detection: holdout check")


def label_smoothing_raises_loss(argv):
    plain, smoothed = (float(open(p).readline().split()[1]) for p in argv[1:3])
    assert smoothed > plain + 0.05, f"--label-smoothing 0.5: first loss {smoothed}, without {plain}"
    print(f"--label-smoothing: first loss {plain:.3f} -> {smoothed:.3f} with 0.5")


def same_confusion(argv):
    """The evaluations argv[1] and argv[2] (evaluate.py --json-out) have the same confusion matrix."""
    a, b = (json.load(open(p))["clips"]["confusion"] for p in argv[1:3])
    assert a == b, (a, b)


def clips_without_errors(argv):
    """The evaluation argv[1] classified some clips and failed on none."""
    c = json.load(open(argv[1]))["clips"]
    assert c["clips"] > 0 and c["errors"] == 0, c


def best_key_is_stream_ranked(argv):
    """The checkpoint argv[1] carries its best_key: three parts, the first 0 or 1."""
    import torch
    k = torch.load(argv[1])["best_key"]
    assert len(k) == 3 and k[0] in (0, 1), k


if __name__ == "__main__":
    globals()[sys.argv[1]](sys.argv[1:])  # NAME ARG...: the check NAME, given argv = [NAME, ARG...]
