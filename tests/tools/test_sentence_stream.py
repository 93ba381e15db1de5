# SPDX-License-Identifier: Apache-2.0
"""Keywords inside running speech (tools/mega_kws_tools/data/sentence_stream.py), on
test_speechocean.py's made-up corpus with a hand-written align.tsv: the
recording plays the validation speakers' sentences whose every keyword was
placed (none with a homophone), its keyword rows are the aligned words where
they are in the recording, its keyword-free rows keep clear of each keyword
by the scorer's reach, and the scorer reads it so; the windows hold each
keyword at their end with the sentence before it."""

import csv
import os
import wave

import numpy as np
import pytest

from test_speechocean import files_digest, make_corpus
from mega_kws_tools.audio import read_wav
from mega_kws_tools.data import sentence_stream as ss
from mega_kws_tools.data import speechocean as so
from mega_kws_tools.evaluation import streamscore

SR = 16000
SPEAKERS = [f"{s:04d}" for s in range(1, 9)]
TEXTS = ["PLEASE GO HOME", "TURN IT ON AND OFF", "I KNOW YOU SAID NO", "WE CALL IT BEAR", "ON AND UP"]
TRAIN = [(f"{spk}{i:05d}", spk, text) for spk in SPEAKERS for i, text in enumerate(TEXTS)]
TEST = [("009900001", "0099", "TURN IT ON")]
ALIGNED = {  # per sentence (index in TEXTS): what the aligner placed; TURN IT ON AND OFF lost its `off`
    0: [("go", 0.50, 0.80)], 1: [("on", 0.60, 0.85)], 2: [("no", 1.20, 1.45)], 4: [("on", 0.30, 0.55),
                                                                                 ("up", 0.90, 1.10)]}


def write_align(path):
    with open(path, "w") as f:
        f.write("utt\tspeaker\tsplit\tword\tstart_s\tend_s\theard\n")
        for utt, spk, text in TRAIN:
            for w, s, e in ALIGNED.get(TEXTS.index(text), []):
                f.write(f"{utt}\t{spk}\t{so.speaker_split(spk)}\t{w}\t{s:.2f}\t{e:.2f}\t{w}\n")


def val_speakers():
    v = [s for s in SPEAKERS if so.speaker_split(s) == "validation"]
    assert v and len(v) < len(SPEAKERS)  # the made-up corpus has speakers of both splits
    return v


@pytest.fixture()
def corpus(tmp_path):
    repo = str(tmp_path / "repo")
    rev = make_corpus(repo, TRAIN, TEST)
    align = str(tmp_path / "align.tsv")
    write_align(align)
    return repo, rev, align


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_the_recording_plays_placed_sentences_of_validation_speakers(corpus, tmp_path):
    repo, rev, align = corpus
    out = str(tmp_path / "rec")
    summary = ss.build(repo, align, out, "validation", rev, seed=1)
    n = len(val_speakers())
    assert summary["sentences"] == 2 * n  # PLEASE GO HOME and ON AND UP
    assert summary["left_out"] == {"homophone": n, "unplaced": n}
    assert summary["keywords"]["on"] == n and summary["keywords"]["go"] == n and summary["keywords"]["up"] == n
    rows = read_rows(out + ".csv")
    played = sorted({r["source"].split(":")[0].split("/")[1] for r in rows if r["source"]})
    assert played == sorted(u for u, spk, t in TRAIN if spk in val_speakers() and TEXTS.index(t) in (0, 4))
    with wave.open(out + ".wav") as w:
        x = np.frombuffer(w.readframes(w.getnframes()), "<i2")
    assert abs(len(x) / SR - max(float(r["offset_s"]) for r in rows)) < 1e-3
    # each keyword row is the aligned word where its sentence lies in the recording: the recording from
    # the row's onset less the aligned start is that sentence's audio
    for r in rows:
        if r["kind"] == "keyword":
            utt, text = r["source"].split("/", 1)[1].split(": ")
            sentence = read_wav(so.git_show(repo, f"{rev}:WAVE/SPEAKER{utt[:4]}/{utt}.WAV"), utt)
            (s, _), = [(s, e) for w, s, e in ALIGNED[TEXTS.index(text)] if w == r["label"]]
            a = round((float(r["onset_s"]) - s) * SR)  # the labels' times are rounded to the millisecond
            assert any(np.array_equal(x[a + d:a + d + len(sentence)], sentence) for d in range(-8, 9)), r
    # keyword-free stretches keep GUARD_BEFORE_S before and the scorer's reach after every keyword
    keywords, free = streamscore.read_stream_labels(out + ".csv")
    for a, b in free:
        for on, off, _ in keywords:
            assert b <= on - ss.GUARD_BEFORE_S + 1e-3 or a >= off + streamscore.MATCH_AFTER_OFFSET_S - 1e-3
    ss.build(repo, align, str(tmp_path / "again"), "validation", rev, seed=1)
    assert files_digest_of(out) == files_digest_of(str(tmp_path / "again"))


def files_digest_of(prefix):
    return [open(prefix + ext, "rb").read() for ext in (".wav", ".csv")]


def test_the_guard_after_a_keyword_is_the_scorers_reach():
    assert ss.MATCH_AFTER_OFFSET_S == streamscore.MATCH_AFTER_OFFSET_S


def test_the_scorer_counts_hits_and_keyword_free_false_alarms(corpus, tmp_path):
    repo, rev, align = corpus
    out = str(tmp_path / "rec")
    ss.build(repo, align, out, "validation", rev, seed=1)
    keywords, free = streamscore.read_stream_labels(out + ".csv")
    on, off, label = keywords[0]
    inside = [(a, b) for a, b in free if b - a > 0.2]
    t_free = (inside[-1][0] + inside[-1][1]) / 2
    got = streamscore.score([(off + 0.2, label), (off + 0.3, label), (t_free, "go")], keywords, free)
    assert got["detected"] == 1
    assert got["false_alarms"] == 2 and got["false_alarms_keyword_free"] == 1  # the repeat is near its word


def test_windows_hold_each_keyword_at_their_end(corpus, tmp_path):
    repo, rev, align = corpus
    out = str(tmp_path / "win")
    summary = ss.windows(ss.sk.speechocean(repo, rev), align, out, seed=2, credit="made-up")
    n_val = len(val_speakers())
    n_train = len(SPEAKERS) - n_val
    assert summary["left_out"]["homophone"] == len(SPEAKERS) and summary["left_out"]["unplaced"] == len(SPEAKERS)
    assert summary["clips"]["validation"]["go"] == 2 * n_val and summary["clips"]["training"]["go"] == 2 * n_train
    # ON AND UP: a second before the end of an `up` window always holds `on`, so no `up` window is written
    assert summary["left_out"]["crowded"] >= ss.WINDOWS * len(SPEAKERS)
    assert all("up" not in per_word for per_word in summary["clips"].values())
    with open(os.path.join(out, "validation_list.txt")) as f:
        listed = f.read().split()
    assert listed and all(so.speaker_split(p.split("/")[1][:4]) == "validation" for p in listed)
    utt = TRAIN[0][0]  # PLEASE GO HOME of speaker 0001
    sentence = read_wav(so.git_show(repo, f"{rev}:WAVE/SPEAKER{TRAIN[0][1]}/{utt}.WAV"), utt)
    for k in range(ss.WINDOWS):
        with open(os.path.join(out, "go", f"{utt}_0_{k}.wav"), "rb") as f:
            clip = read_wav(f.read(), "clip")
        assert len(clip) == SR
        # the clip is the sentence's second ending END_AFTER_S after the word (zeros before its start)
        end = next(b for b in range(len(sentence), 0, -1) if np.array_equal(sentence[max(0, b - SR):b],
                                                                             clip[max(0, SR - b):]))
        assert 0.80 + ss.END_AFTER_S[0] - 1e-3 <= end / SR <= 0.80 + ss.END_AFTER_S[1] + 1e-3
    before = files_digest(out)
    ss.windows(ss.sk.speechocean(repo, rev), align, out, seed=2, credit="made-up")
    assert files_digest(out) == before


def test_others_are_the_keyword_free_speech_of_the_same_sentences(corpus, tmp_path):
    repo, rev, align = corpus
    plain, more = str(tmp_path / "plain"), str(tmp_path / "more")
    ss.windows(ss.sk.speechocean(repo, rev), align, plain, seed=2, credit="made-up")
    summary = ss.windows(ss.sk.speechocean(repo, rev), align, more, seed=2, credit="made-up", others=3)
    # the keywords' clips are those written without --others, byte for byte
    for folder in (f for f in os.listdir(plain) if os.path.isdir(os.path.join(plain, f))):
        assert files_digest(os.path.join(plain, folder)) == files_digest(os.path.join(more, folder))
    assert not os.path.exists(os.path.join(plain, ss.OTHERS_FOLDER))
    names = sorted(os.listdir(os.path.join(more, ss.OTHERS_FOLDER)))
    assert names
    written = sum(n.get(ss.OTHERS_FOLDER, 0) for n in summary["clips"].values())
    assert written == len(names) <= 3 * 2 * len(SPEAKERS)  # two playable sentences a speaker
    placed = ss.read_align(align)
    for name in names:
        utt = name.rsplit("_", 1)[0]
        sentence = read_wav(so.git_show(repo, f"{rev}:WAVE/SPEAKER{utt[:4]}/{utt}.WAV"), utt)
        with open(os.path.join(more, ss.OTHERS_FOLDER, name), "rb") as f:
            clip = read_wav(f.read(), name)
        ends = [b for b in range(SR // 4, len(sentence) + 1, int(ss.HOP_S * SR))
                if np.array_equal(sentence[max(0, b - SR):b], clip[max(0, SR - b):])]
        assert ends, name  # a second of the sentence, ending on the grid
        for _, s, e in placed[utt]:  # where the recording's labels are keyword-free
            assert all(b / SR <= s - ss.GUARD_BEFORE_S or b / SR >= e + ss.MATCH_AFTER_OFFSET_S for b in ends)
    with open(os.path.join(more, "validation_list.txt")) as f:
        listed = set(f.read().split())
    val_others = {f"{ss.OTHERS_FOLDER}/{n}" for n in names if so.speaker_split(n[:4]) == "validation"}
    assert val_others and val_others <= listed
