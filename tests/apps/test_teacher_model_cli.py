# SPDX-License-Identifier: Apache-2.0
"""The second bundled model, models/sc10-teacher.mega (issue 83 item 4b: Mega
layers on the pretrained teacher's melspectrogram and speech embedding), as a
user runs it: it loads, names its front end, passes its self-test, classifies
each one-keyword sample clip as its keyword, and scan finds each keyword of
samples/commands.wav once, where its labels put it, with no other detection.

Run by ctest (test teacher_model_cli) with MEGA_KWS_CLI set; by hand it takes
the source tree's build/keyword_spotter."""

import csv
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root
CLI = os.environ.get("MEGA_KWS_CLI", os.path.join(ROOT, "build", "keyword_spotter"))
MODEL = os.path.join(ROOT, "models", "sc10-teacher.mega")
SAMPLES = os.path.join(ROOT, "samples")
MATCH_AFTER_OFFSET_S = 1.25  # evaluation.streamscore's: a detection up to this long after the word holds it


def run(*args):
    out = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_info_and_self_test():
    info = run("info", "-m", MODEL)
    assert "the teacher's melspectrogram and speech embedding" in info and "schema version   6" in info, info
    assert "0.960 s at 16000 Hz (and the 0.742 s before it" in info, info  # 11872 samples of context
    assert "self-test passed" in run("selftest", "-m", MODEL)


def test_each_sample_clip_is_its_keyword():
    clips = sorted(f for f in os.listdir(SAMPLES) if f.endswith(".wav") and f != "commands.wav")
    assert len(clips) == 10
    rows = [json.loads(line) for line in run("classify", "--json", "-m", MODEL,
                                             *(os.path.join(SAMPLES, c) for c in clips)).splitlines()]
    assert [r["label"] for r in rows] == [c[:-4] for c in clips], rows


def test_scan_finds_each_keyword_of_the_recording_once():
    with open(os.path.join(SAMPLES, "commands.csv"), newline="") as f:
        words = [(float(r["onset_s"]), float(r["offset_s"]), r["label"]) for r in csv.DictReader(f)]
    rows = [json.loads(line) for line in run("scan", "--json", "-m", MODEL,
                                             os.path.join(SAMPLES, "commands.wav")).splitlines()]
    dets = [(r["time_s"], r["label"]) for r in rows if r["type"] == "detection"]
    assert len(dets) == len(words), dets
    for (t, label), (onset, offset, word) in zip(dets, words):
        assert label == word and onset < t <= offset + MATCH_AFTER_OFFSET_S, (t, label, onset, offset, word)
