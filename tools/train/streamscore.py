"""Shared by tune_detection.py and evaluate.py: the detector (the same rules as
runtime/src/detector.cpp) and scoring of detections against a stream's labels."""

import csv

import numpy as np

MATCH_AFTER_OFFSET_S = 1.25  # a window ending up to ~1 s after the word still holds it


def detect(probs, thresholds, smoothing, refractory_hops, can_fire):
    """probs: (hops, n) posteriors. Returns [(hop, label, score)]."""
    n = probs.shape[1]
    armed = np.ones(n, bool)
    suppressed_until = 0
    out = []
    for hop in range(len(probs)):
        sm = probs[max(0, hop - smoothing + 1):hop + 1].mean(axis=0)
        above = sm >= thresholds
        armed[~above] = True
        cand = np.nonzero(above & can_fire & armed)[0]
        if len(cand) == 0:
            continue
        best = cand[np.argmax(sm[cand])]
        armed[above] = False
        if hop < suppressed_until:
            continue
        suppressed_until = hop + 1 + refractory_hops
        out.append((hop, int(best), float(sm[best])))
    return out


def read_stream_labels(path):
    keywords, free = [], []
    with open(path) as f:
        for row in csv.DictReader(f):
            if row["kind"] == "keyword":
                keywords.append((float(row["onset_s"]), float(row["offset_s"]), row["label"]))
            elif row["kind"] == "keyword_free":
                free.append((float(row["onset_s"]), float(row["offset_s"])))
    return keywords, free


def score(detections, keywords, free):
    """detections: [(time_s, label)]. Returns a dict of recall and false alarms."""
    used = [False] * len(keywords)
    false_alarms, fa_in_free = [], 0
    for t, label in detections:
        hit = None
        for i, (on, off, kw) in enumerate(keywords):
            if not used[i] and kw == label and on < t <= off + MATCH_AFTER_OFFSET_S:
                hit = i
                break
        if hit is None:
            false_alarms.append((t, label))
            if any(a <= t <= b for a, b in free):
                fa_in_free += 1
        else:
            used[hit] = True
    free_hours = sum(b - a for a, b in free) / 3600.0
    return {
        "keywords": len(keywords), "detected": sum(used), "recall": sum(used) / max(1, len(keywords)),
        "false_alarms": len(false_alarms), "false_alarms_keyword_free": fa_in_free,
        "keyword_free_hours": free_hours,
        "fa_per_hour_keyword_free": fa_in_free / free_hours if free_hours else float("nan"),
        "missed": [keywords[i] for i in range(len(keywords)) if not used[i]],
        "false_alarm_list": false_alarms,
    }
