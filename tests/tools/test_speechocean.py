# SPDX-License-Identifier: Apache-2.0
"""speechocean762 (tools/mega_kws_tools/data/speechocean.py) on a small made-up corpus in the
same git layout: only the train/ half is read and a test-half speaker is
refused; keyword-free means no keyword and no homophone of one; the speaker
split is fixed by the id; the same seed gives the same files, byte for byte.
Runs with /usr/bin/python3 -m pytest tests/test_speechocean.py."""

import csv
import hashlib
import os
import subprocess
import wave

import numpy as np
import pytest

from mega_kws_tools.data import speechocean as so
from mega_kws_tools.training import mine_hard

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/<folder>/ -> the root

SR = 16000


def write_wav(path, x):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(np.asarray(x, "<i2").tobytes())


def tone_audio(rng, utt, text):
    n = int(SR * (1.5 + 0.5 * (int(utt) % 3)))
    return 3000 * np.sin(2 * np.pi * 220 * np.arange(n) / SR) * (np.arange(n) > SR // 4) + rng.normal(0, 30, n)


def make_corpus(root, train_rows, test_rows, audio=tone_audio):
    """A git repository laid out as speechocean762: rows are (utt, speaker, text);
    audio(rng, utt, text) gives each utterance's samples."""
    rng = np.random.default_rng(5)
    for half, rows in (("train", train_rows), ("test", test_rows)):
        os.makedirs(os.path.join(root, half), exist_ok=True)
        with open(os.path.join(root, half, "text"), "w") as t, \
                open(os.path.join(root, half, "wav.scp"), "w") as s, \
                open(os.path.join(root, half, "utt2spk"), "w") as u:
            for utt, spk, text in rows:
                rel = f"WAVE/SPEAKER{spk}/{utt}.WAV"
                write_wav(os.path.join(root, rel), audio(rng, utt, text))
                t.write(f"{utt}\t{text}\n")
                s.write(f"{utt}\t{rel}\n")
                u.write(f"{utt} {spk}\n")
    git = ["git", "-C", root, "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", root], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "corpus"], check=True)
    return subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


# speakers 0001..0008: which split each falls in is the hash rule's, checked below
TRAIN = [(f"{s:04d}{i:05d}", f"{s:04d}", text) for s in range(1, 9)
         for i, text in enumerate(["WE CALL IT BEAR", "TOM GIVES UP BOXING", "I KNOW THE WAY",
                                   "GOING TO THE PARK NOW", "WRITE IT DOWN"])]
TEST = [("009900001", "0099", "MARK IS GOING TO SEE ELEPHANT")]


def files_digest(folder):
    h = hashlib.sha256()
    for dirpath, _, names in sorted(os.walk(folder)):
        for n in sorted(names):
            with open(os.path.join(dirpath, n), "rb") as f:
                h.update(n.encode() + f.read())
    return h.hexdigest()


def test_keyword_free_means_no_keyword_and_no_homophone():
    assert so.is_keyword_free("WE CALL IT BEAR")
    assert so.is_keyword_free("GOING TO THE PARK NOW")  # near misses stay: they must be rejected
    assert not so.is_keyword_free("TOM GIVES UP BOXING")  # up
    assert not so.is_keyword_free("I KNOW THE WAY")  # sounds as "no"
    assert not so.is_keyword_free("WRITE IT DOWN")


def test_the_speaker_split_is_fixed_by_the_id():
    splits = {s: so.speaker_split(s) for s in (f"{i:04d}" for i in range(1, 126))}
    assert set(splits.values()) == {"training", "validation"}
    n_val = sum(v == "validation" for v in splits.values())
    assert 30 <= n_val <= 70  # about VALIDATION_PERCENT of 125
    assert splits == {s: so.speaker_split(s) for s in splits}


def test_build_is_deterministic_and_reads_only_the_train_half(tmp_path):
    repo = str(tmp_path / "repo")
    rev = make_corpus(repo, TRAIN, TEST)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    summary = so.build(repo, a, rev, seed=3)
    so.build(repo, b, rev, seed=3)
    assert files_digest(a) == files_digest(b)
    n_val = sum(so.speaker_split(f"{s:04d}") == "validation" for s in range(1, 9))
    assert summary["keyword_free"] == {"training": 2 * (8 - n_val), "validation": 2 * n_val}
    written = {n[:-4] for split in ("training", "validation") for n in os.listdir(os.path.join(a, "keyword_free", split))}
    assert "009900001" not in written  # the test half is never read
    assert written == {u for u, _, t in TRAIN if so.is_keyword_free(t)}
    with open(os.path.join(a, "clips", "validation_list.txt")) as f:
        listed = f.read().split()
    assert all(so.speaker_split(p.split("/")[1][:4]) == "validation" for p in listed)
    with open(os.path.join(a, "keyword_free_validation.csv")) as f:
        rows = f.read().splitlines()[1:]
    assert rows and all(r.startswith("keyword_free,") for r in rows)
    with wave.open(os.path.join(a, "keyword_free_validation.wav")) as w:
        assert abs(w.getnframes() / SR - float(rows[-1].split(",")[2])) < 1e-3
    # the training speakers' sentences back to back too (mine_hard reads them), and only theirs
    with open(os.path.join(a, "keyword_free_training.csv")) as f:
        train_rows = list(csv.DictReader(f))
    spoken = [r["source"].split(":")[0].split("/")[1] for r in train_rows if r["detail"] == "speech/read"]
    assert sorted(spoken) == sorted(u for u, spk, t in TRAIN
                                    if so.is_keyword_free(t) and so.speaker_split(spk) == "training")
    with wave.open(os.path.join(a, "keyword_free_training.wav")) as w:
        assert abs(w.getnframes() / SR - float(train_rows[-1]["offset_s"])) < 1e-3
    # a validation sentence in a stream is refused by mine_hard (the clips folder lists its window)
    lists = [set(listed), set()]
    assert mine_hard.held_sources([r["source"] for r in train_rows], *lists) == []
    val_sources = [r.split(",", 5)[5] for r in rows if ",speech/read," in r]
    assert val_sources and mine_hard.held_sources(val_sources, *lists) == val_sources
    so.build(repo, b, rev, seed=4)  # another seed: other gaps and windows
    assert files_digest(a) != files_digest(b)


def test_a_test_half_speaker_in_the_train_list_is_refused(tmp_path):
    repo = str(tmp_path / "repo")
    leaked = TRAIN + [("009900002", "0099", "WE CALL IT BEAR")]  # a test speaker listed under train/
    rev = make_corpus(repo, leaked, TEST)
    with pytest.raises(SystemExit, match="test half"):
        so.build(repo, str(tmp_path / "out"), rev, seed=3)
