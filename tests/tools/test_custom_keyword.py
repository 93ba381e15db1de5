#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 84: `python3 -m mega_kws_tools.custom`, a keyword model from text.

End to end on a tiny budget (two voices, a few renderings, a hundred steps, no
real data): stopped after a stage, run again, it resumes and writes a model
that the runtime loads, self-tests and in which it detects the keyword said by
a voice; bad keyword text is refused with one line. The text functions
(validation, near misses, keyword-free stretches) are checked on their own."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mega_kws_tools.audio import write_wav
from mega_kws_tools.custom import keywords as kw
from mega_kws_tools.custom import realdata as rd
from mega_kws_tools.custom import render as rn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root
CLI = os.environ.get("MEGA_KWS_CLI", os.path.join(ROOT, "build", "keyword_spotter"))
TINY = ["--front-end", "mega", "--renders", "8", "--copies", "2", "--held-out", "3", "--voices", "3", "--near", "6", "--steps", "300",
        "--threads", "2"]


def custom(args, tmp_path):
    cmd = [sys.executable, "-m", "mega_kws_tools.custom", "--data", str(tmp_path / "no-data"),
           "--keyword-spotter", CLI] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("keywords,message", [
    ([""], "is empty"),
    (["lights", "Lights"], "repeats keyword 1"),
    (["r2d2"], "is not an English word"),
    (["one two three four five"], "at most 4"),
    (["_unknown_"], "may not start with '_'"),
    (["a" * 33], "at most 32"),
    ([], "no --keyword given"),
])
def test_bad_keyword_text_is_refused_with_one_line(tmp_path, keywords, message):
    args = [a for k in keywords for a in ("--keyword", k)] + ["--out", str(tmp_path / "m.mega")]
    r = custom(args, tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], r.stderr
    assert not (tmp_path / "m.mega").exists()


def test_a_keyword_too_long_to_say_in_a_second_is_refused(tmp_path):
    r = custom(["--keyword", "extraterritoriality reconsidered", "--out", str(tmp_path / "m.mega"),
                "--work", str(tmp_path / "run")] + TINY, tmp_path)
    assert r.returncode == 2, r.stderr
    assert "too long for the model's 1-second window" in r.stderr.strip().splitlines()[-1]


def test_a_recordings_folder_without_a_clip_is_refused_before_any_work(tmp_path):
    empty = tmp_path / "recordings"
    empty.mkdir()
    (empty / "notes.txt").write_text("not audio\n")
    r = custom(["--keyword", "lights", "--out", str(tmp_path / "m.mega"), "--work", str(tmp_path / "run"),
                "--recordings", str(empty)] + TINY, tmp_path)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "no clip of 'lights' that could be read" in last, r.stderr
    assert not (tmp_path / "run" / "text" / "words.json").exists()


def scan(model, wav):
    r = subprocess.run([CLI, "scan", "--json", "-m", model, wav], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return [json.loads(ln) for ln in r.stdout.splitlines() if '"detection"' in ln]


@pytest.mark.skipif(not os.path.exists(CLI), reason="keyword_spotter not built")
def test_tiny_run_stops_resumes_and_writes_a_model_the_runtime_uses(tmp_path):
    out, work = tmp_path / "banana.mega", tmp_path / "run"
    args = ["--keyword", "banana", "--out", str(out), "--work", str(work)] + TINY
    first = custom(args + ["--stop-after", "render"], tmp_path)
    assert first.returncode == 0, first.stderr
    assert "stopped after stage render" in first.stderr and not out.exists()
    second = custom(args, tmp_path)
    assert second.returncode == 0, second.stderr
    assert "[1/8] words    done before (resumed)" in second.stderr
    assert "[2/8] render   done before (resumed)" in second.stderr
    assert "[4/8] embed    done before" not in second.stderr  # it stopped before this stage
    assert "runtime self-test passed" in second.stderr
    assert "accuracy on real people saying the new keyword is not known" in second.stdout
    info = subprocess.run([CLI, "info", "-m", str(out)], capture_output=True, text=True)
    assert info.returncode == 0 and "banana,_silence_,_unknown_" in info.stdout, info.stdout + info.stderr
    # the keyword said by a voice, after a second and a half of quiet, as a live stream has it
    voice = rn.draw_setting(np.random.default_rng(1), "espeak-ng", "en-us", [])
    word, why = rn.fit(rn.synthesize(voice, "banana"), np.random.default_rng(1))
    assert word is not None, why
    audio = np.concatenate([np.zeros(24000, np.float32), word * 0.5, np.zeros(16000, np.float32)])
    wav = str(tmp_path / "banana.wav")
    write_wav(wav, np.round(audio * 32767).astype(np.int16))
    assert [d["label"] for d in scan(str(out), wav)] == ["banana"]
    silence = str(tmp_path / "quiet.wav")
    write_wav(silence, np.zeros(5 * 16000, np.int16))
    assert scan(str(out), silence) == []


def test_keyword_labels_are_normalized():
    assert kw.check_keywords(["  Hey   Robot ", "lights"]) == ["hey robot", "lights"]


def test_edit_distance_and_its_limit():
    assert kw.edit_distance(("B", "EH", "D"), ("B", "EH", "D"), 2) == 0
    assert kw.edit_distance(("B", "EH", "D"), ("B", "AE", "D"), 2) == 1
    assert kw.edit_distance(("B", "EH", "D"), ("R", "EH", "D", "Z"), 2) == 2
    assert kw.edit_distance(("B",), ("R", "EH", "D", "Z"), 1) == 2  # over the limit: limit + 1


def test_near_misses_share_sounds_but_are_never_the_keyword_or_said_like_it():
    lexicon = {"right": [("R", "AY", "T")], "write": [("R", "AY", "T")], "bright": [("B", "R", "AY", "T")],
               "ride": [("R", "AY", "D")], "table": [("T", "EY", "B", "AH", "L")]}
    near = kw.near_misses("right", lexicon, np.random.default_rng(0))
    assert set(near) == {"bright", "ride"}
    assert kw.homophones("right", lexicon) == ["write"]
    phrase = kw.near_misses("hey right", {**lexicon, "hey": [("HH", "EY")], "hay": [("HH", "EY")]},
                            np.random.default_rng(0))
    assert "hey" in phrase and "right" in phrase and "hey ride" in phrase and "hey right" not in phrase


def test_speech_that_says_the_keyword_is_not_keyword_free():
    spoken = [(0.0, 2.0, "WE CALL IT BEAR"), (3.0, 5.0, "THE BED IS RED"), (6.0, 8.0, "BEDTIME")]
    cut = rd.excluded(spoken, {"bed"})
    assert cut == [(2.0, 6.0)]
    assert rd.keyword_free_stretches([(0.0, 9.0)], cut) == [(0.0, 2.0), (6.0, 9.0)]
    ends = np.array([1.0, 2.5, 6.5, 7.5])
    assert rd.hop_mask(ends, cut).tolist() == [True, False, False, True]


def test_tuning_recall_weighs_the_voice_and_the_recordings_alike():
    from mega_kws_tools.custom import head as hd
    loud = np.tile([0.05, 0.05, 0.9], (12, 1))[None].repeat(3, 0)   # label 2 sure at every hop
    quiet = np.tile([0.5, 0.45, 0.05], (12, 1))[None].repeat(1, 0)  # label 2 never
    assert hd.keyword_recall([list(loud), list(quiet)], 2, 0.5, 2, 4, 4) == 0.5  # 3 of 3 and 0 of 1
    assert hd.keyword_recall([list(loud), []], 2, 0.5, 2, 4, 4) == 1.0  # no recordings: the voice alone


def test_eight_or_more_recordings_keep_every_fourth_out_of_training_to_tune():
    from mega_kws_tools.custom.fit import recording_clips
    clip = np.zeros(8000, np.float32)
    rows = [r for r, _ in recording_clips([(0, f"a{i}.wav", clip) for i in range(8)]
                                           + [(1, f"b{i}.wav", clip) for i in range(7)])]
    assert [r[2] for r in rows if r[1] == 0] == ["recording", "recording", "recording", "recording-tune"] * 2
    assert all(r[2] == "recording" for r in rows if r[1] == 1)  # seven: all train


def test_compare_judges_at_the_threshold_that_keeps_false_alarms_under_the_limit():
    from mega_kws_tools.custom.compare import judge
    q = np.zeros(14400)  # an hour of 250 ms windows
    q[[100, 200, 300]] = 0.95   # three isolated peaks: three false alarms at thresholds up to 0.95
    q[500] = 0.7                # a fourth up to 0.7
    p = np.array([[0.1, 0.97, 0.2], [0.1, 0.8, 0.1], [0.1, 0.6, 0.1]])
    out = []
    judge("m", p, q, 0.25, out)
    one = [r for r in out if r["smoothing"] == 1]
    assert one[0]["fa_per_hour"] == 1 and one[0]["threshold"] == 0.96 and one[0]["recall"] == round(1 / 3, 4)
    assert one[1]["fa_per_hour"] == 3 and one[1]["threshold"] == 0.71 and one[1]["recall"] == round(2 / 3, 4)
