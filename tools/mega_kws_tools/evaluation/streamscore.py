# SPDX-License-Identifier: Apache-2.0
"""Shared by tune_detection.py and evaluate.py: the detector (the same rules as
runtime/src/detector.cpp) and scoring of detections against a stream's labels.

The detector's start-of-stream rule, as the runtime's: the first `warmup` hops
of a stream (a model's window in chunks, the .mega file's window_chunks, which
Detector::config_for_model makes its warm-up) neither fire nor enter the
smoothing average, since while its window fills from a fresh start a model
reads a tone or a first syllable as a keyword; a detection's event hop may
still reach back into them, and finish() judges a stream that ended within its
warm-up over all its hops."""

import bisect
import csv
import math

import numpy as np

MATCH_AFTER_OFFSET_S = 1.25  # a window ending up to ~1 s after the word still holds it


def smoothed(probs, smoothing):
    """The mean of each hop's posteriors over the last `smoothing` hops (fewer at
    the start), as probs[max(0, h - smoothing + 1):h + 1].mean(axis=0) gives it,
    to the bit: summed oldest first, then divided by the count (the hops before
    the first add 0, which changes nothing). detect() passes the hops after the
    warm-up."""
    total = np.zeros_like(probs)
    for k in range(smoothing - 1, -1, -1):  # hop h - k, oldest first
        if k < len(probs):
            total[k:] = total[k:] + probs[:len(probs) - k]
    count = np.minimum(np.arange(1, len(probs) + 1), smoothing).astype(probs.dtype)
    return total / count[:, None]


def winner(sm, above, can_fire, armed):
    """The keyword that fires at a hop (the armed one above its threshold with the
    highest smoothed score), or None; updates `armed` as the runtime does: what
    is below re-arms, whatever is above must fall below before it fires again."""
    armed[~above] = True
    cand = np.nonzero(above & can_fire & armed)[0]
    if len(cand) == 0:
        return None
    armed[above] = False
    return int(cand[np.argmax(sm[cand])])


def event_hop(probs, hop, label, first):
    """Detection::event_hop: walking back from `hop` (not before `first`), the
    earliest hop of the run in which `label` was the most probable."""
    top = np.argmax(probs[first:hop + 1], axis=1)
    event = hop
    while event > first and top[event - 1 - first] == label:
        event -= 1
    return event


def detect(probs, thresholds, smoothing, refractory_hops, can_fire, warmup, flush=True):
    """probs: (hops, n) posteriors of one stream; warmup: the model's window in
    chunks (hops that never fire and stay out of the average). Returns
    [(hop, label, score, event_hop)]: the hop that fired, and the hop the word
    was heard in (the runtime's time_s is the end of that hop), which may lie
    in the warm-up, at most smoothing - 1 hops back (the ring's memory). After
    the warm-up the average covers the hops since it, up to `smoothing`. With
    flush (as the runtime does at the end of a stream, Detector::finish), the
    last hop is tried again with the smoothing window shrinking over the last
    hops, so a word that ends the recording is heard."""
    n = probs.shape[1]
    warm = min(warmup, len(probs))
    sm_all = smoothed(probs[warm:], smoothing)  # row i: hop warm + i
    above_all = sm_all >= thresholds
    # a hop where no keyword is above its threshold only re-arms the keywords
    busy = np.nonzero((above_all & can_fire).any(axis=1))[0]
    armed = np.ones(n, bool)
    suppressed_until = 0
    out = []
    last = -1
    for i in busy:
        if i > last + 1:
            armed[:] = True  # the hops in between had nothing above its threshold
        last = i
        hop = warm + int(i)
        best = winner(sm_all[i], above_all[i], can_fire, armed)
        if best is None or hop < suppressed_until:
            continue
        suppressed_until = hop + 1 + refractory_hops
        # the window starts where the warm-up ended or later: the walk back may go on to the ring's start
        out.append((hop, best, float(sm_all[i][best]), event_hop(probs, hop, best, max(0, hop - smoothing + 1))))
    if flush and len(probs):
        if last < len(probs) - warm - 1:
            armed[:] = True  # the last hop had nothing above its threshold
        out += finish(probs, thresholds, smoothing, can_fire, armed, len(probs) - 1 < suppressed_until, warmup)
    return out


def finish(probs, thresholds, smoothing, can_fire, armed, suppressed, warmup):
    """Detector::finish: the mean of the last `window` hops for window =
    min(hops after the warm-up, smoothing) - 1 down to 1, firing at the first
    that passes (at most one detection, at the last hop), with the arming and
    suppression of the hops before. A stream that ended within its warm-up (a
    clip no update judged) starts from all its hops, at most `smoothing`."""
    final = len(probs) - 1
    clip = len(probs) <= warmup
    hops = len(probs) if clip else len(probs) - warmup
    for window in range(min(hops, smoothing) - (0 if clip else 1), 0, -1):
        sm = (probs[final - window + 1:].astype(np.float64).sum(axis=0) / window).astype(probs.dtype)
        best = winner(sm, sm >= thresholds, can_fire, armed)
        if best is None or suppressed:
            continue
        return [(final, best, float(sm[best]), event_hop(probs, final, best, final - window + 1))]
    return []


def detect_streams(probs, starts, thresholds, smoothing, refractory_hops, can_fire):
    """detect() over recordings back to back in probs, each its own stream (a
    fresh detector, its warm-up, its finish) as the runtime scans them:
    starts [(first hop, warm-up hops)] in order, the first at hop 0 (a cut of
    a longer recording, its window already full, has warm-up 0). Returns the
    detections with their hops counted in probs."""
    ends = [a for a, _ in starts[1:]] + [len(probs)]
    out = []
    for (a, warmup), b in zip(starts, ends):
        out += [(h + a, l, s, e + a)
                for h, l, s, e in detect(probs[a:b], thresholds, smoothing, refractory_hops, can_fire, warmup)]
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
    """detections: [(time_s, label)]. Returns a dict of recall and false alarms.
    A detection takes the first keyword of the list (not yet taken, same label)
    with onset < t <= offset + MATCH_AFTER_OFFSET_S; it is a false alarm
    otherwise, counted in the keyword-free stretches if t lies in one."""
    used = [False] * len(keywords)
    false_alarms, fa_in_free = [], 0
    # with the keywords in onset order (as recordings list them) only those with
    # onset in (t - longest - MATCH_AFTER_OFFSET_S, t) can match: found by bisection
    onsets = [on for on, _, _ in keywords]
    ordered = all(a <= b for a, b in zip(onsets, onsets[1:]))
    reach = max((off - on for on, off, _ in keywords), default=0.0) + MATCH_AFTER_OFFSET_S
    free_sorted = sorted(free)
    free_ends = np.maximum.accumulate([b for _, b in free_sorted]) if free else []
    for t, label in detections:
        hit = None
        first = bisect.bisect_left(onsets, t - reach - 1.0) if ordered else 0  # 1 s to spare for rounding
        for i in range(first, len(keywords)):
            on, off, kw = keywords[i]
            if ordered and on >= t:
                break
            if not used[i] and kw == label and on < t <= off + MATCH_AFTER_OFFSET_S:
                hit = i
                break
        if hit is None:
            false_alarms.append((t, label))
            # some stretch with a <= t has b >= t: the latest end among them
            j = bisect.bisect_right(free_sorted, (t, math.inf))
            if j and free_ends[j - 1] >= t:
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
