# SPDX-License-Identifier: Apache-2.0
"""Keywords cut from speechocean762's sentences by forced alignment
(tools/mega_kws_tools/data/sentence_keywords.py), on a small made-up corpus in the same git layout,
its sentences spoken by flite one word at a time so that where each word lies
is known: the aligner places `go` where it was said, a cut is one second
holding that word, only the train/ half is read (a test-half speaker is
refused), validation speakers' cuts are listed as validation, and the same seed
gives the same files. Needs python3-pocketsphinx, pocketsphinx-en-us and flite
(scripts/setup.sh installs them)."""

import os
import shutil
import subprocess
import wave

import numpy as np
import pytest

from test_speechocean import files_digest, make_corpus  # the same made-up corpus layout
from mega_kws_tools.audio import write_wav
from mega_kws_tools.data import sentence_keywords as sk
from mega_kws_tools.data import speechocean as so

pytest.importorskip("pocketsphinx")
if not shutil.which("flite") or not os.path.isdir(sk.MODEL_DIR):
    pytest.skip("needs flite and pocketsphinx-en-us (scripts/setup.sh)", allow_module_level=True)

SR = 16000
GAP = np.zeros(SR // 4, dtype=np.int16)


def say(word, tmp):
    path = os.path.join(tmp, word + ".wav")
    if not os.path.exists(path):
        subprocess.run(["flite", "-t", word, "-o", path + ".8k.wav"], check=True)
        with wave.open(path + ".8k.wav") as w:
            rate, x = w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float64)
        t = np.arange(int(len(x) * SR / rate)) * rate / SR
        y = np.interp(t, np.arange(len(x)), x)  # flite speaks at 8 kHz: to 16 kHz
        write_wav(path, np.round(y).astype(np.int16))
    with wave.open(path) as w:
        return np.frombuffer(w.readframes(w.getnframes()), "<i2")


def sentence(words, tmp):
    """The words said one by one with quiet gaps, and each word's (start_s, end_s) of sound."""
    parts, spans, t = [GAP], [], len(GAP)
    for w in words:
        x = say(w, tmp)
        loud = np.flatnonzero(np.abs(x) > 0.05 * np.abs(x).max())
        spans.append(((t + loud[0]) / SR, (t + loud[-1]) / SR))
        parts += [x, GAP]
        t += len(x) + len(GAP)
    return np.concatenate(parts), spans


def test_the_aligner_places_each_word_where_it_was_said(tmp_path):
    for words in (["please", "go", "home"], ["turn", "it", "on", "now"]):
        x, spans = sentence(words, str(tmp_path))
        segs = sk.align(sk.decoder(), words, x)
        assert [w for w, _, _ in segs] == words
        for (s, e), (w, a, b) in zip(spans, segs):  # both ends within 0.1 s of the word's sound
            assert abs(a - s) < 0.1 and abs(b - e) < 0.1, (w, (s, e), (a, b))
    assert sk.align(sk.decoder(), ["please", "go", "qxzzyv"], x) == []  # a word the dictionary lacks


def test_a_cut_is_one_second_holding_the_word(tmp_path):
    x, spans = sentence(["please", "go", "home"], str(tmp_path))
    s, e = spans[1]
    clip = sk.cut(np.random.default_rng(0), x, s, e)
    assert clip.dtype == np.int16 and len(clip) == SR
    word = x[int(s * SR):int(e * SR)].astype(np.float64)
    assert np.sqrt(np.mean(clip.astype(np.float64) ** 2)) * SR > 0.8 * np.sqrt(np.mean(word ** 2)) * len(word)
    assert abs(int(clip[0])) < 50 and abs(int(clip[-1])) < 50  # faded or silent at the edges


# speakers 0001..0006; a test-half speaker 0099
TRAIN = [(f"{s:04d}{i:05d}", f"{s:04d}", text) for s in range(1, 7)
         for i, text in enumerate(["PLEASE GO HOME", "WE CALL IT BEAR"])]
TEST = [("009900001", "0099", "TURN IT ON")]


def spoken(tmp):
    return lambda rng, utt, text: sentence(text.lower().split(), tmp)[0]


def test_build_cuts_the_train_half_only_and_is_deterministic(tmp_path):
    repo, tmp = str(tmp_path / "repo"), str(tmp_path)
    rev = make_corpus(repo, TRAIN, TEST, audio=spoken(tmp))
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    stats = sk.build(sk.speechocean(repo, rev), a, 1, "made-up")
    sk.build(sk.speechocean(repo, rev), b, 1, "made-up")
    assert files_digest(a) == files_digest(b)
    n = {split: sum(so.speaker_split(f"{s:04d}") == split for s in range(1, 7)) for split in ("training", "validation")}
    assert stats["cuts"] == {split: {"go": k} for split, k in n.items() if k}
    assert sorted(os.listdir(os.path.join(a, "go"))) == sorted(f"{u}_1.wav" for u, _, t in TRAIN if "GO" in t)
    with open(os.path.join(a, "validation_list.txt")) as f:
        listed = f.read().split()
    assert len(listed) == n["validation"]
    assert all(so.speaker_split(p.split("/")[1][:4]) == "validation" for p in listed)
    assert not any(os.listdir(os.path.join(a, k)) for k in sk.KEYWORDS if k != "go")


def test_a_test_half_speaker_in_the_train_list_is_refused(tmp_path):
    repo, tmp = str(tmp_path / "repo"), str(tmp_path)
    rev = make_corpus(repo, TRAIN + [("009900002", "0099", "PLEASE GO HOME")], TEST, audio=spoken(tmp))
    with pytest.raises(SystemExit, match="test half"):
        sk.build(sk.speechocean(repo, rev), str(tmp_path / "out"), 1, "made-up")


def test_cathy_prompts_at_48_khz_stereo_are_all_training(tmp_path):
    """rhasspy/dataset-voice-cathy's layout: data/<name>.txt and data/<name>.wav, 48 kHz stereo."""
    repo, tmp = str(tmp_path / "repo"), str(tmp_path)
    os.makedirs(os.path.join(repo, "data"))
    for name, text in (("arctic_a0001_1", "Please go home."), ("arctic_a0002_1", "We call it bear.")):
        x, _ = sentence([w.strip(".").lower() for w in text.split()], tmp)
        up = np.interp(np.arange(3 * len(x)) / 3, np.arange(len(x)), x.astype(np.float64))  # 48 kHz
        with wave.open(os.path.join(repo, "data", name + ".wav"), "wb") as w:
            w.setnchannels(2)
            w.setsampwidth(2)
            w.setframerate(48000)
            w.writeframes(np.repeat(np.round(up).astype("<i2"), 2).tobytes())
        with open(os.path.join(repo, "data", name + ".txt"), "w") as f:
            f.write(text)
    git = ["git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", repo], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "prompts"], check=True)
    out = str(tmp_path / "out")
    stats = sk.build(sk.cathy(repo, "HEAD"), out, 1, "made-up")
    assert stats["sentences"] == 1 and stats["unaligned"] == 0
    assert stats["cuts"] == {"training": {"go": 1}}
    assert os.listdir(os.path.join(out, "go")) == ["cathy_arctic_a0001_1_1.wav"]
    with open(os.path.join(out, "validation_list.txt")) as f:
        assert f.read() == ""
    with wave.open(os.path.join(out, "go", "cathy_arctic_a0001_1_1.wav")) as w:
        assert (w.getframerate(), w.getnchannels(), w.getnframes()) == (SR, 1, SR)
