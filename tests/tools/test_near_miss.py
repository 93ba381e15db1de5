# SPDX-License-Identifier: Apache-2.0
"""Near misses inside running speech (tools/mega_kws_tools/data/near_miss.py):
two-second windows that end just after a word that sounds like a keyword, in the
hard examples' format. On made-up alignments: where a window ends, the silence
it is padded with, and no window ending where a keyword's detection would be a
hit. On made-up sentences flite says word by word (test_sentence_keywords'
corpus): the aligned near miss is the window's last sound, only the asked
split's speakers are read, the same seed gives the same windows, and the
output loads as hard examples. Needs python3-pocketsphinx, pocketsphinx-en-us
and flite (scripts/setup.sh installs them) for the second half."""

import os
import shutil

import numpy as np
import pytest

from mega_kws_tools.data import near_miss as nm
from mega_kws_tools.data import sentence_stream as ss
from mega_kws_tools.data import speechocean as so
from mega_kws_tools.training.mining import HardExamples

SR = 16000


def test_a_window_is_the_two_seconds_before_its_end_padded_with_silence():
    x = np.arange(1, 3 * SR + 1, dtype=np.int64).astype(np.int16)
    w = nm.window(x, SR // 2)  # the sentence starts inside the window
    assert w.shape == (2 * SR,) and w.dtype == np.int16
    assert not w[:3 * SR // 2].any() and np.array_equal(w[3 * SR // 2:], x[:SR // 2])
    w = nm.window(x, 3 * SR + SR // 4)  # and ends before the window does
    assert np.array_equal(w[:7 * SR // 4], x[SR + SR // 4:]) and not w[7 * SR // 4:].any()
    assert np.array_equal(nm.window(x, 2 * SR + 5), x[5:2 * SR + 5])


def test_windows_end_after_the_near_miss_and_never_where_a_keyword_counts():
    x = np.ones(8 * SR, dtype=np.int16)
    segs = [("one", 1.0, 1.3), ("go", 1.4, 1.7), ("an", 4.0, 4.2), ("in", 6.0, 6.03), ("the", 7.0, 7.2)]
    got = nm.windows_of(np.random.default_rng(0), x, segs, {"one", "an", "in"}, 3)
    lo, hi = ss.END_AFTER_S
    # "one" ends inside go's guard (0.3 s before its onset), "in" is too short to be a word: only "an" is cut
    assert [w for w, _, _ in got] == ["an"] * 3
    for _, end_s, win in got:
        assert 4.2 + lo <= end_s <= 4.2 + hi
        assert np.array_equal(win, nm.window(x, int(round(end_s * SR))))
    a, b = ss.guard(1.4, 1.7)
    assert a <= 1.3 + lo and 1.3 + hi <= b  # the reason "one" was left out


def test_keywords_are_refused_as_near_misses_and_cathy_is_training_only(tmp_path, capsys):
    out = str(tmp_path / "x.npz")
    with pytest.raises(SystemExit):
        nm.main(["--repo", str(tmp_path), "--words", "one,on", "-o", out])
    assert "on are keywords" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        nm.main(["--repo", str(tmp_path), "--source", "cathy", "--split", "validation", "-o", out])
    assert not os.path.exists(out)
    assert not set(nm.WORDS) & set(nm.KEYWORDS)


needs_aligner = pytest.mark.skipif(
    not shutil.which("flite") or not os.path.isdir("/usr/share/pocketsphinx/model/en-us"),
    reason="needs flite and pocketsphinx-en-us (scripts/setup.sh)")


@needs_aligner
def test_build_ends_each_window_just_after_the_aligned_near_miss(tmp_path):
    pytest.importorskip("pocketsphinx")
    from test_sentence_keywords import TEST, sentence, spoken
    from test_speechocean import make_corpus
    rows = [(f"{s:04d}{i:05d}", f"{s:04d}", text) for s in range(1, 7)
            for i, text in enumerate(["PLEASE GO HOME", "I WANT ONE NOW", "GO IN"])]
    tmp = str(tmp_path)
    repo = str(tmp_path / "repo")
    rev = make_corpus(repo, rows, TEST, audio=spoken(tmp))
    split = {f"{s:04d}": so.speaker_split(f"{s:04d}") for s in range(1, 7)}
    outs = {}
    for name in ("a", "b"):
        outs[name] = str(tmp_path / f"{name}.npz")
        assert nm.main(["--repo", repo, "--rev", rev, "--split", "training", "--words", "one,in", "--seed", "3",
                        "-o", outs[name]]) == 0
    with np.load(outs["a"]) as a, np.load(outs["b"]) as b:
        assert all(np.array_equal(a[k], b[k]) for k in ("audio", "labels", "words", "utts", "times_s"))
        trained = sorted(s for s, sp in split.items() if sp == "training")
        # "one" of each training speaker, twice; "in" follows "go" at once, so its windows are never written
        assert sorted(a["utts"].tolist()) == sorted(f"{s}00001" for s in trained for _ in range(2))
        assert set(a["words"].tolist()) == {"one"} and set(a["labels"].tolist()) == {"_unknown_"}
        x, spans = sentence(["i", "want", "one", "now"], tmp)
        s, e = spans[2]
        for end_s, win in zip(a["times_s"], a["audio"]):
            assert e - 0.1 <= end_s - ss.END_AFTER_S[0] and end_s <= e + ss.END_AFTER_S[1] + 0.1
            tail = win[-int((end_s - s + 0.1) * SR):].astype(np.float64)  # the word and the little after it
            assert np.sqrt(np.mean(tail ** 2)) > 0.2 * np.sqrt(np.mean(x[int(s * SR):int(e * SR)] ** 2.0))
    hard = HardExamples([outs["a"]], ["yes", "on", "_silence_", "_unknown_"])
    assert len(hard) == 2 * len(trained) and hard.summary() == f"_unknown_ {2 * len(trained)}"
