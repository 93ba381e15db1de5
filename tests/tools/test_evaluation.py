# SPDX-License-Identifier: Apache-2.0
"""Evaluation (tools/mega_kws_tools/evaluation/evaluate.py) and detection tuning on recordings
(tools/mega_kws_tools/evaluation/tune_detection.py): the rejection trade-off, recordings pooled and cut
in halves, and the false-alarm report, on a recording made of generated clips."""

import csv
import sys
import wave

import numpy as np
import pytest

from mega_kws_tools.data import make_stream as MS
from mega_kws_tools.evaluation import evaluate as E
from mega_kws_tools.evaluation import streamscore as S
from mega_kws_tools.evaluation import tune_detection as TD

def test_rejection_tradeoff_reads_keyword_accuracy_at_each_rejection_level():
    # keyword accuracy at each rejection level, read off a bias on the _unknown_ logit; a level
    # no bias reaches is None
    labels = ["yes", "no", "_silence_", "_unknown_"]
    YES, NO, SIL, UNK = range(4)
    rows = [(YES, [2.0, 0, 0, 0.5]),   # right until the bias passes 1.5
            (YES, [1.0, 0, 0, 0.8]),   # right until 0.2
            (NO, [0, 3.0, 0, 0]),      # right until 3
            (NO, [0, 0, 0, 1.0]),      # called _unknown_ from -1
            (UNK, [0, 1.0, 0, 0]),     # rejected from 1
            (UNK, [0.5, 0, 0, 0]),     # from 0.5
            (UNK, [20.0, 0, 0, 0]),    # never (the bias stops at 8)
            (SIL, [0, 0, 1.0, 0])]     # _silence_, then _unknown_: always rejected
    t = E.rejection_tradeoff([z for _, z in rows], [y for y, _ in rows], labels)
    assert E.rejection_tradeoff([[1.0, 0, 0]], [0], labels[:3]) == {}  # no _unknown_: nothing to bias
    assert list(t) == ["0.70", "0.80", "0.90", "0.95"], t
    assert t["0.80"] is None and t["0.90"] is None and t["0.95"] is None, t
    # 3 of 4 rejected (e, f, h) needs a bias above 1; below 1.5 a and c are still right, b and d lost
    assert t["0.70"]["keyword_accuracy"] == 0.5 and t["0.70"]["rejected"] == 0.75, t
    assert 1.0 < t["0.70"]["unknown_bias"] < 1.5, t


def write_recording(dataset, out, seed, name):
    """(wav, csv) paths, out/name.wav and .csv, of make_stream.py's 36 s recording of the validation
    voice with `seed`, as continue_real.sh makes the real validation recordings (--split validation
    --seed N)"""
    wav, lab = str(out / f"{name}.wav"), str(out / f"{name}.csv")
    argv = sys.argv
    sys.argv = ["make_stream.py", "--data", dataset, "--split", "validation", "--minutes", "0.6",
                "--out", wav, "--labels-out", lab, "--seed", str(seed)]
    try:
        assert MS.main() == 0
    finally:
        sys.argv = argv
    return wav, lab


def file_bytes(paths):
    return tuple(open(p, "rb").read() for p in paths)


@pytest.fixture(scope="module")
def recording(dataset, tmp_path_factory):
    """(wav, csv) of a 36 s recording of the validation voice: keywords, _unknown_ words and
    keyword-free stretches (make_stream.py)"""
    wav, lab = write_recording(dataset, tmp_path_factory.mktemp("stream"), 4, "va")
    rows = list(csv.DictReader(open(lab)))
    assert {r["kind"] for r in rows} == {"keyword", "unknown", "keyword_free"}, rows
    return wav, lab


def test_the_recordings_recipe_is_deterministic(dataset, recording, tmp_path):
    # the validation recordings are rebuilt, never committed: the same seed must give the same
    # file, byte for byte, in another folder and another process state; another seed another one
    first = file_bytes(recording)
    again = file_bytes(write_recording(dataset, tmp_path, 4, "again"))
    assert again[0] == first[0], "same seed, different audio"
    assert again[1] == first[1], "same seed, different labels"
    other = file_bytes(write_recording(dataset, tmp_path, 5, "other"))
    assert other[0] != first[0] and other[1] != first[1], "another seed gave the same recording"


def rounded(spans):  # (onset, offset[, label]) with the times to the microsecond
    return [tuple(round(v, 6) if isinstance(v, float) else v for v in span) for span in spans]


def test_each_half_of_one_recording_pooled_twice_is_that_recording(recording, model_like_trained):
    # --holdout-check tunes on one half and scores on the other: on one recording twice, each
    # half must be that recording (posteriors and labels)
    model = model_like_trained()
    hop = model.cfg.chunk_samples / model.cfg.sample_rate
    once = TD.pooled_posteriors(model, [recording], hop)
    twice = TD.pooled_posteriors(model, [recording] * 2, hop)
    assert once[1] and once[2], "a recording without keywords or keyword-free stretches"
    for half in TD.split_recording(*twice, hop, len(twice[0]) // 2):
        assert np.array_equal(half[0], once[0]), "posteriors of a half differ"
        assert rounded(half[1]) == rounded(once[1]), half[1]
        assert rounded(half[2]) == rounded(once[2]), half[2]
        assert half[3] == once[3] == [(0, model.cfg.window_chunks)], half[3]  # its own warm-up


def test_the_false_alarm_report_names_recording_stretch_and_clip_heard(recording):
    # false alarms placed by hand in one recording pooled twice: after the same _unknown_ word in
    # each copy, and at the start before any word; each names its recording, its keyword-free
    # stretch and the clip heard before it, and the repeated clip is counted (this recording's first
    # _unknown_ word is in a keyword-free stretch)
    wav, lab = recording
    rows = list(csv.DictReader(open(lab)))
    free = [(float(r["onset_s"]), float(r["offset_s"])) for r in rows if r["kind"] == "keyword_free"]
    u = next(r for r in rows if r["kind"] == "unknown")
    with wave.open(wav) as w:
        length = w.getnframes() // 4000 * 0.25
    t, quiet = float(u["offset_s"]) + 0.3, 0.1
    assert not any(float(r["onset_s"]) < quiet for r in rows if r["kind"] != "keyword_free")

    def mark(x):
        return ", keyword-free" if any(a <= x <= b for a, b in free) else ""
    _, free2 = S.read_stream_labels(lab)
    free2 = free2 + [(a + length, b + length) for a, b in free2]
    lines = TD.false_alarm_report([(t, "yes"), (t + length, "no"), (quiet, "up")], [recording] * 2, 0.25, 4000,
                                  free2)
    heard = f"heard before it: {u['detail']} ({u['source']})"
    assert lines[0].startswith(f"false alarm yes at {t:.2f} s (va.wav {t:.2f} s){mark(t)}: ") and heard in lines[0]
    assert lines[1].startswith(f"false alarm no at {t + length:.2f} s (va.wav {t:.2f} s){mark(t)}: "), lines
    assert heard in lines[1], lines
    assert lines[2] == f"false alarm up at 0.10 s (va.wav 0.10 s){mark(quiet)}: heard before it: no labelled word"
    n_free = 2 * bool(mark(t)) + bool(mark(quiet))
    assert lines[3] == f"3 false alarms, {n_free} in keyword-free stretches", lines
    assert mark(t), "the first _unknown_ word is not in a keyword-free stretch: no repeated clip to count"
    assert lines[4] == f"  2 of those after the same clip: {u['detail']} ({u['source']})" and len(lines) == 5
