#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The synthetic data's voice pool: reserved voices are refused by name, and the
splits are voice-disjoint (no voice group in two splits); make_sc10.py's
--near-miss and --accent clips leave every other clip as it was, and
merge_sets.py joins such a folder to a dataset, refusing what would break the
splits. The accented keywords are read as given and are no _unknown_ word. A festival
kept running (festival_pipe.py) writes text2wave's bytes for a process's first word and
the same length after it."""

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import types
import wave
from collections import Counter

import numpy as np
import pytest

from mega_kws_tools.data import check_splits
from mega_kws_tools.data import festival_pipe
from mega_kws_tools.evaluation import listen_check
from mega_kws_tools.data import make_sc10
from mega_kws_tools.data import merge_sets
from mega_kws_tools.data import sc10_clips
from mega_kws_tools.data import sc10_recipe as rc
from mega_kws_tools.data import sc10_render
from mega_kws_tools.data import voices as vc

GENERATE, MERGE, CHECK_SPLITS, LISTEN_CHECK = (m.__name__ for m in (make_sc10, merge_sets, check_splits, listen_check))

RESERVED = ["awb", "rms", "slt", "cmu_us_awb_arctic", "cmu_us_rms_arctic", "cmu_us_slt_arctic_hts",
            "us_slt_hts", "festvox-us-slt-hts", "festvox-kdlpc16k", "festvox-kdlpc8k", "kdlpc16k", "ked_diphone"]


ALLOWED = ["kal", "kal16", "kal_diphone", "czech_dita", "upc_ca_ona_hts", "msu_ru_nsh_clunits", "en-us", "f3",
           "Storm", "klatt4", "hindi_NSK_diphone"]


def test_reserved_names():
    for name in RESERVED:
        assert vc.is_reserved(name), name
        with pytest.raises(ValueError):
            vc.check_allowed("flite", name)
    for name in ALLOWED:
        assert not vc.is_reserved(name), name


def test_pool_has_none():
    for v in vc.ALL_VOICES:
        assert not vc.is_reserved(v.name), v.id
    with pytest.raises(ValueError):
        vc.Voice("festival", "cmu_us_slt_arctic_hts", "x", "english", "natural")


def test_generator_refuses_before_running_an_engine():
    for engine, voice, variant in (("flite", "slt", ""), ("flite", "awb", ""), ("festival", "ked_diphone", ""),
                                   ("festival", "cmu_us_slt_arctic_hts", ""), ("espeak-ng", "en-us", "rms")):
        with pytest.raises(ValueError):
            sc10_render.synthesize(dict(engine=engine, voice=voice, variant=variant, rate=1.0, pitch=100), "yes")


# sc10_clips.run_probes: a voice whose first probe fails (an engine that timed out on a busy machine) is probed
# again alone, with the long timeout, and kept once it renders; a voice that never renders is dropped after
# PROBE_RETRIES more tries. (The probes render through sc10_clips.do_task, which calls sc10_clips.synthesize.)
def test_failed_probe_is_retried_with_a_long_timeout():
    calls = []

    def fake(spk, text, timeout=rc.RENDER_TIMEOUT_S):
        calls.append((spk["voice"], timeout))
        if spk["voice"] == "never" or (spk["voice"] == "slow" and timeout < rc.PROBE_RETRY_TIMEOUT_S):
            return np.zeros(0, np.float32)
        return np.full(rc.SR // 2, 0.5, np.float32)

    probes = [("probe", 0, ("espeak-ng", name, "", "stop"), rc.RENDER_TIMEOUT_S)
              for name in ("fine", "slow", "never")]
    real, sc10_clips.synthesize = sc10_clips.synthesize, fake
    try:
        res = sc10_clips.run_probes(None, probes)
    finally:
        sc10_clips.synthesize = real
    ok = {r[0][1]: r[1] >= rc.MIN_WORD_S for r in res}
    assert ok == {"fine": True, "slow": True, "never": False}
    assert calls.count(("fine", rc.RENDER_TIMEOUT_S)) == 1
    assert calls.count(("slow", rc.PROBE_RETRY_TIMEOUT_S)) == 1
    assert calls.count(("never", rc.PROBE_RETRY_TIMEOUT_S)) == rc.PROBE_RETRIES


# festival_pipe.Renderer against text2wave, on every festival voice of the pool: one word each, the same bytes
# (the Czech voices draw from festival's random generator, reset before each word); then more words from the
# same processes, after a failed rendering too: the same length (what else drifts: festival_pipe.py).
@pytest.fixture
def fest():
    """a kept festival (festival_pipe.Renderer), closed after the test"""
    r = festival_pipe.Renderer()
    yield r
    r.close()


def test_same_bytes_as_text2wave(fest, tmp_path):
    tmp = str(tmp_path)
    voices = [v for v in vc.VOICES if v.engine == "festival"]
    assert len(voices) == 14
    words = ["yes", "left", "stop"]
    jobs = [(v, words[i % 3], 0.8 + 0.05 * i) for i, v in enumerate(voices)]
    again = ("czech_dita", "czech_krb", "czech_machac", "msu_ru_nsh_clunits", "hindi_NSK_diphone")
    jobs += [(v, "down", 1.27) for v in voices if v.name in again]
    for k, (v, word, stretch) in enumerate(jobs):
        stretch = round(stretch, 2)
        txt = os.path.join(tmp, f"{k}.txt")
        with open(txt, "w", encoding="utf-8") as f:
            f.write(v.text_for(word) + "\n")
        want, got = os.path.join(tmp, f"{k}-t2w.wav"), os.path.join(tmp, f"{k}-pipe.wav")
        assert festival_pipe.text2wave(v.name, stretch, txt, want), f"{v.id} {word} {stretch}"
        if v.name == "czech_krb":  # a rendering that fails leaves the process usable
            assert not fest.render(v.name, stretch, os.path.join(tmp, "absent.txt"), got)
        assert fest.render(v.name, stretch, txt, got), v.id
        with open(want, "rb") as a, open(got, "rb") as b:
            w, g = a.read(), b.read()
        assert len(w) > 1000, v.id
        if k < len(voices):  # a process's first word: text2wave's bytes
            assert w == g, f"{v.id} {word} {stretch}"
        else:  # later words may lose a quiet tail (festival_pipe.py), never change length
            assert (w[:44], len(w)) == (g[:44], len(g)), f"{v.id} {word} {stretch}"
    with pytest.raises(ValueError):
        fest.render('x"y', 1.0, txt, got)
    assert festival_pipe.FRESH_PROCESS <= ({v.name for v in voices})


def test_hung_festival_times_out(fest, tmp_path):
    tmp = str(tmp_path)
    fifo = os.path.join(tmp, "never-written")
    os.mkfifo(fifo)  # festival blocks reading it: the call gives up after its timeout
    assert not fest.render("kal_diphone", 1.0, fifo, os.path.join(tmp, "o.wav"), timeout=5)
    txt = os.path.join(tmp, "t.txt")
    with open(txt, "w") as f:
        f.write("yes\n")
    assert fest.render("kal_diphone", 1.0, txt, os.path.join(tmp, "o.wav"))  # a new process


def test_groups_in_one_split():
    split_of_group = {}
    for v in vc.ALL_VOICES:
        assert split_of_group.setdefault(v.group, vc.split_of(v)) == vc.split_of(v), v.group
    for split in vc.SPLITS:
        assert vc.voices_of(split), split
    # voices of one recorded speaker share a group
    groups = {v.id: v.group for v in vc.VOICES}
    assert groups["flite:kal"] == groups["festival:kal_diphone"]
    assert groups["festival:hindi_NSK_diphone"] == groups["festival:telugu_NSK_diphone"]


def test_second_pool_trains():
    # voices added after the first data set: training only, in no other pool, none held out
    assert vc.MORE_VOICES
    assert vc.ALL_VOICES == (vc.VOICES + vc.MORE_VOICES)
    assert not ({v.id for v in vc.VOICES} & {v.id for v in vc.MORE_VOICES})
    assert not ({v.group for v in vc.VOICES} & {v.group for v in vc.MORE_VOICES})
    for v in vc.MORE_VOICES:
        assert vc.split_of(v) == "training", v.id


def test_every_voice_reads_every_keyword():
    for v in vc.ALL_VOICES:
        for w in vc.KEYWORDS:
            assert v.text_for(w), (v.id, w)
        assert vc.unknown_words_for(v, ["bed"]), v.id


def test_no_unknown_word_is_a_keyword_in_its_voice():
    # "of" is how Czech-spelling voices are given "off", "app" how Germanic ones are given "up"
    by_id = {v.id: v for v in vc.ALL_VOICES}
    assert by_id["espeak-ng:cs"].reads_as_keyword("of")
    assert by_id["espeak-ng:de"].reads_as_keyword("app")
    assert not by_id["espeak-ng:en-us"].reads_as_keyword("of")
    assert not by_id["espeak-ng:cs"].reads_as_keyword("off")  # a keyword is not "read as" one
    # a doubled consonant reads as the single one: "app" is up where up is "ap"
    for vid in ("espeak-ng:cs", "espeak-ng:fi", "festival:hy_fi_mv_diphone", "festival:czech_dita"):
        assert by_id[vid].text_for("up") == "ap", vid
        assert by_id[vid].reads_as_keyword("app"), vid
    assert not by_id["espeak-ng:en-us"].reads_as_keyword("app")
    # only the word's consonant collapses: French "one" (espeak-ng reads it as English
    # "won") is not its "onne" for on
    assert by_id["espeak-ng:fr-fr"].text_for("on") == "onne"
    assert not by_id["espeak-ng:fr-fr"].reads_as_keyword("one")
    rng = np.random.default_rng(3)
    for v in vc.ALL_VOICES:
        for label in (rc.UNKNOWN, rc.NEAR):
            if label == rc.NEAR and v.script not in vc.LATIN:
                continue
            said = {sc10_render.draw_other_word(rng, v, label) for _ in range(400)}
            pool = rc.CONFUSABLE if label == rc.NEAR else \
                vc.unknown_words_for(v, rc.UNKNOWN_WORDS) + rc.SC_OTHER
            assert said <= set(pool), (v.id, said - set(pool))
            assert not ({w for w in said if v.reads_as_keyword(w)}), v.id
            assert len(said) > 10, v.id


def test_accents_read_as_given_and_are_no_unknown_word():
    def phonemes(voice, text):
        out = subprocess.run(["espeak-ng", "-q", "-x", "-v", voice, text], capture_output=True, text=True,
                             check=True).stdout
        return out.replace(" ", "").replace("\n", "")
    def bare(ph):  # without stress marks
        return ph.replace("'", "").replace(",", "")
    words = sorted(set(rc.UNKNOWN_WORDS) | set(rc.CONFUSABLE))
    for name in vc.ESPEAK_ENGLISH:
        said = {bare(phonemes(name, w)): w for w in words}
        for kw, alts in vc.ACCENT_PHONEMES.items():
            for ph in alts:
                # espeak-ng stops at a phoneme name it does not know ("AI" gives "r")
                assert phonemes(name, f"[[{ph}]]") == ph, (name, kw)
                assert bare(ph) not in said, (name, kw, ph)
    # the check can fail: [ap] is how they read "app"
    assert bare(phonemes("en-us", "app")) == "ap"


def write_manifest(tmp, rows, lists, more_fields=()):
    """a new folder under tmp with a manifest.csv of rows and the split lists"""
    d = tempfile.mkdtemp(dir=tmp)
    with open(os.path.join(d, "manifest.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["path", "split", "engine", "voice", "variant", *more_fields])
        w.writeheader()
        w.writerows(rows)
    for split in ("validation", "testing"):
        with open(os.path.join(d, f"{split}_list.txt"), "w") as f:
            f.writelines(p + "\n" for p, s in lists.items() if s == split)
    return d


def test_check_splits_catches_a_shared_voice(tmp_path):
    tool = CHECK_SPLITS
    good = [dict(path="yes/a.wav", split="training", engine="espeak-ng", voice="en-us", variant="f2"),
            dict(path="yes/b.wav", split="testing", engine="festival", voice="czech_dita", variant="")]
    d = write_manifest(tmp_path, good, {"yes/b.wav": "testing"})
    r = subprocess.run([sys.executable, "-m", tool, d], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # an _unknown_ word its voice reads as a keyword: a warning, not a failure
    said = [dict(r, label=r["path"].split("/")[0], word="") for r in good]
    said.append(dict(path="_unknown_/d.wav", split="testing", engine="festival", voice="czech_dita",
                     variant="", label="_unknown_", word="app"))
    d = write_manifest(tmp_path, said, {"yes/b.wav": "testing", "_unknown_/d.wav": "testing"}, ["label", "word"])
    r = subprocess.run([sys.executable, "-m", tool, d], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "warning: 1 _unknown_ clip(s) say a keyword" in r.stderr
    assert "_unknown_/d.wav (testing): festival:czech_dita reads 'app'" in r.stderr
    bad = good + [dict(path="no/c.wav", split="training", engine="festival", voice="czech_dita", variant="")]
    d = write_manifest(tmp_path, bad, {"yes/b.wav": "testing"})
    r = subprocess.run([sys.executable, "-m", tool, d], capture_output=True, text=True)
    assert r.returncode == 1
    assert "czech_dita" in r.stderr
    reserved = good + [dict(path="no/d.wav", split="training", engine="flite", voice="slt", variant="")]
    d = write_manifest(tmp_path, reserved, {"yes/b.wav": "testing"})
    r = subprocess.run([sys.executable, "-m", tool, d], capture_output=True, text=True)
    assert r.returncode == 1
    assert "reserved" in r.stderr


def read_manifest(d):
    with open(os.path.join(d, "manifest.csv"), newline="") as f:
        return {r["path"]: r for r in csv.DictReader(f)}


def read_lists(d):
    out = {}
    for split in ("validation", "testing"):
        with open(os.path.join(d, f"{split}_list.txt")) as f:
            out[split] = sorted(f.read().split())
    return out


# Small generations side by side: A (keywords, _unknown_, _silence_), B (A's arguments plus --near-miss 8
# --accent 6), C (those alone), H (B's held-out splits alone), the --pool more and --voices runs M and V, and
# T and P (the same run with festival's voices rendered by text2wave and by a kept festival); then A + C
# merged.
@pytest.fixture(scope="module")
def gens(tmp_path_factory):
    """the generations' folders (d(k)) and the errors of those that failed"""
    tmp = str(tmp_path_factory.mktemp("gens"))
    runs = {"a": ["--per-word", "1", "--unknown", "4", "--silence", "2"],
            "b": ["--per-word", "1", "--unknown", "4", "--silence", "2", "--near-miss", "8", "--accent", "6"],
            "c": ["--per-word", "0", "--unknown", "0", "--silence", "0", "--near-miss", "8", "--accent", "6"],
            "m": ["--per-word", "1", "--unknown", "3", "--silence", "0", "--pool", "more"],
            "v": ["--per-word", "1", "--unknown", "2", "--silence", "0", "--only-split", "training",
                  "--first-index", "100000", "--voices", "festival:upc_ca_ona_hts"],
            "h": ["--per-word", "1", "--unknown", "4", "--silence", "2", "--near-miss", "8", "--accent", "6",
                  "--keep-splits", "validation,testing"],
            "p": ["--per-word", "2", "--unknown", "8", "--silence", "1", "--festival", "pipe"],
            "t": ["--per-word", "2", "--unknown", "8", "--silence", "1"]}
    # a small babble bank, the same in all (rendering the full one took 4 minutes a run);
    # festival by text2wave but in P, so that runs can be compared byte for byte
    procs = {k: subprocess.Popen([sys.executable, "-m", GENERATE, "--out", os.path.join(tmp, k), "--jobs", "1",
                                  "--seed", "5", "--babble-words", "8", "--festival", "text2wave"] + a,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for k, a in runs.items()}
    errors = {k: p.communicate()[1] for k, p in procs.items() if p.wait() != 0}
    return types.SimpleNamespace(errors=errors, d=lambda k: os.path.join(tmp, k))


def test_near_miss_clips(gens):
    assert not gens.errors
    a, b, c = (read_manifest(gens.d(k)) for k in "abc")
    assert len(c) == 14
    assert set(b) == (set(a) | set(c))  # the near misses are added, nothing else changes
    for path, row in a.items():
        assert not (rc.is_near_miss(path) or rc.is_accent(path)), path
        assert row == b[path], path
        with open(os.path.join(gens.d("a"), path), "rb") as fa, open(os.path.join(gens.d("b"), path), "rb") as fb:
            assert fa.read() == fb.read(), path
    latin = {v.id for v in vc.VOICES if v.script in vc.LATIN}
    english = {f"espeak-ng:{n}" for n in vc.ESPEAK_ENGLISH}
    for path, row in c.items():
        assert row == b[path], path
        voice = f"{row['engine']}:{row['voice']}"
        if rc.is_accent(path):
            assert not rc.is_near_miss(path), path
            assert path.startswith(row["word"] + "/") and row["label"] == row["word"], row
            assert row["text"][2:-2] in vc.ACCENT_PHONEMES[row["word"]]
            assert voice in english
        else:
            assert path.startswith("_unknown_/") and rc.is_near_miss(path), path
            assert row["word"] in rc.CONFUSABLE
            assert voice in latin
        assert row["split"] == vc.split_of({v.id: v for v in vc.VOICES}[voice])
    assert sum(map(rc.is_accent, c)) == 6
    assert not rc.is_near_miss("_unknown_/0a7c2a8d_nohash_0.wav")  # a real clip's name
    with open(os.path.join(gens.d("b"), "README.txt")) as f:
        near = [l for l in f.read().splitlines() if l.startswith("Near-miss _unknown_ clips")]
    assert len(near) == 1
    assert near[0].endswith(": 8"), near
    with open(os.path.join(gens.d("b"), "README.txt")) as f:
        assert "Accented keyword clips (--accent, names <spk8>_a<index>_nohash_0.wav): 6" in f.read()


def test_festival_pipe_run(gens):
    # --festival pipe: a whole run, the same clips per label and split sizes as with
    # text2wave (its festival words may differ a little: festival_pipe.py)
    assert not gens.errors
    p, t = read_manifest(gens.d("p")), read_manifest(gens.d("t"))
    assert any(row["engine"] == "festival" for row in t.values())
    count = lambda m: sorted(Counter(row["label"] for row in m.values()).items())
    assert count(p) == count(t)
    for path in p:
        with wave.open(os.path.join(gens.d("p"), path)) as w:
            assert (w.getframerate(), w.getnframes()) == (16000, 16000), path


def test_keep_splits(gens):
    # --keep-splits: B's clips of those splits, byte for byte, and nothing else
    assert not gens.errors
    b, h = read_manifest(gens.d("b")), read_manifest(gens.d("h"))
    held = {path: row for path, row in b.items() if row["split"] != "training"}
    assert held
    assert h == held
    assert read_lists(gens.d("h")) == read_lists(gens.d("b"))
    for path in h:
        with open(os.path.join(gens.d("b"), path), "rb") as fb, open(os.path.join(gens.d("h"), path), "rb") as fh:
            assert fb.read() == fh.read(), path


def test_merge_equals_one_generation(gens):
    assert not gens.errors
    out = gens.d("merged")
    r = subprocess.run([sys.executable, "-m", MERGE, "--out", out, gens.d("a"), gens.d("c")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert read_lists(out) == read_lists(gens.d("b"))
    assert read_manifest(out) == read_manifest(gens.d("b"))
    for path in read_manifest(gens.d("b")):
        source = "c" if rc.is_near_miss(path) or rc.is_accent(path) else "a"
        assert os.path.samefile(os.path.join(out, path), os.path.join(gens.d(source), path))


def test_second_pool(gens):
    # --pool more: the second pool's voices alone, every clip training, mergeable into a base set
    assert not gens.errors
    m = read_manifest(gens.d("m"))
    assert len(m) == 13
    more = {v.id for v in vc.MORE_VOICES}
    for path, row in m.items():
        assert row["split"] == "training", path
        assert f"{row['engine']}:{row['voice']}" in more
    assert read_lists(gens.d("m")) == {"validation": [], "testing": []}
    out = gens.d("a+m")
    r = subprocess.run([sys.executable, "-m", MERGE, "--out", out, gens.d("a"), gens.d("m")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    check = CHECK_SPLITS
    r = subprocess.run([sys.executable, "-m", check, out], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(read_manifest(out)) == (len(read_manifest(gens.d("a"))) + 13)
    # _silence_ clips have no voice: --pool more refuses them before making anything
    r = subprocess.run([sys.executable, "-m", GENERATE, "--out", gens.d("m2"), "--pool", "more", "--silence", "2"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "--silence 0" in r.stderr
    assert not os.path.exists(gens.d("m2"))


def test_some_voices(gens):
    # --voices: clips of the named training voices only, new indices, mergeable into a base set
    assert not gens.errors
    v = read_manifest(gens.d("v"))
    assert len(v) == 12
    for path, row in v.items():
        assert (row["engine"], row["voice"], row["split"]) == ("festival", "upc_ca_ona_hts", "training"), path
    with open(os.path.join(gens.d("v"), "README.txt")) as f:
        assert "training voices (clips): festival:upc_ca_ona_hts\n" in f.read()
    r = subprocess.run([sys.executable, "-m", MERGE, "--out", gens.d("a+v"), gens.d("a"), gens.d("v")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(read_manifest(gens.d("a+v"))) == (len(read_manifest(gens.d("a"))) + 12)
    # refused before anything is made: without --only-split, a voice of another split, a reserved voice
    for extra, why in ((["--voices", "festival:pc_diphone"], "goes with --only-split"),
                       (["--only-split", "training", "--voices", "festival:lp_diphone"], "is a validation voice"),
                       (["--only-split", "testing", "--voices", "festival:czech_dita,flite:slt"], "'flite:slt' is not a voice"),
                       (["--babble-words", "-1"], "--babble-words must be 0 or more, not -1"),
                       (["--keep-splits", "validation,heldout"], "'heldout' is not a split"),
                       (["--keep-splits", "training", "--only-split", "training"], "do not go together")):
        r = subprocess.run([sys.executable, "-m", GENERATE, "--out", gens.d("v2")] + extra, capture_output=True, text=True)
        assert r.returncode != 0, extra
        assert why in r.stderr
        assert not os.path.exists(gens.d("v2"))


def test_merge_refuses(gens):
    assert not gens.errors
    # the same clip in two sources
    r = subprocess.run([sys.executable, "-m", MERGE, "--out", gens.d("twice"), gens.d("a"), gens.d("b")],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "is in both" in r.stderr
    assert not os.path.exists(gens.d("twice"))
    # a voice moved to another split: the merged splits would not be voice-disjoint
    moved = gens.d("moved")
    shutil.copytree(gens.d("c"), moved)
    rows = list(read_manifest(moved).values())
    row = next(r for r in rows if r["split"] == "training")
    row["split"] = "testing"
    with open(os.path.join(moved, "manifest.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(moved, "testing_list.txt"), "a") as f:
        f.write(row["path"] + "\n")
    r = subprocess.run([sys.executable, "-m", MERGE, "--out", gens.d("bad"), gens.d("a"), moved],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "check_splits" in r.stderr
    assert not os.path.exists(gens.d("bad"))
    # an existing output folder
    r = subprocess.run([sys.executable, "-m", MERGE, "--out", gens.d("a"), gens.d("c")],
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "exists" in r.stderr


# tools/mega_kws_tools/evaluation/listen_check.py renders training and validation voices only, and its summary splits the model's
# answers by what the listener heard.
def test_refuses_testing_voices(tmp_path):
    tmp = str(tmp_path)
    for splits in ("testing", "training,testing", "validation,bogus"):
        r = subprocess.run([sys.executable, "-m", LISTEN_CHECK,
                            "--out", os.path.join(tmp, "out"), "--splits", splits],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0, splits
        assert "testing voices are left alone" in r.stderr, splits
        assert not os.path.exists(os.path.join(tmp, "out")), splits


def test_renders_a_clean_keyword(tmp_path):
    tmp = str(tmp_path)
    listen_check.setup(tmp, 3)
    try:
        row = listen_check.render_task(("espeak-ng:en-us", "training", "go", "go", 7))
        again = listen_check.render_task(("espeak-ng:en-us", "training", "go", "go", 7))
    finally:
        shutil.rmtree(sc10_render.G["tmp_root"], ignore_errors=True)
    assert (row["voice"], row["label"], row["word"]) == ("espeak-ng:en-us", "go", "go")
    assert row == again  # its own seed: the same draw twice
    with wave.open(row["path"]) as w:
        assert (w.getframerate(), w.getnchannels()) == (16000, 1)
        assert w.getnframes() > (0.08 * 16000)


def test_summary_splits_the_model_by_the_listener():
    def row(voice, label, forced, heard, model):
        return dict(voice=voice, split="validation", label=label, word=label if label != "_unknown_" else "pup",
                    forced=forced, heard=heard, model=model)
    rows = [row("v1", "up", "up", "up", "up"), row("v1", "up", "up", "pup", "_unknown_"),
            row("v1", "up", "off", "off", "up"), row("v1", "up", "off", "of", "off"),
            row("v1", "_unknown_", "up", "up", "_unknown_"), row("v1", "_unknown_", "up", "pup", "up")]
    text = listen_check.summarize(rows, True)
    # 4 keywords: the listener gets 2 of them right among the keywords, 1 among all words; 1 of the 2
    # near misses is heard as a keyword; the model gets 2 right: 1 of the 2 the listener got, 1 of the 2 it missed
    assert "| v1 | validation | 4 | 50.0% | 25.0% | 50.0% | 50.0% | 50.0% / 50.0% |" in text
    assert "| validation voices | 4 | 50.0% | 25.0% | 50.0% | 50.0% | 50.0% / 50.0% |" in text
    assert "| up | 4 | 50.0% | 25.0% | - | 50.0% | 50.0% / 50.0% | off 2 |" in text
