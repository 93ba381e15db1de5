#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Real Speech Commands clips (tools/mega_kws_tools/data/fetch_real_sc.py): the dataset's split
rule, only training/validation speakers written, nothing of a test set; and, if
MEGA_REAL_SC_DIR names a built folder, that it holds no testing-split speaker.
Runs with /usr/bin/python3 -m pytest tests/test_real_sc.py."""

import hashlib
import io
import os
import shutil
import subprocess
import sys
import types
import wave

import numpy as np
import pytest

from mega_kws_tools.data import fetch_real_sc as rs
from mega_kws_tools.data.layout import KEYWORDS, clip_splits, folder_label, listed_missing

TOOL = rs.__name__  # run with python3 -m

# speaker id -> (percentage of the which_set hash, split), computed once with the
# dataset's rule; bb05582b is the first speaker of v0.02's testing_list.txt,
# a69b9b3e the first of its validation_list.txt, 0c40e715 the first of v0.01's testing_list.txt
KNOWN = {
    "0a7c2a8d": (56.8364, "training"),
    "004ae714": (79.5749, "training"),
    "62581901": (56.6417, "training"),
    "0a196374": (29.3800, "training"),
    "a69b9b3e": (4.8811, "validation"),
    "0d82fd99": (2.5113, "validation"),
    "bb05582b": (18.1327, "testing"),
    "0c40e715": (None, "testing"),
}


def wav_bytes(x, rate=16000, channels=1):
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.asarray(x, dtype="<i2").tobytes())
    return buf.getvalue()


def tone(seconds, freq, rate=16000, amp=8000):
    t = np.arange(int(seconds * rate)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.int16)


def test_known_speakers():
    for spk, (_, split) in KNOWN.items():
        assert rs.which_set(f"yes/{spk}_nohash_0.wav") == split, spk
        # everything after _nohash_ and any folder is ignored
        assert rs.which_set(f"a/b/{spk}_nohash_7.wav") == split, spk


def test_percentages():
    for spk, (pct, _) in KNOWN.items():
        if pct is None:
            continue
        h = int(hashlib.sha1(spk.encode()).hexdigest(), 16)
        assert round((h % (2 ** 27)) * (100.0 / (2 ** 27 - 1)) - pct, 3) == 0


def test_names():
    assert rs.CLIP_RE.match("0a7c2a8d_nohash_0.wav")
    for bad in ("bed_0a7c2a8d_nohash_0.wav", "0a7c2a8d_nohash_0.wav.wav", "yes.wav", "0A7C2A8D_nohash_0.wav"):
        assert rs.CLIP_RE.match(bad) is None, bad
    assert rs.is_test_path("speech_commands_test_set_v0.02/yes/0a7c2a8d_nohash_0.wav")
    assert rs.is_test_path("data/testing/yes/0a7c2a8d_nohash_0.wav")
    assert not rs.is_test_path("speech_commands_v0.02/yes/0a7c2a8d_nohash_0.wav")


def test_fit_centered():
    x = np.arange(1, 20001, dtype=np.int16)
    y = rs.fit_centered(x)
    assert len(y) == 16000
    assert int(y[0]) == 2001
    z = rs.fit_centered(np.ones(8000, np.int16))
    assert len(z) == 16000
    assert (int(z[:4000].sum()) + int(z[12000:].sum())) == 0
    assert int(z[4000:12000].sum()) == 8000


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A small bare repository holding clips of every kind the tool must tell apart:
    (the folder for outputs, the mirror root, the bare repository, its commit)"""
    tmp = str(tmp_path_factory.mktemp("real_sc"))
    work = os.path.join(tmp, "work")
    same = wav_bytes(tone(1.0, 440))
    files = {
        # kept: a training and a validation speaker
        "speech_commands_v0.02/yes/0a7c2a8d_nohash_0.wav": same,
        "speech_commands_v0.02/no/a69b9b3e_nohash_1.wav": wav_bytes(tone(0.8, 300)),
        # kept, converted: stereo and 1.5 s -> mono, 1.000 s
        "speech_commands_v0.02/left/004ae714_nohash_0.wav": wav_bytes(np.repeat(tone(1.5, 500), 2), channels=2),
        # kept, resampled by sox: 8 kHz
        "speech_commands_v0.02/bed/0a196374_nohash_0.wav": wav_bytes(tone(1.0, 200, rate=8000), rate=8000),
        # refused: a testing-split speaker
        "speech_commands_v0.02/yes/bb05582b_nohash_0.wav": wav_bytes(tone(1.0, 600)),
        "speech_commands_v0.02/stop/0c40e715_nohash_0.wav": wav_bytes(tone(1.0, 650)),
        # dropped: the same audio as yes/0a7c2a8d_nohash_0.wav under another name
        "speech_commands_v0.02/zero/62581901_nohash_3.wav": same,  # listed after yes/
        # dropped: a git-lfs pointer, a name without a speaker id, a folder that is not a word
        "speech_commands_v0.02/up/0d82fd99_nohash_0.wav":
            b"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 32044\n",
        "speech_commands_v0.02/cat/recording1.wav": wav_bytes(tone(1.0, 700)),
        # kept: a flat <word>_<speaker>_nohash_<n>.wav in a folder that is not a word
        "speech_commands_v0.02/_unknown_/bed_0a7c2a8d_nohash_0.wav": wav_bytes(tone(1.0, 710)),
        "toy/train/go_a69b9b3e_nohash_2.wav": wav_bytes(tone(1.0, 720)),
        # refused: flat names of a testing-split speaker, in a word folder (ambiguous), of no word
        "toy/train/stop_bb05582b_nohash_0.wav": wav_bytes(tone(1.0, 730)),
        "toy/yes/no_62581901_nohash_0.wav": wav_bytes(tone(1.0, 740)),
        "toy/train/foo_62581901_nohash_1.wav": wav_bytes(tone(1.0, 750)),
        "speech_commands_v0.02/_background_noise_/white_noise.wav": wav_bytes(tone(2.5, 1000, amp=500)),
        # refused whole: the canonical test set, by path and by its README
        "speech_commands_test_set_v0.02/yes/0a7c2a8d_nohash_1.wav": wav_bytes(tone(1.0, 800)),
        "speech_commands_test_set_v0.02/no/62581901_nohash_0.wav": wav_bytes(tone(1.0, 810)),
        "kws/dataset/README.md": b"# Speech Commands Data Set Test Files v0.02\n",
        "kws/dataset/go/62581901_nohash_0.wav": wav_bytes(tone(1.0, 900)),
        "kws/dataset/on/a69b9b3e_nohash_0.wav": wav_bytes(tone(1.0, 910)),
    }
    for rel, data in files.items():
        path = os.path.join(work, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"]
    subprocess.run(git + ["init", "-q", work], check=True)
    subprocess.run(git + ["-C", work, "add", "-A"], check=True)
    subprocess.run(git + ["-C", work, "commit", "-q", "-m", "clips"], check=True)
    mirror_root = os.path.join(tmp, "mirror")
    bare = os.path.join(mirror_root, "someone+clips", "repo")
    subprocess.run(["git", "clone", "-q", "--bare", work, bare], check=True)
    commit = subprocess.run(["git", "--git-dir", bare, "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    return types.SimpleNamespace(tmp=tmp, mirror_root=mirror_root, bare=bare, commit=commit)


def run_tool(*args):
    r = subprocess.run([sys.executable, "-m", TOOL, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def clips(out):
    found = set()
    for root, _, files in os.walk(out):
        for f in files:
            if f.endswith(".wav"):
                found.add(os.path.relpath(os.path.join(root, f), out))
    return found


def check_output(repo, out, stdout, with_toy=True):
    expected = {"yes/0a7c2a8d_nohash_0.wav", "no/a69b9b3e_nohash_1.wav", "left/004ae714_nohash_0.wav",
                "bed/0a7c2a8d_nohash_0.wav", "_background_noise_/white_noise.wav"}
    if with_toy:
        expected.add("go/a69b9b3e_nohash_2.wav")
    if shutil.which("sox"):
        expected.add("bed/0a196374_nohash_0.wav")
    assert clips(out) == expected, stdout
    for rel in expected:
        with wave.open(os.path.join(out, rel)) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2), rel
            assert w.getnframes() == (40000 if "noise" in rel else 16000), rel
    assert open(os.path.join(out, "validation_list.txt")).read().split() == \
        ["go/a69b9b3e_nohash_2.wav"] * with_toy + ["no/a69b9b3e_nohash_1.wav"]
    assert open(os.path.join(out, "testing_list.txt")).read() == ""
    sources = open(os.path.join(out, "SOURCES.txt")).read()
    assert repo.commit in sources
    assert "CC BY 4.0" in sources
    assert "Pete Warden" in sources
    assert rs.check_dir(out) == []
    assert "testing-split speaker (refused)" in stdout


def test_gitdir_argument(repo):
    out = os.path.join(repo.tmp, "out_a")
    stdout = run_tool("--out", out, repo.bare)
    check_output(repo, out, stdout)
    assert "test-set path" in stdout
    assert "test-set folder (README)" in stdout
    # a second run needs --overwrite, and replaces the folder
    r = subprocess.run([sys.executable, "-m", TOOL, "--out", out, repo.bare], capture_output=True, text=True)
    assert r.returncode != 0
    check_output(repo, out, run_tool("--out", out, "--overwrite", repo.bare))


def test_sources_file_with_prefix(repo):
    src = os.path.join(repo.tmp, "sources.txt")
    with open(src, "w") as f:
        f.write(f"# comment\nsomeone/clips {repo.commit} speech_commands_v0.02\n")
    out = os.path.join(repo.tmp, "out_b")
    stdout = run_tool("--out", out, "--sources", src, "--mirror-root", repo.mirror_root)
    check_output(repo, out, stdout, with_toy=False)
    assert "test-set" not in stdout  # the prefix keeps the test sets out of the listing
    assert f"someone/clips {repo.commit} speech_commands_v0.02" in open(os.path.join(out, "SOURCES.txt")).read()


def test_check_catches_a_testing_speaker(repo):
    out = os.path.join(repo.tmp, "out_c")
    run_tool("--out", out, repo.bare)
    os.makedirs(os.path.join(out, "yes"), exist_ok=True)
    with open(os.path.join(out, "yes", "bb05582b_nohash_0.wav"), "wb") as f:
        f.write(wav_bytes(tone(1.0, 600)))
    assert any("testing-split" in p for p in rs.check_dir(out))
    r = subprocess.run([sys.executable, "-m", TOOL, "--check", out], capture_output=True, text=True)
    assert r.returncode == 1


@pytest.mark.skipif(not os.path.isdir(os.environ.get("MEGA_REAL_SC_DIR", "")),
                    reason="MEGA_REAL_SC_DIR is not a folder")
def test_no_testing_speaker():
    root = os.environ["MEGA_REAL_SC_DIR"]
    clips = [f for label in os.listdir(root) if os.path.isdir(os.path.join(root, label))
             for f in os.listdir(os.path.join(root, label)) if f.endswith(".wav") and label != rs.NOISE]
    assert clips
    assert [f for f in clips if rs.which_set(f) == "testing"] == []
    assert rs.check_dir(root) == []


# clip_splits reads the folders; listed_missing names what the lists name and the folders lack.
def test_listed_missing(tmp_path):
    root = str(tmp_path)
    for rel in ("yes/a.wav", "yes/b.wav", "cat/c.wav"):
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        open(os.path.join(root, rel), "wb").close()
    with open(os.path.join(root, "validation_list.txt"), "w") as f:
        f.write("yes/a.wav\nno/gone.wav\n")
    with open(os.path.join(root, "testing_list.txt"), "w") as f:
        f.write("cat/c.wav\ncat/lost.wav\n")
    splits = clip_splits(root)
    assert splits == {"cat/c.wav": "testing", "yes/a.wav": "validation", "yes/b.wav": "training"}
    want = {"cat/lost.wav": "testing", "no/gone.wav": "validation"}
    assert listed_missing(root) == want
    assert listed_missing(root, splits) == want
    assert list(listed_missing(root)) == sorted(want)


# The one folder -> label rule that train.py and evaluate.py share.


KWS12 = KEYWORDS + ["_silence_", "_unknown_"]

def test_kws12():
    assert folder_label("yes", KWS12) == "yes"
    assert folder_label("go", KWS12) == "go"
    assert folder_label("_silence_", KWS12) == "_silence_"
    for other in ("bed", "happy", "marvin", "_unknown_"):
        assert folder_label(other, KWS12) == "_unknown_"
    for unused in ("_background_noise_", "_scratch_"):
        assert folder_label(unused, KWS12) is None


def test_keywords_only():
    assert folder_label("off", KEYWORDS) == "off"
    for unused in ("bed", "_silence_", "_unknown_", "_background_noise_"):
        assert folder_label(unused, KEYWORDS) is None


def test_label_index_mapping():
    # evaluate.py passes {label: index}; membership is what counts
    idx = {l: i for i, l in enumerate(KWS12)}
    assert folder_label("cat", idx) == "_unknown_"
    assert folder_label("left", idx) == "left"
