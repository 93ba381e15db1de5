#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Python detector used for tuning (mega_kws_tools.evaluation.streamscore)
against the runtime's (runtime/src/detector.cpp, driven through the C API by
python/mega_kws's Detector over this build's libmega_kws): the same detections,
hop, label, event hop (the hop of time_s) and score within float32 rounding, on
the same logits. The demo model's window (4 chunks) is the warm-up of both.
Random logits over many seeds and settings, and by hand: a spike in the warm-up
that the runtime ignores, a keyword sustained from hop 0, and streams shorter
than the warm-up (judged by the flush).

Run by ctest (test streamscore_runtime) with MEGA_KWS_LIBRARY set; by hand:
/usr/bin/python3 -m pytest tests/tools/test_streamscore_runtime.py (default: build/)."""

import math
import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root
os.environ.setdefault("MEGA_KWS_LIBRARY", os.path.join(ROOT, "build", "libmega_kws.so"))

import mega_kws  # noqa: E402
from mega_kws_tools.evaluation import streamscore  # noqa: E402


@pytest.fixture(scope="module")
def demo():
    return mega_kws.Model(os.path.join(ROOT, "models", "sc10-demo.mega"))


def warmup_of(model):
    return model.window_samples // model.chunk_samples  # the .mega file's window_chunks


def softmax32(logits):
    """Posteriors as the runtime's detector keeps them: float32 exponentials,
    their sum in double, each quotient rounded to float32."""
    z = np.asarray(logits, np.float32)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.astype(np.float64).sum(axis=1, keepdims=True)).astype(np.float32)


def runtime_detections(model, logits, thresholds, smoothing, refractory_ms):
    """[(hop, label, score, event_hop)] of the C API's detector over logits, then its flush."""
    d = mega_kws.Detector(model, thresholds=thresholds, smoothing=smoothing, refractory_ms=refractory_ms)
    found = d.update(logits) if len(logits) else []
    hop_s = model.chunk_samples / model.sample_rate
    out = [(f.hop_index, f.label_index, f.score, round(f.time_s / hop_s) - 1) for f in found]
    # a session fed nothing: the flush is Detector::finish alone; its time is
    # the end of the session's audio (none here), so its event hop is not known
    return out + [(f.hop_index, f.label_index, f.score, None) for f in d.flush(mega_kws.Session(model))]


def python_detections(model, logits, thresholds, smoothing, refractory_ms):
    can_fire = np.array([not l.startswith("_") for l in model.labels])
    hop_ms = round(1000 * model.chunk_samples / model.sample_rate)
    return streamscore.detect(softmax32(logits), np.asarray(thresholds, np.float32), smoothing,
                              math.ceil(refractory_ms / hop_ms), can_fire, warmup_of(model))


def assert_same(model, logits, thresholds, smoothing, refractory_ms, what):
    a = runtime_detections(model, logits, thresholds, smoothing, refractory_ms)
    b = python_detections(model, logits, thresholds, smoothing, refractory_ms)
    unknown = [x[3] is None for x in a] + [False] * max(0, len(b) - len(a))
    b_seen = [y[:3] + (None,) if u else y for y, u in zip(b, unknown)]
    assert [x[:2] + x[3:] for x in a] == [x[:2] + x[3:] for x in b_seen], (what, a, b)
    for x, y in zip(a, b):
        assert y[2] == pytest.approx(x[2], rel=2e-7, abs=1e-7), (what, a, b)
    return b  # the same as the runtime's, with the event hops the runtime's flush cannot say here


def random_logits(rng, hops, n):
    """Words as runs: a label stays the most probable for a few hops at a time,
    by a random margin, over noise; keywords often from hop 0."""
    z = rng.normal(0, 1, (hops, n))
    h = 0
    while h < hops:
        run = int(rng.integers(1, 9))
        z[h:h + run, rng.integers(n)] += rng.uniform(0, 9)
        h += run + int(rng.integers(0, 4))
    return z.astype(np.float32)


def test_random_logits_give_the_runtimes_detections(demo):
    rng = np.random.default_rng(85)
    n, w = demo.n_classes, warmup_of(demo)
    assert w > 1, "the demo model's window should give a warm-up"
    fired = early = 0
    for seed in range(400):
        hops = int(rng.choice([rng.integers(0, w + 2), rng.integers(w + 2, 80)]))
        logits = random_logits(rng, hops, n)
        thresholds = rng.uniform(0.3, 0.97, n).astype(np.float32)
        smoothing = int(rng.integers(1, 7))
        refractory_ms = int(rng.choice([0, 250, 600, 1000, 3000]))
        found = assert_same(demo, logits, thresholds, smoothing, refractory_ms, (seed, hops, smoothing, refractory_ms))
        fired += len(found)
        early += sum(e < w for _, _, _, e in found)
    # the seeds reach what the rules are about: many detections, some heard in the warm-up
    assert fired > 200 and early > 10, (fired, early)


def keyword_logits(demo, hops, spans, level=12.0):
    """Logits with _silence_ ahead everywhere except `spans` [(first, end)], where 'yes' is."""
    z = np.zeros((hops, demo.n_classes), np.float32)
    z[:, demo.labels.index("_silence_")] = level
    for a, b in spans:
        z[a:b, demo.labels.index("_silence_")] = 0
        z[a:b, demo.labels.index("yes")] = level
    return z


def test_the_warm_up_spike_keyword_from_hop_0_and_short_streams(demo):
    w, yes = warmup_of(demo), demo.labels.index("yes")
    th = np.full(demo.n_classes, 0.9, np.float32)
    # a spike in the warm-up only: the runtime ignores it, and so must the tuning
    assert assert_same(demo, keyword_logits(demo, 20, [(0, w)]), th, 1, 1000, "spike") == []
    # said from hop 0: fires on the first hop after the warm-up, heard back in the warm-up
    for smoothing in (1, 3, 6):
        found = assert_same(demo, keyword_logits(demo, 20, [(0, w + 3)]), th, smoothing, 1000, "from 0")
        assert [(h, l, e) for h, l, _, e in found] == [(w, yes, max(0, w - smoothing + 1))], found
    # shorter than the warm-up: judged at its end over all its hops
    for hops in range(1, w + 1):
        found = assert_same(demo, keyword_logits(demo, hops, [(0, hops)]), th, 6, 1000, hops)
        assert [(h, l, e) for h, l, _, e in found] == [(hops - 1, yes, 0)], found


def test_tuning_on_the_runtimes_posteriors_matches_the_reference():
    """tune_detection --model: the runtime streaming a file (runtime_posteriors) gives the posteriors the
    PyTorch reference gives for its checkpoint (tune_detection --checkpoint), hop by hop."""
    from mega_kws_tools import model as mt
    from mega_kws_tools.evaluation import tune_detection
    from mega_kws_tools.evaluation.runtime_posteriors import RuntimeModel
    fixtures = os.path.join(ROOT, "tests", "fixtures", "data")
    reference, _, _ = mt.load_checkpoint(os.path.join(fixtures, "tiny_patch.pt"))  # no input scaling
    runtime = RuntimeModel(os.path.join(fixtures, "tiny_patch.mega"))
    assert (runtime.cfg.chunk_samples, runtime.cfg.window_chunks) == (reference.cfg.chunk_samples,
                                                                      reference.cfg.window_chunks)
    x = (0.3 * np.random.default_rng(5).standard_normal(23 * reference.cfg.chunk_samples + 5)).astype(np.float32)
    want = tune_detection.stream_posteriors(reference, x)
    got = tune_detection.stream_posteriors(runtime, x)
    assert got.shape == want.shape == (23, reference.cfg.n_classes)
    assert np.abs(got - want).max() < 1e-5 and want.std() > 1e-3
