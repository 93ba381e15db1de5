#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Scoring keyword-free windows at their last hop (mega_kws_tools.evaluation.windows) with
the runtime (python/mega_kws over this build's libmega_kws) and the demo model: a
window whose last 1.25 s hold a sample clip is over that keyword's stored threshold
at its end and one of quiet noise is not; the last hop is the stream's own last
posterior, smoothed as streamscore.smoothed does; counts per word; a file of the
wrong shape is refused. Run by ctest (test windows_check) with MEGA_KWS_LIBRARY set."""

import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root
os.environ.setdefault("MEGA_KWS_LIBRARY", os.path.join(ROOT, "build", "libmega_kws.so"))

from mega_kws_tools.audio import SR, read_wav  # noqa: E402
from mega_kws_tools.evaluation import windows as wc  # noqa: E402
from mega_kws_tools.evaluation.runtime_posteriors import RuntimeModel  # noqa: E402
from mega_kws_tools.evaluation.streamscore import smoothed  # noqa: E402

DEMO = os.path.join(ROOT, "models", "sc10-demo.mega")


def windows():
    """[yes, quiet noise, left]: two seconds each, a sample clip from 0.75 s to 1.75 s (its word
    about a quarter second before the window's end: the bundled model's smoothing, 3 hops in
    q83d, averages the last 0.75 s, so a word further from the end scores below the strict
    stored thresholds)."""
    rng = np.random.default_rng(4)
    out = []
    for name in ("yes", None, "left"):
        w = np.round(rng.normal(0, 30, 2 * SR)).astype(np.int16)
        if name:
            x = read_wav(os.path.join(ROOT, "samples", name + ".wav"))[:SR]
            w[3 * SR // 4:3 * SR // 4 + len(x)] = x  # the clip's word lies in the last 1.25 s
        out.append(w)
    return np.stack(out)


def test_a_keyword_at_the_end_is_over_its_threshold_and_noise_is_not(tmp_path, capsys):
    audio = windows()
    path = str(tmp_path / "w.npz")
    np.savez(path, audio=audio, words=np.array(["yes", "noise", "left"]))
    assert wc.main(["--model", DEMO, path, "--json-out", str(tmp_path / "o.json")]) == 0
    out = capsys.readouterr().out
    assert "3 windows; a keyword over its stored threshold at the end: 2 (66.7%)" in out
    assert "yes 1/1, left 1/1" in out
    m = RuntimeModel(DEMO)
    p, sm = wc.last_hop(m, audio[0], 4)
    want = m.stream_posteriors(audio[0].astype(np.float32) / 32768)
    assert np.array_equal(p, want[-1]) and np.allclose(sm, want[-4:].mean(axis=0))
    assert np.array_equal(sm, smoothed(want, 4)[-1])


def test_the_threshold_decides(tmp_path):
    m = RuntimeModel(DEMO)
    audio = windows()
    never = wc.score(m, [1.01] * len(m.labels), 4, audio)  # no posterior reaches above 1
    always = wc.score(m, [0.0] * len(m.labels), 4, audio)
    assert never["over_threshold"] == 0 and always["over_threshold"] == 3
    assert never["posterior_over_half"] == always["posterior_over_half"] >= 2


def test_a_file_of_the_wrong_shape_is_refused(tmp_path, capsys):
    path = str(tmp_path / "bad.npz")
    np.savez(path, audio=np.zeros(10, np.float32))
    with pytest.raises(SystemExit):
        wc.main(["--model", DEMO, path])
    assert "needs `audio`" in capsys.readouterr().err


def test_the_stored_detection_is_the_detectors():
    import mega_kws
    m = RuntimeModel(DEMO)
    thresholds, smoothing = m.stored_detection()
    with mega_kws.Detector(m.model) as d:
        assert thresholds == list(d.thresholds) and smoothing == d.smoothing
    assert len(thresholds) == len(m.labels) and 0.5 < thresholds[m.labels.index("on")] <= 1.0
