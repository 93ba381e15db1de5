#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""tools/mega_kws_tools/evaluation/streamscore.py (the Python twin of the runtime's detector, and
the scoring of detections against a recording's labels) against plain
per-hop and per-keyword reference loops written here: the same detections and
the same scores, to the bit, on random posteriors and labels, including
recordings shorter than the smoothing or the warm-up and keyword lists out of
time order. test_streamscore_runtime.py holds it against the runtime's own
detector."""

import numpy as np
import pytest

from mega_kws_tools.evaluation import streamscore


def event_reference(probs, hop, label, first):
    # Detection::event_hop: back from hop while the label stays the most probable, not before first
    while hop > first and np.argmax(probs[hop - 1]) == label:
        hop -= 1
    return hop


def detect_reference(probs, thresholds, smoothing, refractory_hops, can_fire, warmup):
    n = probs.shape[1]
    armed = np.ones(n, bool)
    suppressed_until = 0
    out = []
    for hop in range(warmup, len(probs)):  # the warm-up hops neither fire nor count
        sm = probs[max(warmup, hop - smoothing + 1):hop + 1].mean(axis=0)
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
        # the event may lie in the warm-up, as far back as the smoothing ring remembers
        out.append((hop, int(best), float(sm[best]), event_reference(probs, hop, best, max(0, hop - smoothing + 1))))
    # the end of the stream (Detector::finish): the last hop again, over the last 1..smoothing-1 hops
    # after the warm-up, or over up to `smoothing` hops of a stream that ended within it
    final = len(probs) - 1
    clip = len(probs) <= warmup
    for window in range(min(len(probs) - (0 if clip else warmup), smoothing) - (0 if clip else 1), 0, -1):
        sm = (probs[final - window + 1:].astype(np.float64).sum(axis=0) / window).astype(probs.dtype)
        above = sm >= thresholds
        armed[~above] = True
        cand = np.nonzero(above & can_fire & armed)[0]
        if len(cand) == 0:
            continue
        best = cand[np.argmax(sm[cand])]
        armed[above] = False
        if final < suppressed_until:
            continue
        out.append((final, int(best), float(sm[best]), event_reference(probs, final, best, final - window + 1)))
        break
    return out


def score_reference(detections, keywords, free):
    used = [False] * len(keywords)
    false_alarms, fa_in_free = 0, 0
    for t, label in detections:
        hit = next((i for i, (on, off, kw) in enumerate(keywords) if not used[i] and kw == label
                    and on < t <= off + streamscore.MATCH_AFTER_OFFSET_S), None)
        if hit is None:
            false_alarms += 1
            fa_in_free += any(a <= t <= b for a, b in free)
        else:
            used[hit] = True
    return sum(used), false_alarms, fa_in_free, [keywords[i] for i in range(len(keywords)) if not used[i]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hops", [0, 1, 3, 5000])
def test_smoothing_and_detection_match_the_reference_loops(dtype, hops):
    rng = np.random.default_rng(7 + hops)
    can_fire = np.array([True] * 10 + [False] * 2)
    # peaky posteriors, with stretches where one keyword stays high
    p = rng.dirichlet(np.full(12, 0.2), size=hops).astype(dtype)
    for smoothing in range(1, 7):
        want = np.stack([p[max(0, h - smoothing + 1):h + 1].mean(axis=0) for h in range(hops)]) \
            if hops else np.zeros((0, 12), dtype)
        got = streamscore.smoothed(p, smoothing)
        assert got.dtype == dtype and np.array_equal(got, want), (dtype, hops, smoothing)
        for thr in (0.3, 0.5, 0.8, 0.96):
            th = np.full(12, thr)
            th[3] = 0.4  # one keyword with its own threshold
            for refr in (0, 4):
                for warmup in (0, 1, 4, 7) if hops < 100 else (0, 4):  # short: the clips
                    a = detect_reference(p, th, smoothing, refr, can_fire, warmup)
                    b = streamscore.detect(p, th, smoothing, refr, can_fire, warmup)
                    assert a == b, (dtype, hops, smoothing, thr, refr, warmup, len(a), len(b))


def test_a_word_that_ends_the_stream_is_heard_when_flushed():
    can_fire = np.array([True, True, False])
    p = np.tile(np.array([0.0, 0.0, 1.0]), (6, 1))
    p[-2:] = [0.0, 1.0, 0.0]  # the keyword fills only the last two hops
    th = np.full(3, 0.9)
    assert streamscore.detect(p, th, 4, 0, can_fire, 0, flush=False) == []  # (0+0+1+1)/4 < 0.9
    assert streamscore.detect(p, th, 4, 0, can_fire, 0) == [(5, 1, 1.0, 4)]  # the last 2 hops alone
    p[-1] = [0.0, 0.0, 1.0]  # the last hop without it: windows of 3, 2 and 1 hops all fall short
    assert streamscore.detect(p, th, 4, 0, can_fire, 0) == []
    p[-3:] = [0.0, 1.0, 0.0]
    assert streamscore.detect(p, th, 3, 0, can_fire, 0) == [(5, 1, 1.0, 3)]  # fired on the way: no second one
    assert streamscore.detect(p, th, 4, 10, can_fire, 0) == [(5, 1, 1.0, 3)]


def test_the_warm_up_neither_fires_nor_smooths_and_a_clip_is_judged_at_its_end():
    can_fire = np.array([True, True, False])
    th = np.full(3, 0.9)
    p = np.tile(np.array([0.0, 0.0, 1.0]), (8, 1))
    p[:3] = [1.0, 0.0, 0.0]  # a keyword in the three warm-up hops only
    assert streamscore.detect(p, th, 1, 0, can_fire, 0) == [(0, 0, 1.0, 0)]
    assert streamscore.detect(p, th, 1, 0, can_fire, 3) == []
    p[:5] = [0.0, 1.0, 0.0]  # said from hop 0 on: fires after the warm-up, heard from the ring's first hop
    assert streamscore.detect(p, th, 2, 0, can_fire, 3) == [(3, 1, 1.0, 2)]
    assert streamscore.detect(p, th, 6, 0, can_fire, 3) == [(3, 1, 1.0, 0)]
    # a clip within its warm-up: finish() over all its hops (not one fewer)
    assert streamscore.detect(p[:3], th, 3, 0, can_fire, 3) == [(2, 1, 1.0, 0)]
    assert streamscore.detect(p[:3], th, 2, 0, can_fire, 5) == [(2, 1, 1.0, 1)]


def test_scores_match_the_reference_loop():
    rng = np.random.default_rng(7)
    for trial in range(200):
        n = int(rng.integers(0, 200))
        onsets = np.sort(rng.uniform(0, 300, n))
        keywords = [(float(o), float(o + rng.uniform(0.1, 1.2)), str(rng.choice(list("abc")))) for o in onsets]
        if trial % 4 == 1:
            keywords = keywords[::-1]  # not in time order: the plain search
        if trial % 4 == 2 and n > 2:
            keywords[1] = (keywords[0][0], keywords[1][1], keywords[1][2])  # equal onsets
        free = [(float(a), float(a + rng.uniform(0, 15))) for a in rng.uniform(0, 300, int(rng.integers(0, 15)))]
        dets = [(float(t), str(rng.choice(list("abc")))) for t in rng.uniform(-1, 302, int(rng.integers(0, 300)))]
        dets += [(keywords[i][1] + streamscore.MATCH_AFTER_OFFSET_S, keywords[i][2]) for i in range(0, n, 7)]
        dets += [(a, "a") for a, _ in free[:3]] + [(b, "b") for _, b in free[:3]]  # on a stretch's edges
        dets.sort()
        r = streamscore.score(dets, keywords, free)
        want = score_reference(dets, keywords, free)
        got = (r["detected"], r["false_alarms"], r["false_alarms_keyword_free"], r["missed"])
        assert got == want, (trial, got[:3], want[:3])

